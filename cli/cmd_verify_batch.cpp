// `speclab verify-batch --in IN.h5 --out OUT.h5`: one chain-verification step (docs/verifiers.md
// V1-V3, core/verify/verify_chain.hpp) over a batch read from HDF5, written to HDF5 (docs/hdf5.md,
// the verify-batch sections). Bad input (docs/verifiers.md "Bad input") exits 2 and never creates
// or touches OUT.h5.
#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/base/error.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab::cli {
namespace {

constexpr const char* kSchema = "speclab.verify_batch";
constexpr int64_t kSchemaVersion = 1;

struct VerifyBatchOptions {
  std::string in;
  std::string out;
};

// Everything read from IN.h5, owned here because ChainBatch only borrows.
struct BatchInput {
  Hdf5Array<float> probs_target;
  std::optional<Hdf5Array<float>> probs_draft;
  Hdf5Array<int32_t> draft_tokens;
  std::optional<Hdf5Array<int32_t>> n_draft;
  ChainParams params;
  int64_t batch = 0;
  int64_t gamma = 0;
  int64_t vocab = 0;
};

// A dataset whose shape disagrees with probs_target: the message names both datasets and shapes.
void check_shape(const Hdf5Reader& reader, std::string_view name, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& expected, std::string_view dims,
                 const std::vector<int64_t>& target_shape) {
  if (shape != expected) {
    throw InvalidInput(fmt::format(
        "{}: dataset '{}' has shape {}; expected {} = {} to agree with 'probs_target' shape {} "
        "[B, γ+1, V]",
        reader.path().string(), name, format_shape(shape), dims, format_shape(expected),
        format_shape(target_shape)));
  }
}

ChainParams read_params(const Hdf5Reader& reader) {
  const std::string file = reader.path().string();
  ChainParams params;
  if (!reader.has_attribute("method")) {
    throw InvalidInput(fmt::format(
        "{}: root attribute 'method' is missing; expected \"token\", \"greedy\" or \"lenient\"",
        file));
  }
  const std::string method = reader.read_string_attribute("method");
  try {
    params.method = parse_chain_method(method);
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{}: root attribute {}", file, e.what()));
  }
  if (!reader.has_attribute("seed")) {
    throw InvalidInput(
        fmt::format("{}: root attribute 'seed' is missing; expected an unsigned integer", file));
  }
  params.seed = reader.read_uint64_attribute("seed");
  if (reader.has_attribute("leniency")) {
    params.leniency = reader.read_double_attribute("leniency");
    if (params.method != ChainMethod::kLenient && params.leniency != 1.0) {
      throw InvalidInput(fmt::format(
          "{}: root attribute 'leniency' is {} with method \"{}\"; leniency applies to method "
          "\"lenient\" only (remove it or set it to 1)",
          file, params.leniency, method));
    }
  }
  if (reader.has_attribute("step")) {
    const uint64_t step = reader.read_uint64_attribute("step");
    if (step > std::numeric_limits<uint32_t>::max()) {
      throw InvalidInput(fmt::format("{}: root attribute 'step' is {}; expected a value ≤ {}", file,
                                     step, std::numeric_limits<uint32_t>::max()));
    }
    params.step = static_cast<uint32_t>(step);
  }
  return params;
}

BatchInput read_input(const std::string& path) {
  const Hdf5Reader reader(path);
  BatchInput input;
  input.params = read_params(reader);

  input.probs_target = reader.read_float("probs_target", 3, "[B, γ+1, V]");
  const std::vector<int64_t>& target_shape = input.probs_target.shape;
  if (target_shape[1] < 1) {
    throw InvalidInput(
        fmt::format("{}: dataset 'probs_target' has shape {}; expected [B, γ+1, V] with γ+1 ≥ 1",
                    path, format_shape(target_shape)));
  }
  input.batch = target_shape[0];
  input.gamma = target_shape[1] - 1;
  input.vocab = target_shape[2];
  const int64_t b = input.batch, g = input.gamma, v = input.vocab;

  input.draft_tokens = reader.read_int32("draft_tokens", 2, "[B, γ]");
  check_shape(reader, "draft_tokens", input.draft_tokens.shape, {b, g}, "[B, γ]", target_shape);

  const bool greedy = input.params.method == ChainMethod::kGreedy;
  if (!greedy || reader.has_dataset("probs_draft")) {
    input.probs_draft = reader.read_float("probs_draft", 3, "[B, γ, V]");
    check_shape(reader, "probs_draft", input.probs_draft->shape, {b, g, v}, "[B, γ, V]",
                target_shape);
  }
  if (reader.has_dataset("n_draft")) {
    input.n_draft = reader.read_int32("n_draft", 1, "[B]");
    check_shape(reader, "n_draft", input.n_draft->shape, {b}, "[B]", target_shape);
  }
  return input;
}

ChainBatch borrow(const BatchInput& input) {
  ChainBatch batch;
  batch.batch = input.batch;
  batch.gamma = input.gamma;
  batch.vocab = input.vocab;
  batch.probs_target = input.probs_target.values;
  if (input.probs_draft) batch.probs_draft = input.probs_draft->values;
  batch.draft_tokens = input.draft_tokens.values;
  if (input.n_draft) batch.n_draft = input.n_draft->values;
  return batch;
}

void write_output(const std::string& out, const std::string& in, const BatchInput& input,
                  const ChainResult& result) {
  const int64_t b = input.batch, g = input.gamma;
  Hdf5Writer writer(out);
  writer.write("emitted_tokens", result.emitted_tokens, std::vector<int64_t>{b, g + 1});
  writer.write("n_accepted", result.n_accepted, std::vector<int64_t>{b});
  writer.write("accept_mask", result.accept_mask, std::vector<int64_t>{b, g});
  writer.write("residual_fallback", result.residual_fallback, std::vector<int64_t>{b});
  writer.write_string_attribute("schema", kSchema);
  writer.write_int64_attribute("schema_version", kSchemaVersion);
  writer.write_string_attribute("method", to_string(input.params.method));
  writer.write_double_attribute("leniency", input.params.leniency);
  writer.write_uint64_attribute("seed", input.params.seed);
  writer.write_uint64_attribute("step", input.params.step);
  writer.write_int64_attribute("lossy", result.lossy ? 1 : 0);
  writer.write_int64_attribute("residual_fallbacks", result.residual_fallbacks);
  writer.write_int64_attribute("batch", b);
  writer.write_int64_attribute("gamma", g);
  writer.write_int64_attribute("vocab", input.vocab);
  writer.write_string_attribute("source", in);
  writer.commit();
}

void run_verify_batch(const VerifyBatchOptions& options) {
  // Everything is read and checked before OUT.h5 is opened, and the reader is closed by then, so
  // --out may even name the input file.
  const BatchInput input = read_input(options.in);
  const ChainBatch batch = borrow(input);
  ChainResult result;
  try {
    // The fast path checks only the values it reads; a file is checked whole, so that a NaN in a
    // row this draw happened not to need is still reported (docs/verifiers.md "Bad input").
    validate_chain_batch(batch, input.params);
    result = verify_chain(batch, input.params);
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{}: {}", options.in, e.what()));
  }
  write_output(options.out, options.in, input, result);

  int64_t accepted = 0;
  for (int32_t n : result.n_accepted) accepted += n;
  const double requests = static_cast<double>(input.batch);
  const double mean_accepted = static_cast<double>(accepted) / requests;
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
  command
      ->add_option("--in", options->in,
                   "input HDF5: probs_target f32 [B, γ+1, V], probs_draft f32 [B, γ, V] (optional "
                   "for greedy), draft_tokens i32 [B, γ], optional n_draft i32 [B]; root "
                   "attributes method, seed, optional leniency and step")
      ->required();
  command
      ->add_option("--out", options->out,
                   "output HDF5 (written as OUT.partial and renamed when complete)")
      ->required();
  command->callback([options] { run_verify_batch(*options); });
}

const CommandRegistrar kRegistrar{"verify-batch", &setup_verify_batch};

}  // namespace
}  // namespace speclab::cli
