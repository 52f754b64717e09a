// The files of `speclab verify-batch` (see verify_batch_io.hpp).
#include "experiments/verify_batch_io.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/suggest.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kAttributes[] = {"method", "seed", "leniency", "step", "sampling"};
constexpr std::string_view kDatasets[] = {"probs_target", "probs_draft", "draft_tokens", "n_draft",
                                          "positions"};
// The chain verifiers V1-V3 and the match verifiers (docs/verifiers.md V8), in registry order.
constexpr std::string_view kMethods[] = {"token", "greedy", "lenient", "coupled", "sampled-match"};

bool is_match(const VerifierSpec& spec) { return family_of(spec) == VerifierFamily::kMatch; }

// Every name of the file not in `known`, each with its nearest known name, in one message.
void refuse_unknown(const std::string& file, std::string_view what,
                    const std::vector<std::string>& names,
                    std::span<const std::string_view> known) {
  const std::vector<std::string> candidates(known.begin(), known.end());
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      unknown.push_back(fmt::format("'{}'{}", name, did_you_mean(name, candidates)));
    }
  }
  if (unknown.empty()) return;
  throw InvalidInput(fmt::format("{}: unknown {} {}; expected only {}", file, what,
                                 fmt::join(unknown, ", "), fmt::join(known, ", ")));
}

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

struct Params {
  VerifierSpec spec;
  ChainParams chain;
};

// The verifier named by the root attribute 'method', one of kMethods.
VerifierSpec read_method(const Hdf5Reader& reader) {
  const std::string file = reader.path().string();
  if (!reader.has_attribute("method")) {
    throw InvalidInput(fmt::format("{}: root attribute 'method' is missing; expected one of {}",
                                   file, fmt::join(kMethods, ", ")));
  }
  const std::string method = reader.read_string_attribute("method");
  if (std::find(std::begin(kMethods), std::end(kMethods), method) == std::end(kMethods)) {
    const std::vector<std::string> candidates(std::begin(kMethods), std::end(kMethods));
    throw InvalidInput(fmt::format("{}: root attribute 'method' is \"{}\"{}; expected one of {}",
                                   file, method, did_you_mean(method, candidates),
                                   fmt::join(kMethods, ", ")));
  }
  return make_verifier(method);
}

Params read_params(const Hdf5Reader& reader) {
  const std::string file = reader.path().string();
  Params params{.spec = read_method(reader)};
  const std::string method(verifier_name(params.spec));
  const bool match = is_match(params.spec);
  if (const auto* chain = std::get_if<ChainVerifier>(&params.spec)) {
    params.chain.method = chain->method;
  }
  if (!reader.has_attribute("seed")) {
    throw InvalidInput(
        fmt::format("{}: root attribute 'seed' is missing; expected an unsigned integer", file));
  }
  params.chain.seed = reader.read_attribute<uint64_t>("seed");
  if (reader.has_attribute("leniency")) {
    params.chain.leniency = reader.read_attribute<double>("leniency");
    if (params.chain.leniency != 1.0 && (match || params.chain.method != ChainMethod::kLenient)) {
      throw InvalidInput(fmt::format(
          "{}: root attribute 'leniency' is {} with method \"{}\"; leniency applies to method "
          "\"lenient\" only (remove it or set it to 1)",
          file, params.chain.leniency, method));
    }
    if (auto* chain = std::get_if<ChainVerifier>(&params.spec)) {
      chain->leniency = params.chain.leniency;
    }
  }
  if (reader.has_attribute("step")) {
    const uint64_t step = reader.read_attribute<uint64_t>("step");
    if (step > std::numeric_limits<uint32_t>::max()) {
      throw InvalidInput(fmt::format("{}: root attribute 'step' is {}; expected a value ≤ {}", file,
                                     step, std::numeric_limits<uint32_t>::max()));
    }
    if (match && step != 0) {
      // Silently ignoring it would verify every step of a caller's loop with the same noise.
      throw InvalidInput(fmt::format(
          "{}: root attribute 'step' is {} with method \"{}\", whose noise is addressed by output "
          "position, not by step: give the dataset 'positions' (the output position of each "
          "request's first draft token) and remove 'step' or set it to 0",
          file, step, method));
    }
    params.chain.step = static_cast<uint32_t>(step);
  }
  if (auto* spec = std::get_if<MatchVerifier>(&params.spec)) {
    // Plain decoding's rule: Gumbel-max for coupled (the only one it takes), inverse CDF by
    // default for sampled-match.
    spec->sampling =
        spec->method == MatchMethod::kCoupled ? TokenSampling::kGumbel : TokenSampling::kInverseCdf;
  }
  if (reader.has_attribute("sampling")) {
    const std::string text = reader.read_string_attribute("sampling");
    auto* spec = std::get_if<MatchVerifier>(&params.spec);
    if (spec == nullptr) {
      throw InvalidInput(fmt::format(
          "{}: root attribute 'sampling' is \"{}\" with method \"{}\"; sampling applies to the "
          "match verifiers only (coupled, sampled-match)",
          file, text, method));
    }
    try {
      spec->sampling = parse_token_sampling(text, "root attribute 'sampling'");
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("{}: {}", file, e.what()));
    }
    try {
      validate_match_sampling(spec->method, spec->sampling, "root attribute 'sampling'");
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("{}: {}", file, e.what()));
    }
  }
  return params;
}

