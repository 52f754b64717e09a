// `speclab verify-batch --in IN.h5 --out OUT.h5`: one verification step of a batch of draft chains
// (docs/verifiers.md V1-V3, core/verify/verify_chain.hpp, and the match verifiers V8,
// core/verify/verify_match.hpp) read from HDF5, written to HDF5 (docs/hdf5.md, the verify-batch
// sections). Bad input (docs/verifiers.md "Bad input") exits 2 and never creates
// or touches OUT.h5.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/sampling/sampling.hpp"
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
  const ChainResult result = experiments::verify_batch(input);
  experiments::write_verify_batch_output(options.out, options.in, input, result);

  int64_t accepted = 0;
  for (int32_t n : result.n_accepted) accepted += n;
  const double requests = static_cast<double>(input.batch);
  const double mean_accepted = static_cast<double>(accepted) / requests;
  const std::optional<TokenSampling> sampling = input.sampling();
  if (options.json) {
    Json json = {{"in", options.in},      {"out", options.out},        {"batch", input.batch},
                 {"gamma", input.gamma},  {"vocab", input.vocab},      {"method", input.method()},
                 {"lossy", result.lossy}, {"seed", input.params.seed}, {"step", input.params.step}};
    if (sampling) json["sampling"] = to_string(*sampling);
    json["mean_accepted"] = mean_accepted;
    json["mean_emitted"] = mean_accepted + 1.0;
    json["residual_fallbacks"] = result.residual_fallbacks;
    print_json_line(json);
    return;
  }
  if (quiet()) return;
  std::string detail;
  if (sampling) {
    detail = fmt::format(", sampling {}, noise by output position{}", to_string(*sampling),
                         input.positions ? "" : ", positions absent: 0 for every request");
  } else if (input.params.method == ChainMethod::kLenient) {
    detail = fmt::format(", leniency {}", input.params.leniency);
  }
  fmt::print(
      "verify-batch: B = {} requests, γ = {}, V = {}, method {} ({}{}), seed {}{}: "
      "{:.4f} draft tokens accepted per request on average (excluding the bonus token), "
      "{:.4f} tokens emitted per request, {} residual fallback(s); wrote {}.\n",
      input.batch, input.gamma, input.vocab, input.method(), result.lossy ? "lossy" : "lossless",
      detail, input.params.seed,
      sampling ? std::string() : fmt::format(", step {}", input.params.step), mean_accepted,
      mean_accepted + 1.0, result.residual_fallbacks, options.out);
}

void setup_verify_batch(CLI::App& app) {
  auto options = std::make_shared<VerifyBatchOptions>();
  CLI::App* command = app.add_subcommand(
      "verify-batch",
      fmt::format("Verify one step of a batch of draft chains read from HDF5 with {} "
                  "(docs/verifiers.md V1-V3, V8) and write the emitted tokens to HDF5",
                  fmt::join(experiments::verify_batch_methods(), ", ")));
  document_exit_statuses(*command, {{2,
                                     "bad input (docs/verifiers.md \"Bad input\"); OUT.h5 is "
                                     "neither created nor touched"}});
  command
      ->add_option("--in", options->in,
                   "input HDF5: probs_target f32 [B, γ+1, V], probs_draft f32 [B, γ, V] (optional "
                   "for greedy, coupled, sampled-match), draft_tokens i32 [B, γ], optional "
                   "n_draft i32 [B], optional positions i64 [B] (coupled, sampled-match: each "
                   "request's output position); root attributes method, seed, optional "
                   "leniency, step and sampling (docs/hdf5.md)")
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
