// `speclab verify-batch --in IN.h5 --out OUT.h5`: one chain-verification step (docs/verifiers.md
// V1-V3, core/verify/verify_chain.hpp) over a batch read from HDF5, written to HDF5 (docs/hdf5.md,
// the verify-batch sections). Bad input (docs/verifiers.md "Bad input") exits 2 and never creates
// or touches OUT.h5.
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/verify/verify_chain.hpp"
#include "experiments/verify_batch_io.hpp"

namespace speclab::cli {
namespace {

struct VerifyBatchOptions {
  std::string in;
  std::string out;
  bool json = false;
};

void run_verify_batch(const VerifyBatchOptions& options) {
  // Everything is read and checked before OUT.h5 is opened, so bad input never touches it.
  experiments::check_distinct_output(options.in, options.out);
  const experiments::VerifyBatchInput input = experiments::read_verify_batch_input(options.in);
  const ChainResult result = verify_chain(input.view(), input.params);
  experiments::write_verify_batch_output(options.out, options.in, input, result);

  int64_t accepted = 0;
  for (int32_t n : result.n_accepted) accepted += n;
  const double requests = static_cast<double>(input.batch);
  const double mean_accepted = static_cast<double>(accepted) / requests;
  if (options.json) {
    print_json_line({{"in", options.in},
                     {"out", options.out},
                     {"batch", input.batch},
                     {"gamma", input.gamma},
                     {"vocab", input.vocab},
                     {"method", to_string(input.params.method)},
                     {"lossy", result.lossy},
                     {"seed", input.params.seed},
                     {"step", input.params.step},
                     {"mean_accepted", mean_accepted},
                     {"mean_emitted", mean_accepted + 1.0},
                     {"residual_fallbacks", result.residual_fallbacks}});
    return;
  }
  if (quiet()) return;
  fmt::print(
      "verify-batch: B = {} requests, γ = {}, V = {}, method {} ({}{}), seed {}, step {}: "
      "{:.4f} draft tokens accepted per request on average (excluding the bonus token), "
      "{:.4f} tokens emitted per request, {} residual fallback(s); wrote {}.\n",
      input.batch, input.gamma, input.vocab, to_string(input.params.method),
      result.lossy ? "lossy" : "lossless",
      input.params.method == ChainMethod::kLenient
          ? fmt::format(", leniency {}", input.params.leniency)
          : std::string(),
      input.params.seed, input.params.step, mean_accepted, mean_accepted + 1.0,
      result.residual_fallbacks, options.out);
}

void setup_verify_batch(CLI::App& app) {
  auto options = std::make_shared<VerifyBatchOptions>();
  CLI::App* command = app.add_subcommand("verify-batch",
                                         "Verify one step of a batch of draft chains read from "
                                         "HDF5 (docs/verifiers.md V1-V3) and write the "
                                         "emitted tokens to HDF5");
  document_exit_statuses(*command, {{2,
                                     "bad input (docs/verifiers.md \"Bad input\"); OUT.h5 is "
                                     "neither created nor touched"}});
  command
      ->add_option("--in", options->in,
                   "input HDF5: probs_target f32 [B, γ+1, V], probs_draft f32 [B, γ, V] (optional "
                   "for greedy), draft_tokens i32 [B, γ], optional n_draft i32 [B]; root "
                   "attributes method, seed, optional leniency and step")
      ->required();
  command
      ->add_option("-o,--out", options->out,
                   "output HDF5 (written as OUT.partial and renamed when complete)")
      ->required();
  command->add_flag("--json", options->json,
                    "print one JSON object: B, γ, V, method, mean accepted and emitted tokens");
  command->callback([options] { run_verify_batch(*options); });
}

const CommandRegistrar kRegistrar{"verify-batch", &setup_verify_batch};

}  // namespace
}  // namespace speclab::cli
