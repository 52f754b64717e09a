// `speclab verify`'s check (see verify_distribution.hpp).
#include "experiments/verify_distribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.hpp"
#include "core/stats.hpp"

namespace speclab::experiments {
namespace {

constexpr int64_t kMaxOutcomes = 4096;
constexpr int64_t kChunk = 65536;  // requests per decode call

// p(t_1..t_L | prompt) for every sequence, from the target's own rows (plain decoding's law).
std::vector<double> exact_joint(LanguageModel& target, const std::vector<int32_t>& prompt,
                                int64_t length, const SamplingParams& sampling) {
  const int64_t v = target.vocab();
  std::vector<double> joint = {1.0};
  for (int64_t l = 0; l < length; ++l) {
    std::vector<double> next(joint.size() * v, 0.0);
    for (size_t index = 0; index < joint.size(); ++index) {
      if (joint[index] == 0.0) continue;
      std::vector<int32_t> context = prompt;
      for (int64_t k = l - 1, rest = static_cast<int64_t>(index); k >= 0; --k, rest /= v) {
        context.insert(context.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                       static_cast<int32_t>(rest % v));
      }
      const ScoreRequest request{context, 1, 0};
      const std::vector<float> row = target.score({&request, 1}, sampling);
      for (int64_t t = 0; t < v; ++t) next[index * v + t] = joint[index] * row[t];
    }
    joint = std::move(next);
  }
  return joint;
}

std::vector<int64_t> sample_counts(LanguageModel& target, LanguageModel* draft,
                                   const std::vector<int32_t>& prompt, DecodeConfig config,
                                   int64_t samples, int64_t length) {
  const int64_t v = target.vocab();
  int64_t outcomes = 1;
  for (int64_t l = 0; l < length; ++l) outcomes *= v;
  std::vector<int64_t> counts(outcomes, 0);
  config.max_new_tokens = length;
  const uint64_t base_seed = config.seed;
  for (int64_t done = 0, chunk = 0; done < samples; done += kChunk, ++chunk) {
    // Requests are numbered from 0 in every call, so each chunk gets its own seed.
    config.seed = base_seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(chunk + 1));
    const std::vector<std::vector<int32_t>> prompts(std::min(kChunk, samples - done), prompt);
    const DecodeResult result = draft != nullptr
                                    ? speculative_decode(target, *draft, prompts, config)
                                    : plain_decode(target, prompts, config);
    for (const auto& tokens : result.tokens) {
      int64_t index = 0;
      for (int32_t t : tokens) index = index * v + t;
      ++counts[index];
    }
  }
  return counts;
}

}  // namespace

VerifyReport verify_distribution(LanguageModel& target, LanguageModel& draft,
                                 const std::vector<int32_t>& prompt, const DecodeConfig& config,
                                 const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t v = target.vocab();
  if (!(options.epsilon > 0.0 && options.epsilon < 1.0)) {
    throw InvalidInput(fmt::format("--epsilon is {}; expected 0 < ε < 1", options.epsilon));
  }
  if (options.samples < 0) {
    throw InvalidInput(
        fmt::format("--samples is {}; expected ≥ 1 (or 0 to size it from ε)", options.samples));
  }
  if (v > kMaxOutcomes) {
    // Even one token's law has too many outcomes, and a draft is tested only from L = 2 on
    // (γ_b = min(γ, L − 1)), where V² outcomes would each need their exact probability and
    // enough samples of L target steps apiece.
    throw InvalidInput(fmt::format(
        "speclab verify tests the joint law of the first L tokens against its exact value, over "
        "V^L outcomes (at most {}); target {} has V = {}, so even L = 1 has too many, and a "
        "draft is only exercised from L = 2 on (V² = {:.3g} outcomes, each needing a target "
        "call for its exact probability and many samples of L target steps). Check this model "
        "pair at sampling.temperature = 0 instead, where speculative decoding must reproduce "
        "plain greedy decoding token for token, or verify the verifier on a model with V ≤ {}",
        kMaxOutcomes, target.name(), v, static_cast<double>(v) * static_cast<double>(v),
        kMaxOutcomes));
  }
  VerifyReport report;
  report.length = options.length;
  if (report.length <= 0) {
    report.length = 1;
    for (int64_t outcomes = v * v; outcomes <= kMaxOutcomes; outcomes *= v) ++report.length;
  }
  report.outcomes = 1;
  for (int64_t l = 0; l < report.length; ++l) {
    report.outcomes *= v;
    if (report.outcomes > kMaxOutcomes) {
      throw InvalidInput(fmt::format(
          "the joint law of {} tokens over V = {} has more than {} outcomes; use a shorter "
          "--length (or a model with a smaller vocabulary)",
          report.length, v, kMaxOutcomes));
    }
  }
  report.expected = exact_joint(target, prompt, report.length, config.sampling);
  report.samples = options.samples > 0
                       ? options.samples
                       : chi_square_sample_size(std::min<int64_t>(report.outcomes, 4096),
                                                options.epsilon, options.alpha, options.power);
  report.observed = sample_counts(target, &draft, prompt, config, report.samples, report.length);
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
  const std::vector<int64_t> plain =
      sample_counts(target, nullptr, prompt, config, report.samples, report.length);
  report.plain_p_value = chi_square_test(plain, report.expected).p_value;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace speclab::experiments
