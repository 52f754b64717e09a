// `speclab plan --validate`'s arithmetic, apart from its timing loop (bench/plan_validate.cpp):
// a speedup measured over interleaved rounds with its interval, the verdict of a prediction
// against it, and which term of the prediction disagreed with the measurement.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab::cli {

/// A speedup measured in R interleaved rounds (each round times plain and speculative decoding
/// of the same requests back to back, so both see the same machine): the median of the R
/// per-round ratios plain / speculative, and [low, high] = the k-th smallest and k-th largest
/// ratio, an order-statistic interval of the median: it misses only when k or more rounds fall on
/// one side, so it holds the median of the ratio's distribution with probability
/// 1 − 2·P[Binomial(R, ½) ≤ k − 1]. k is the largest for which that reaches `level` (k = 1, the
/// range [min, max], when even that falls short: fewer than 5 rounds at level 0.9), so the
/// interval narrows as rounds are added.
struct RoundsSpeedup {
  double median = 0.0, low = 0.0, high = 0.0;
  double confidence = 0.0;  ///< 1 − 2·P[Binomial(R, ½) ≤ k − 1]
  int rounds = 0;
  int k = 1;  ///< the interval's order statistics: the k-th from each end
  /// The interval's half-width relative to the median, (high − low) / (2·median).
  double relative_half_width() const { return (high - low) / (2.0 * median); }
};

/// The confidence the intervals of `plan --validate` are chosen for.
inline constexpr double kIntervalLevel = 0.9;

/// Throws InvalidInput unless both spans hold the same number R ≥ 2 of positive times.
RoundsSpeedup speedup_over_rounds(std::span<const double> plain_seconds,
                                  std::span<const double> speculative_seconds,
                                  double level = kIntervalLevel);

/// The median of `values` (the mean of the middle two for an even count); InvalidInput when empty.
double median_of(std::vector<double> values);

/// How a prediction stands against a measurement: within 10% of its median (checked first),
/// else inside its interval, else outside both.
enum class Verdict { kWithinTenPercent, kInsideInterval, kOutside };
inline constexpr double kGoalRelativeError = 0.10;
Verdict judge(double predicted, const RoundsSpeedup& measured);
std::string_view verdict_name(Verdict v);  ///< "within 10%", "inside interval", "outside"

/// The terms of the per-round model E/(γc + r + o): E, the tokens a request emits per full
/// round, and c, r, o in plain steps.
struct RoundTerms {
  double emitted = 0.0, c = 0.0, r = 0.0, o = 0.0;
};

/// E/(γc + r + o).
double per_round_speedup(const RoundTerms& terms, int64_t gamma);

/// The expected tokens a round of token-level verification emits given its drafts, with
/// accept_i = min(1, p_i(x_i)/q_i(x_i)) the probability that draft i passes its test once the
/// ones before it have: 1 + Σ_{k=1..γ} Π_{i<k} accept_i (the round's last token — residual or
/// bonus — is always emitted). The acceptance coins are averaged out exactly, so a mean over
/// rounds of this has less noise than counting what sampled rounds emitted.
double emitted_given_drafts(std::span<const double> accept);

/// The α in [0, 1] at which (1 − α^{γ+1})/(1 − α) = emitted (bisection), so that the planner's
/// geometric model of a round emits a predicted count (emitted_given_drafts, averaged). Throws
/// InvalidInput unless 1 ≤ emitted ≤ γ + 1.
double alpha_for_emitted(double emitted, int64_t gamma);

/// How much one term's disagreement moves the prediction.
struct TermEffect {
  std::string term;  ///< "acceptance α", "draft cost c", "verification cost r", "overhead o"
  double predicted = 0.0, measured = 0.0;
  double effect = 0.0;  ///< per_round_speedup with this term measured ÷ with it predicted − 1
};

/// One entry per term, in the order E, c, r, o: the per-round speedup with that single term
/// taken from `measured` and the others from `predicted`, against `predicted` alone.
std::vector<TermEffect> term_effects(const RoundTerms& predicted, const RoundTerms& measured,
                                     int64_t gamma);

/// The entry of term_effects with the largest |effect|.
TermEffect largest_effect(const std::vector<TermEffect>& effects);

}  // namespace speclab::cli
