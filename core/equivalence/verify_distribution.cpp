// `speclab verify`'s check (see verify_distribution.hpp).
#include "core/equivalence/verify_distribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "core/base/error.hpp"
#include "core/models/memo.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"

namespace speclab {
namespace {

constexpr int64_t kMaxOutcomes = 4096;
// Auto length stops here even when the support stays small (greedy decoding, top-k = 1).
constexpr int64_t kMaxAutoLength = 16;

// Requests per decode call. The engine holds [B, γ+1, V] rows at once (and allocates them afresh
// each step), so a large vocabulary gets a few dozen: 2^20 / V = 21 for SmolLM2 ran a quarter
// faster than 2^24 / V; a small vocabulary keeps the chunk (and so every seed) its results were
// published with.
int64_t chunk_size(int64_t v) {
  return v <= kMaxOutcomes ? 65536 : std::max<int64_t>(16, (int64_t{1} << 20) / v);
}

struct Node {
  std::vector<int32_t> tokens;  // after the prompt
  double prob = 1.0;
};

// Grows the support tree one token: a prefix's children are the tokens of positive probability in
// the target's row (after the sampling pipeline), in increasing id, so the nodes stay in
// lexicographic order; a prefix ending in EOS is a finished sequence and stays as it is. Returns
// false as soon as the support exceeds kMaxOutcomes (scoring no more prefixes).
bool grow(LanguageModel& target, const std::vector<int32_t>& prompt, const SamplingParams& sampling,
          std::vector<Node>& nodes) {
  const int64_t v = target.vocab();
  const int32_t eos = target.eos_token();
  std::vector<Node> next;
  for (const Node& node : nodes) {
    if (!node.tokens.empty() && node.tokens.back() == eos) {
      next.push_back(node);
      if (static_cast<int64_t>(next.size()) > kMaxOutcomes) return false;
      continue;
    }
    std::vector<int32_t> context = prompt;
    context.insert(context.end(), node.tokens.begin(), node.tokens.end());
    const ScoreRequest request{context, 1, 0};
    const std::vector<float> row = target.score({&request, 1}, sampling);
    for (int64_t t = 0; t < v; ++t) {
      if (row[t] == 0.0f) continue;
      Node child{node.tokens, node.prob * row[t]};
      child.tokens.push_back(static_cast<int32_t>(t));
      next.push_back(std::move(child));
      if (static_cast<int64_t>(next.size()) > kMaxOutcomes) return false;
    }
  }
  nodes = std::move(next);
  return true;
}

std::string too_large(const LanguageModel& target, const SamplingParams& s, int64_t length) {
  return fmt::format(
      "speclab verify tests the joint law of the first L tokens against its exact value, "
      "enumerating every sequence of positive probability under the target after the sampling "
      "pipeline (at most {0}). The support of the first {1} token(s) under target {2} (V = {3}; "
      "temperature {4}, top_k {5}, top_p {6}, min_p {7}) has more than {0} outcomes. {8}",
      kMaxOutcomes, length, target.name(), target.vocab(), s.temperature, s.top_k, s.top_p, s.min_p,
      length == 1
          ? fmt::format("Set sampling.top_k (at most 64 keeps two tokens within 64² = {} "
                        "sequences, so that the draft is exercised) or sampling.top_p to shrink "
                        "it, or check the pair at sampling.temperature = 0, where speculative "
                        "decoding must reproduce plain greedy decoding token for token",
                        kMaxOutcomes)
          : std::string("Use a shorter --length (0 picks the longest that fits), or a smaller "
                        "sampling.top_k or sampling.top_p"));
}

// Counts per category; category `outside` takes any sequence not in the support. Adds the
// draft positions tested to `tested` and reports each decode call to options.progress.
std::vector<int64_t> sample_counts(LanguageModel& target, LanguageModel* draft,
                                   const std::vector<int32_t>& prompt, DecodeConfig config,
                                   int64_t samples, int64_t length,
                                   const std::map<std::vector<int32_t>, int64_t>& category,
                                   int64_t outside, const VerifyOptions& options, int64_t& tested) {
  std::vector<int64_t> counts(outside + 1, 0);
  config.max_new_tokens = length;
  const uint64_t base_seed = config.seed;
  const int64_t chunk_requests = chunk_size(target.vocab());
  for (int64_t done = 0, chunk = 0; done < samples; done += chunk_requests, ++chunk) {
    // Requests are numbered from 0 in every call, so each chunk gets its own seed.
    config.seed = base_seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(chunk + 1));
    const std::vector<std::vector<int32_t>> prompts(std::min(chunk_requests, samples - done),
                                                    prompt);
    const DecodeResult result =
        draft != nullptr ? speculative_decode(target, *draft, options.bridge, prompts, config)
                         : plain_decode(target, prompts, config);
    for (const auto& tokens : result.tokens) {
      const auto it = category.find(tokens);
      ++counts[it == category.end() ? outside : it->second];
    }
    tested += result.metrics.tested_positions;
    if (options.progress) {
      options.progress({.planned_tokens = 2 * samples * length,
                        .tokens = result.metrics.tokens,
                        .accepted_positions = result.metrics.accepted_positions,
                        .tested_positions = result.metrics.tested_positions});
    }
  }
  return counts;
}

}  // namespace