VerifyBatchInput read_arrays(const Hdf5Reader& reader, Params params) {
  const std::string file = reader.path().string();
  VerifyBatchInput input;
  input.spec = std::move(params.spec);
  input.params = params.chain;
  input.probs_target = reader.read<float>("probs_target", 3, "[B, γ+1, V]");
  const std::vector<int64_t>& target_shape = input.probs_target.shape;
  if (target_shape[1] < 1) {
    throw InvalidInput(
        fmt::format("{}: dataset 'probs_target' has shape {}; expected [B, γ+1, V] with γ+1 ≥ 1",
                    file, format_shape(target_shape)));
  }
  input.batch = target_shape[0];
  input.gamma = target_shape[1] - 1;
  input.vocab = target_shape[2];
  const int64_t b = input.batch, g = input.gamma, v = input.vocab;

  input.draft_tokens = reader.read<int32_t>("draft_tokens", 2, "[B, γ]");
  check_shape(reader, "draft_tokens", input.draft_tokens.shape, {b, g}, "[B, γ]", target_shape);

  // Greedy and the match verifiers never read probs_draft; when given it must have its shape.
  if (entry_of(input.spec).needs_draft_probs || reader.has_dataset("probs_draft")) {
    input.probs_draft = reader.read<float>("probs_draft", 3, "[B, γ, V]");
    check_shape(reader, "probs_draft", input.probs_draft->shape, {b, g, v}, "[B, γ, V]",
                target_shape);
  }
  if (reader.has_dataset("n_draft")) {
    input.n_draft = reader.read<int32_t>("n_draft", 1, "[B]");
    check_shape(reader, "n_draft", input.n_draft->shape, {b}, "[B]", target_shape);
  }
  if (reader.has_dataset("positions")) {
    if (!is_match(input.spec)) {
      throw InvalidInput(fmt::format(
          "{}: dataset 'positions' given with method \"{}\"; positions apply to the match "
          "verifiers only (coupled, sampled-match), whose noise is addressed by output position; "
          "\"{}\" addresses its uniforms by the attribute 'step'",
          file, input.method(), input.method()));
    }
    input.positions = reader.read<int64_t>("positions", 1, "[B]");
    check_shape(reader, "positions", input.positions->shape, {b}, "[B]", target_shape);
    for (int64_t r = 0; r < b; ++r) {
      const int64_t position = input.positions->values[r];
      if (position < 0) {
        throw InvalidInput(fmt::format(
            "{}: dataset 'positions' holds {} for request {}; expected output positions ≥ 0 (the "
            "tokens each request generated before this step)",
            file, position, r));
      }
    }
  }
  return input;
}

}  // namespace

ChainBatch VerifyBatchInput::view() const {
  ChainBatch view;
  view.batch = batch;
  view.gamma = gamma;
  view.vocab = vocab;
  view.probs_target = probs_target.values;
  if (probs_draft) view.probs_draft = probs_draft->values;
  view.draft_tokens = draft_tokens.values;
  if (n_draft) view.n_draft = n_draft->values;
  if (positions) view.positions = positions->values;
  return view;
}