VerifyReport verify_distribution(LanguageModel& target_model, LanguageModel& draft_model,
                                 const std::vector<int32_t>& prompt, const DecodeConfig& config,
                                 const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t v = target_model.vocab();
  if (!(options.epsilon > 0.0 && options.epsilon < 1.0)) {
    throw InvalidInput(fmt::format("--epsilon is {}; expected 0 < ε < 1", options.epsilon));
  }
  if (options.samples < 0) {
    throw InvalidInput(
        fmt::format("--samples is {}; expected ≥ 1 (or 0 to size it from ε)", options.samples));
  }
  validate_sampling_params(config.sampling);
  VerifyReport report;
  // A real model's rows cost milliseconds each and thousands of samples share a few prefixes.
  report.memoised = v > kMaxOutcomes;
  std::optional<MemoModel> target_memo, draft_memo;
  if (report.memoised) {
    target_memo.emplace(target_model);
    draft_memo.emplace(draft_model);
  }
  LanguageModel& target = report.memoised ? *target_memo : target_model;
  LanguageModel& draft = report.memoised ? *draft_memo : draft_model;

  std::vector<Node> nodes = {Node{}};
  if (options.length > 0) {
    for (int64_t l = 1; l <= options.length; ++l) {
      if (!grow(target, prompt, config.sampling, nodes)) {
        throw InvalidInput(too_large(target_model, config.sampling, l));
      }
    }
    report.length = options.length;
  } else {
    while (report.length < kMaxAutoLength) {
      std::vector<Node> deeper = nodes;
      if (!grow(target, prompt, config.sampling, deeper)) break;
      nodes = std::move(deeper);
      ++report.length;
    }
    if (report.length == 0) throw InvalidInput(too_large(target_model, config.sampling, 1));
  }
  report.support = static_cast<int64_t>(nodes.size());
  // All V^L sequences (L = 1 with EOS too): the dense indexing, nothing outside.
  int64_t all = 1;
  for (int64_t l = 0; l < report.length && all <= kMaxOutcomes; ++l) all *= v;
  const bool complete = all == report.support;
  std::map<std::vector<int32_t>, int64_t> category;
  report.expected.reserve(nodes.size() + 1);
  for (Node& node : nodes) {
    category.emplace(node.tokens, static_cast<int64_t>(report.sequences.size()));
    report.expected.push_back(node.prob);
    report.sequences.push_back(std::move(node.tokens));
  }
  if (!complete) {
    // Float rows sum to 1 within ~1e-7 each; the law over the support must sum to 1.
    double total = 0.0;
    for (double p : report.expected) total += p;
    for (double& p : report.expected) p /= total;
  }
  report.expected.push_back(0.0);  // outside the support
  report.samples = options.samples > 0
                       ? options.samples
                       : chi_square_sample_size(std::max<int64_t>(report.support, 2),
                                                options.epsilon, options.alpha, options.power);
  report.observed = sample_counts(target, &draft, prompt, config, report.samples, report.length,
                                  category, report.support, options, report.tested_positions);
  int64_t plain_tested = 0;
  std::vector<int64_t> plain =
      sample_counts(target, nullptr, prompt, config, report.samples, report.length, category,
                    report.support, options, plain_tested);
  report.draft_exercised = report.tested_positions > 0;
  if (complete && report.observed.back() == 0 && plain.back() == 0) {
    // Nothing can fall outside all V^L sequences (the engine emitted exactly L tokens each time).
    report.observed.pop_back();
    report.expected.pop_back();
    plain.pop_back();
  }
  report.outcomes = static_cast<int64_t>(report.expected.size());
  const ChiSquareResult chi = chi_square_test(report.observed, report.expected);
  report.statistic = chi.statistic;
  report.p_value = chi.p_value;
  report.bins = chi.bins;
  report.impossible_outcome = chi.impossible_category;
  report.pass = !chi.impossible() && chi.p_value >= options.alpha;
  report.epsilon_detectable = chi_square_detectable_tv(
      std::max<int64_t>(chi.bins, 2), report.samples, options.alpha, options.power);
  const TvEstimate tv = tv_distance(report.observed, report.expected, 0.99);
  report.tv_estimate = tv.estimate;
  report.tv_upper = tv.upper_bound;
  report.plain_p_value = chi_square_test(plain, report.expected).p_value;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace speclab