std::optional<TokenSampling> VerifyBatchInput::sampling() const {
  if (const auto* match = std::get_if<MatchVerifier>(&spec)) return match->sampling;
  return std::nullopt;
}

std::span<const std::string_view> verify_batch_input_attributes() { return kAttributes; }
std::span<const std::string_view> verify_batch_input_datasets() { return kDatasets; }
std::span<const std::string_view> verify_batch_methods() { return kMethods; }

VerifyBatchInput read_verify_batch_input(const fs::path& path) {
  const Hdf5Reader reader(path);
  const std::string file = reader.path().string();
  // Another speclab file (a run, a report, an output of verify-batch itself) has a schema
  // attribute and dozens of names of its own: say what it is rather than list them all.
  if (reader.has_attribute("schema") &&
      reader.attribute_kind("schema") == Hdf5AttributeKind::kString) {
    const std::string schema = reader.read_string_attribute("schema");
    throw InvalidInput(fmt::format(
        "{}: this is a \"{}\" file{}, not a verify-batch input; expected a file with only the "
        "datasets {} and the root attributes {} (docs/hdf5.md \"speclab verify-batch input\")",
        file, schema,
        schema == kVerifyBatchSchema ? " (what verify-batch writes: pass the --in it was made from)"
                                     : "",
        fmt::join(kDatasets, ", "), fmt::join(kAttributes, ", ")));
  }
  refuse_unknown(file, "root attribute(s)", reader.attribute_names(), kAttributes);
  refuse_unknown(file, "dataset(s)", reader.root_names(), kDatasets);
  VerifyBatchInput input = read_arrays(reader, read_params(reader));
  try {
    // The fast path checks only the values it reads; a file is checked whole, so that a NaN in a
    // row this draw happened not to need is still reported (docs/verifiers.md "Bad input").
    if (const auto* match = std::get_if<MatchVerifier>(&input.spec)) {
      validate_match_batch(input.view(), MatchParams{.method = match->method,
                                                     .sampling = match->sampling,
                                                     .seed = input.params.seed});
    } else {
      validate_chain_batch(input.view(), input.params);
    }
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("{}: {}", file, e.what()));
  }
  return input;
}

ChainResult verify_batch(const VerifyBatchInput& input) {
  return verify(input.spec, input.view(), input.params.seed, input.params.step);
}

void write_verify_batch_output(const fs::path& out, const fs::path& source,
                               const VerifyBatchInput& input, const ChainResult& result) {
  const int64_t b = input.batch, g = input.gamma;
  Hdf5Writer writer(out);
  writer.write("emitted_tokens", result.emitted_tokens, std::vector<int64_t>{b, g + 1});
  writer.write("n_accepted", result.n_accepted, std::vector<int64_t>{b});
  writer.write("accept_mask", result.accept_mask, std::vector<int64_t>{b, g});
  writer.write("residual_fallback", result.residual_fallback, std::vector<int64_t>{b});
  writer.write_attribute("schema", kVerifyBatchSchema);
  writer.write_attribute<int64_t>("schema_version", kVerifyBatchSchemaVersion);
  writer.write_attribute("method", input.method());
  if (const std::optional<TokenSampling> sampling = input.sampling()) {
    writer.write_attribute("sampling", to_string(*sampling));
  }
  writer.write_attribute<double>("leniency", input.params.leniency);
  writer.write_attribute<uint64_t>("seed", input.params.seed);
  writer.write_attribute<uint64_t>("step", input.params.step);
  writer.write_attribute<int64_t>("lossy", result.lossy ? 1 : 0);
  writer.write_attribute<int64_t>("residual_fallbacks", result.residual_fallbacks);
  writer.write_attribute<int64_t>("batch", b);
  writer.write_attribute<int64_t>("gamma", g);
  writer.write_attribute<int64_t>("vocab", input.vocab);
  writer.write_attribute("source", source.string());
  writer.commit();
}

void check_distinct_output(const fs::path& in, const fs::path& out) {
  std::error_code ec;
  if (fs::equivalent(in, out, ec) && !ec) {
    throw InvalidInput(fmt::format(
        "--out {} is the input file {}; writing it would replace the batch being verified, so "
        "choose another --out",
        out.string(), in.string()));
  }
}

}  // namespace speclab::experiments
