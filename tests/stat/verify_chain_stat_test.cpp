// Statistical layer of the chain verifiers (docs/verifiers.md V1-V3, docs/randomness.md;
// docs/testing.md "Statistical checks"): verify_chain (the fast path) and verify_chain_reference
// fed with Philox-addressed drafts, against the exact rational laws of core/exact/exact.hpp — joint
// emitted sequences of one step, multi-step Markov streams, the first-token marginal and acceptance
// at V = 32000, and the acceptance closed forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/exact/exact.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/synthetic_batch.hpp"
#include "core/verify/verify_chain.hpp"
#include "tests/support/chain_fixture.hpp"
#include "tests/support/markov_stream.hpp"
#include "tests/support/stat_support.hpp"

namespace speclab {
namespace {

using exact::Q;
using testing::fill_row;
using testing::fits;
using testing::OwnedChainBatch;
using testing::stat_seed;

// The suite may fail falsely with probability ≤ 1e-6 (docs/testing.md); it is split by Bonferroni
// over every check below, so each runs at alpha = 1e-6 / 25 = 4e-8. The count:
//   TokenJointMatchesExact 2, ReferenceJointMatchesExact 1, LenientJointMatchesItsExactLaw 2,
//   LenientFirstTokenIsNotTarget 1 (the positive control; the expected rejection is not a
//   false-failure risk, see there), GreedyJointMatchesExact 2, TokenStreamMatchesTargetChain 1,
//   LenientStreamMatchesExactStream 1, SixTokenStreamMatchesTargetChain 3,
//   LargeVocabMatchesTargetAndClosedForms 6 (χ², 4 Wilson, 1 z), AcceptedLengthMatchesExact 3 × 2.
constexpr int64_t kSuiteChecks = 25;
const double kAlpha = bonferroni_level(testing::kStatSuiteFalseFailureRate, kSuiteChecks);

// Checks run in this process; an environment compares them with kSuiteChecks at the end, so a
// check added without raising the count fails the suite instead of silently loosening its level.
std::atomic<int64_t> g_checks_run{0};

class CheckBudget : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_LE(g_checks_run.load(), kSuiteChecks)
        << "VerifyChainStat ran more statistical checks than kSuiteChecks; raise it";
  }
};
[[maybe_unused]] ::testing::Environment* const kBudget =
    ::testing::AddGlobalTestEnvironment(new CheckBudget);

// Requests per verify_chain call. Each call is one OpenMP region, and on a loaded 2-core machine a
// region's barrier can wait a scheduler slice (~20 ms) for a descheduled thread: at 4096 requests
// per call the suite took 24 s under load instead of 2 s. At 65536 the small instances' rows are
// still only a few MB and a test makes at most ~30 calls.
constexpr int64_t kBatch = 65536;

double to_double(const Q& x) { return x.convert_to<double>(); }

// One verification step with context-free rows, as integer weights. Totals are powers of two where
// possible, so the float rows equal the rationals exactly and the exact law is the law sampled.
struct StepInstance {
  std::string name;
  int vocab = 0;
  std::vector<std::vector<int>> target;  // [γ+1][V] p_1..p_{γ+1}
  std::vector<std::vector<int>> draft;   // [γ][V] q_1..q_γ
  int gamma() const { return static_cast<int>(draft.size()); }
};

// V = 3, γ = 2. q_2 puts mass on token 0 where p_2 is 0 (always rejected there); p_3 is the bonus.
StepInstance instance_v3_g2() {
  return {"v3g2", 3, {{4, 2, 2}, {0, 3, 5}, {6, 1, 1}}, {{1, 5, 2}, {2, 2, 4}}};
}

// V = 4, γ = 3. q_1 drafts token 3 where p_1 is 0; q_2 is 0 on token 0 where p_2 is not (only the
// residual emits it); q_3 is one-hot (a deterministic draft); p_3 is uniform (greedy ties).
StepInstance instance_v4_g3() {
  return {"v4g3",
          4,
          {{8, 4, 4, 0}, {1, 7, 0, 8}, {4, 4, 4, 4}, {2, 6, 3, 5}},
          {{2, 2, 6, 6}, {0, 8, 4, 4}, {16, 0, 0, 0}}};
}

// docs/verifiers.md V5's test vector: q = (2/3, 1/3), p = (1/3, 2/3), γ = 2; E[n] = 10/9 under V1.
StepInstance instance_spec_vector() {
  return {"spec_vector", 2, {{1, 2}, {1, 2}, {1, 2}}, {{2, 1}, {2, 1}}};
}

exact::StepResult enumerate(const StepInstance& inst, const exact::Method& method) {
  std::vector<exact::Row> target, draft;
  for (const auto& w : inst.target) target.push_back(testing::exact_weights_row(w));
  for (const auto& w : inst.draft) draft.push_back(testing::exact_weights_row(w));
  return exact::enumerate_step(target, draft, method);
}

// Emitted sequences of length 1..γ+1 as categories: offset(len) + Σ_k token_k·V^k.
struct SequenceIndex {
  int vocab = 0;
  int max_length = 0;
  std::vector<int64_t> offset;  // [max_length + 2]

  SequenceIndex(int v, int max_len) : vocab(v), max_length(max_len), offset(max_len + 2, 0) {
    int64_t power = 1;
    for (int len = 1; len <= max_len; ++len) {
      power *= v;
      offset[len + 1] = offset[len] + power;
    }
  }
  int64_t size() const { return offset[max_length + 1]; }
  int64_t index(const int32_t* tokens, int len) const {
    int64_t code = 0;
    for (int k = len - 1; k >= 0; --k) code = code * vocab + tokens[k];
    return offset[len] + code;
  }
  exact::Sequence sequence(int64_t category) const {
    int len = 1;
    while (category >= offset[len + 1]) ++len;
    int64_t code = category - offset[len];
    exact::Sequence out;
    for (int k = 0; k < len; ++k, code /= vocab) out.push_back(static_cast<int>(code % vocab));
    return out;
  }
  std::vector<double> probs(const exact::Distribution& dist) const {
    std::vector<double> p(size(), 0.0);
    for (const auto& [seq, prob] : dist) {
      const std::vector<int32_t> tokens(seq.begin(), seq.end());
      p[index(tokens.data(), static_cast<int>(seq.size()))] = to_double(prob);
    }
    return p;
  }
};

// What sampling one step N times produced.
struct StepSamples {
  std::vector<int64_t> sequences;     // [Σ V^len] counts by SequenceIndex
  std::vector<int64_t> first_tokens;  // [V]
  std::vector<int64_t> n_accepted;    // [γ+1] histogram of n
};

// Which implementation of V1-V3 a check samples: the fast path or the reference (both carry the
// mutant hooks of core/base/mutants.hpp, so both must be sampled).
enum class Path { kFast, kReference };

ChainResult run_path(Path path, const ChainBatch& batch, const ChainParams& params) {
  return path == Path::kFast ? verify_chain(batch, params) : verify_chain_reference(batch, params);
}

// N independent verification steps of `inst`: sample s is request id s (step `params.step`), its
// drafts x_i ~ q_i come from the kDraftSample uniforms at (seed; s, step, i), and the verifier
// draws its own uniforms at the same request id, so no uniform is shared between samples.
StepSamples sample_steps(const StepInstance& inst, const ChainParams& params, int64_t n_samples,
                         Path path = Path::kFast) {
  const int g = inst.gamma(), v = inst.vocab;
  const SequenceIndex index(v, g + 1);
  OwnedChainBatch batch(kBatch, g, v);
  batch.request_ids.resize(kBatch);
  for (int64_t r = 0; r < kBatch; ++r) {
    for (int i = 0; i <= g; ++i) fill_row(batch.target_row(r, i), inst.target[i]);
    for (int i = 0; i < g; ++i) fill_row(batch.draft_row(r, i), inst.draft[i]);
  }
  StepSamples out{std::vector<int64_t>(index.size(), 0), std::vector<int64_t>(v, 0),
                  std::vector<int64_t>(g + 1, 0)};
  for (int64_t start = 0; start < n_samples; start += kBatch) {
    const int64_t b = std::min(kBatch, n_samples - start);
    for (int64_t r = 0; r < b; ++r) {
      const auto id = static_cast<uint32_t>(start + r);
      batch.request_ids[r] = id;
      for (int i = 0; i < g; ++i) {
        const RandomAddress a{params.seed,           id, params.step, static_cast<uint32_t>(i + 1),
                              Purpose::kDraftSample, 0};
        batch.token(r, i) =
            sample_categorical({batch.draft_row(r, i), static_cast<size_t>(v)}, philox_bits(a));
      }
    }
    ChainBatch view = batch.view();
    view.batch = b;
    view.probs_target = view.probs_target.first(b * (g + 1) * v);
    view.probs_draft = view.probs_draft.first(b * g * v);
    view.draft_tokens = view.draft_tokens.first(b * g);
    view.request_ids = view.request_ids.first(b);
    const ChainResult res = run_path(path, view, params);
    for (int64_t r = 0; r < b; ++r) {
      const int n = res.n_accepted[r];
      const int32_t* emitted = &res.emitted_tokens[r * (g + 1)];
      ++out.sequences[index.index(emitted, n + 1)];
      ++out.first_tokens[emitted[0]];
      ++out.n_accepted[n];
    }
  }
  return out;
}

// Runs one counted χ² check, prints and records it.
ChiSquareResult chi_square_check(const std::string& label, const std::vector<int64_t>& observed,
                                 const std::vector<double>& probs, uint64_t seed) {
  ++g_checks_run;
  const ChiSquareResult r = chi_square_test(observed, probs);
  testing::report_chi_square(label, r, kAlpha, seed);
  return r;
}

// The joint law of the emitted sequence of one step against the exact enumeration.
void expect_joint_matches(const StepInstance& inst, const ChainParams& base,
                          const exact::Method& method, int64_t n_samples, Path path = Path::kFast) {
  ChainParams params = base;
  params.seed = stat_seed(inst.name);
  const exact::StepResult exact_law = enumerate(inst, method);
  const StepSamples s = sample_steps(inst, params, n_samples, path);
  const SequenceIndex index(inst.vocab, inst.gamma() + 1);
  const ChiSquareResult r =
      chi_square_check(inst.name, s.sequences, index.probs(exact_law.distribution), params.seed);
  EXPECT_TRUE(fits(r, kAlpha, params.seed))
      << inst.name
      << (r.impossible() ? ": impossible sequence " +
                               exact::sequence_key(index.sequence(r.impossible_category))
                         : std::string());
}

// N per instance, from ε = sqrt(λ/4N) at power 0.99 and α ≈ 4.8e-8 (each run prints its own):
// v3g2 600k over 25 bins detects ε ≈ 0.0065, v4g3 900k over 50 bins ε ≈ 0.0059. One step costs
// well under a microsecond here, so the margin below the ε = 0.01 of docs/testing.md is cheap.
TEST(VerifyChainStat, TokenJointMatchesExact) {
  const ChainParams params{ChainMethod::kToken, 1.0, 0, 0};
  expect_joint_matches(instance_v3_g2(), params, {ChainMethod::kToken, 1}, 600'000);
  expect_joint_matches(instance_v4_g3(), params, {ChainMethod::kToken, 1}, 900'000);
}

// The same law through verify_chain_reference, whose code paths (token_accepts, the residual
// loop, the bonus) are its own: v4g3, N = 900k over 50 bins, ε ≈ 0.0059.
TEST(VerifyChainStat, ReferenceJointMatchesExact) {
  expect_joint_matches(instance_v4_g3(), {ChainMethod::kToken, 1.0, 0, 0}, {ChainMethod::kToken, 1},
                       900'000, Path::kReference);
}

// V3 is lossy: its law is not the target's, but it is a known law, and the random layer must
// realise exactly that one.
TEST(VerifyChainStat, LenientJointMatchesItsExactLaw) {
  const ChainParams params{ChainMethod::kLenient, 0.5, 0, 0};
  const exact::Method method{ChainMethod::kLenient, Q(1, 2)};
  expect_joint_matches(instance_v3_g2(), params, method, 600'000);
  expect_joint_matches(instance_v4_g3(), params, method, 900'000);
}

// The lenient first-token marginal differs from p_1, and a sample of this size shows it.
// v3g2, l = 1/2: p_1 = (1/2, 1/4, 1/4), q_1 = (1/8, 5/8, 1/4), l·q_1 = (1/16, 5/16, 1/8).
// Accept x w.p. min(1, p/(l·q)) = (1, 4/5, 1), so P(accept x_1 = a) = (1/8, 1/2, 1/4), rejection
// mass 1/8; residual ∝ max(0, p − l·q) = (7/16, 0, 1/8) → (7/9, 0, 2/9). Marginal
// m = (1/8 + 7/72, 1/2, 1/4 + 2/72) = (2/9, 1/2, 5/18), TV(m, p) = 5/18.
// Against p the non-centrality is N·Σ(m−p)²/p = N·(2·(5/18)² + 4·(1/4)² + 4·(1/36)²) ≈ 0.407·N
// = 8.1k at N = 20k, while the α ≈ 4.8e-8 critical value of χ²_2 is 2·ln(1/α) ≈ 34: a failure to
// reject is astronomically unlikely, so that assertion takes no share of the false-failure budget.
TEST(VerifyChainStat, LenientFirstTokenIsNotTarget) {
  const StepInstance inst = instance_v3_g2();
  const exact::StepResult exact_law = enumerate(inst, {ChainMethod::kLenient, Q(1, 2)});
  ASSERT_EQ(exact_law.first_token_marginal, (exact::Row{Q(2, 9), Q(1, 2), Q(5, 18)}));

  const ChainParams params{ChainMethod::kLenient, 0.5, stat_seed(inst.name), 0};
  const StepSamples s = sample_steps(inst, params, 20'000);
  std::vector<double> marginal, target;
  for (const Q& x : exact_law.first_token_marginal) marginal.push_back(to_double(x));
  for (const Q& x : testing::exact_weights_row(inst.target[0])) target.push_back(to_double(x));

  const ChiSquareResult own =
      chi_square_check("vs_lenient_marginal", s.first_tokens, marginal, params.seed);
  EXPECT_TRUE(fits(own, kAlpha, params.seed));
  const ChiSquareResult vs_p = chi_square_test(s.first_tokens, target);
  testing::report_chi_square("vs_target_p1", vs_p, kAlpha, params.seed);
  EXPECT_LT(vs_p.p_value, kAlpha) << "the lenient marginal should be detectably different from p_1";
}

// V2: the only randomness is the drafts', so the law is over which draft prefix matches the
// argmaxes. At most γ+1 sequences are possible, so ε = 0.01 needs few samples.
TEST(VerifyChainStat, GreedyJointMatchesExact) {
  const ChainParams params{ChainMethod::kGreedy, 1.0, 0, 0};
  expect_joint_matches(instance_v3_g2(), params, {ChainMethod::kGreedy, 1}, 200'000);
  expect_joint_matches(instance_v4_g3(), params, {ChainMethod::kGreedy, 1}, 200'000);
}

// A Markov chain pair over V = 3 as integer weights (rows sum to 8, exact in float).
// Target forbids 1 → 0; the draft proposes it (always rejected) and never proposes 2 → 0, which
// the target allows (only the residual can produce it).
std::vector<std::vector<int>> target_chain_weights() { return {{2, 5, 1}, {0, 4, 4}, {3, 3, 2}}; }
std::vector<std::vector<int>> draft_chain_weights() { return {{4, 2, 2}, {2, 2, 4}, {0, 6, 2}}; }

// Steps emit 1..γ+1 tokens and the last emitted token is the next step's context, so a wrong
// context row, a lost rollback or a uniform shared across steps changes this joint law.
// 81 sequences (V = 3, L = 4); 55 have positive probability (strings after 0 without "1 0":
// 3, 8, 21, 55 for lengths 1..4), all with expected count ≥ 20, so 55 bins; N = 500k detects
// ε ≈ 0.008.
constexpr int kStreamStart = 0, kStreamGamma = 3, kStreamLength = 4;
constexpr int64_t kStreamSamples = 500'000;

// N streams of kStreamLength tokens after kStreamStart from the V = 3 pair, verified by
// verify_chain with `params` (tests/support/markov_stream.hpp samples them).
std::vector<int64_t> sample_stream(ChainParams params, int64_t n_samples) {
  const testing::MarkovPair pair{target_chain_weights(), draft_chain_weights()};
  return testing::sample_chain_stream(pair, kStreamStart, kStreamGamma, kStreamLength, params.seed,
                                      n_samples, [&](const ChainBatch& batch, uint32_t step) {
                                        params.step = step;
                                        return verify_chain(batch, params);
                                      });
}

std::string impossible_stream(const ChiSquareResult& r) {
  return testing::impossible_stream(r.impossible() ? r.impossible_category : -1, 3, kStreamLength);
}

TEST(VerifyChainStat, TokenStreamMatchesTargetChain) {
  const auto target_w = target_chain_weights();
  const exact::Distribution plain =
      exact::chain_distribution(testing::exact_chain(target_w), kStreamStart, kStreamLength);
  // Exact losslessness is the property layer's claim; restated so the χ² below tests the random
  // layer alone.
  ASSERT_EQ(exact::enumerate_stream(testing::exact_chain(target_w),
                                    testing::exact_chain(draft_chain_weights()), kStreamStart,
                                    kStreamGamma, kStreamLength, {ChainMethod::kToken, 1}),
            plain);
  const ChainParams params{ChainMethod::kToken, 1.0, stat_seed("stream"), 0};
  const auto counts = sample_stream(params, kStreamSamples);
  const ChiSquareResult r = chi_square_check(
      "stream", counts, testing::stream_probs(plain, 3, kStreamLength), params.seed);
  EXPECT_TRUE(fits(r, kAlpha, params.seed)) << impossible_stream(r);
}

// The lossy stream follows its own exact law (which is not the target chain's).
TEST(VerifyChainStat, LenientStreamMatchesExactStream) {
  const exact::Method method{ChainMethod::kLenient, Q(1, 2)};
  const exact::Distribution lenient = exact::enumerate_stream(
      testing::exact_chain(target_chain_weights()), testing::exact_chain(draft_chain_weights()),
      kStreamStart, kStreamGamma, kStreamLength, method);
  const ChainParams params{ChainMethod::kLenient, 0.5, stat_seed("stream"), 0};
  const auto counts = sample_stream(params, kStreamSamples);
  const ChiSquareResult r = chi_square_check(
      "stream", counts, testing::stream_probs(lenient, 3, kStreamLength), params.seed);
  EXPECT_TRUE(fits(r, kAlpha, params.seed)) << impossible_stream(r);
}

// The V = 4 pair of tests/support/markov_stream.hpp (a residual of support ≥ 2 in every context,
// so the residual's shape matters, not only its support), six tokens after token 0: at γ = 1 a
// stream holds up to three bonus tokens of three steps, so a uniform shared between steps (the
// step left out of an address) changes the joint law; γ = 3 rolls back across several steps. The
// reference and the fast path are both sampled. 4096 sequences, 1912 possible; N = 300k puts
// ≈ 1730 of them in bins of expected count ≥ 20 (the rest in the remainder bin) and detects
// ε ≈ 0.020 (printed).
TEST(VerifyChainStat, SixTokenStreamMatchesTargetChain) {
  const testing::MarkovPair pair = testing::stream_pair_v4();
  constexpr int kStart = 0, kLength = 6;
  constexpr int64_t kSamples = 300'000;
  const std::vector<double> probs = testing::stream_probs(
      exact::chain_distribution(testing::exact_chain(pair.target), kStart, kLength), 4, kLength);
  for (const auto& [label, gamma, path] : {std::tuple{"fast_gamma1", 1, Path::kFast},
                                           std::tuple{"reference_gamma1", 1, Path::kReference},
                                           std::tuple{"fast_gamma3", 3, Path::kFast}}) {
    const uint64_t seed = stat_seed(label);
    const ChainParams base{ChainMethod::kToken, 1.0, seed, 0};
    const auto counts =
        testing::sample_chain_stream(pair, kStart, gamma, kLength, seed, kSamples,
                                     [&, path = path](const ChainBatch& batch, uint32_t step) {
                                       ChainParams params = base;
                                       params.step = step;
                                       return run_path(path, batch, params);
                                     });
    const ChiSquareResult r = chi_square_check(label, counts, probs, seed);
    EXPECT_TRUE(fits(r, kAlpha, seed))
        << label << " " << testing::impossible_stream(r.impossible_category, 4, kLength);
  }
}

// E[n], Var[n] of the accepted count from its exact law P(n = k), k = 0..γ.
struct Moments {
  double mean = 0.0, variance = 0.0;
};
Moments moments(const std::vector<double>& p_length) {
  Moments m;
  double second = 0.0;
  for (size_t k = 0; k < p_length.size(); ++k) {
    m.mean += static_cast<double>(k) * p_length[k];
    second += static_cast<double>(k * k) * p_length[k];
  }
  m.variance = second - m.mean * m.mean;
  return m;
}

// Two-sided z-test of a sample mean against its exact value; one counted check.
::testing::AssertionResult mean_matches(const std::string& label, double sample_mean, int64_t n,
                                        const Moments& exact_m, uint64_t seed) {
  ++g_checks_run;
  const double z = (sample_mean - exact_m.mean) / std::sqrt(exact_m.variance / n);
  const double critical = boost::math::quantile(
      boost::math::complement(boost::math::normal_distribution<double>(), kAlpha / 2));
  std::cout << "[stat] " << testing::current_test_name() << " " << label << ": N=" << n
            << " mean=" << sample_mean << " exact=" << exact_m.mean << " z=" << z
            << " |z| bound=" << critical << " seed=" << seed << std::endl;
  ::testing::Test::RecordProperty(label + ".N", std::to_string(n));
  ::testing::Test::RecordProperty(label + ".z", std::to_string(z));
  if (std::abs(z) <= critical) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << label << ": mean accepted " << sample_mean << " vs exact "
                                       << exact_m.mean << ", z = " << z << " (seed " << seed << ")";
}

// 50k steps per instance: the z-test's standard error is sd/√N ≈ 0.004 accepted tokens, the
// histogram χ² over γ+1 ≤ 4 bins detects ε ≈ 0.018.
TEST(VerifyChainStat, AcceptedLengthMatchesExact) {
  constexpr int64_t kSamples = 50'000;
  for (const StepInstance& inst : {instance_v3_g2(), instance_v4_g3(), instance_spec_vector()}) {
    const exact::StepResult exact_law = enumerate(inst, {ChainMethod::kToken, 1});
    if (inst.name == "spec_vector") {
      ASSERT_EQ(exact_law.expected_accepted, Q(10, 9));  // docs/verifiers.md V5: 10/9 under V1
    }
    const ChainParams params{ChainMethod::kToken, 1.0, stat_seed(inst.name), 0};
    const StepSamples s = sample_steps(inst, params, kSamples);
    std::vector<double> p_length;
    for (const Q& x : exact_law.accepted_length) p_length.push_back(to_double(x));
    double sum = 0.0;
    for (size_t k = 0; k < s.n_accepted.size(); ++k)
      sum += static_cast<double>(k * s.n_accepted[k]);
    EXPECT_TRUE(mean_matches(inst.name + ".mean", sum / kSamples, kSamples, moments(p_length),
                             params.seed));
    const ChiSquareResult r =
        chi_square_check(inst.name + ".length", s.n_accepted, p_length, params.seed);
    EXPECT_TRUE(fits(r, kAlpha, params.seed)) << inst.name;
  }
}

// V = 32000, γ = 4, the rows of one synthetic request verified again at many step values (memory
// ~ 1 MB). The first emitted token (accepted x_1 or the residual's
// token) has law p_1; position i is accepted given i−1 was with probability β_i = Σ min(p_i, q_i);
// E[n] = Σ_i Π_{j≤i} β_j. Drafts come from an inverse-CDF over precomputed fixed-point prefix
// sums: sample_categorical's rule (first token whose cumulative weight exceeds the target), but
// O(log V) per draw instead of O(V); the two are checked to agree.
// N = 204.8k: the ~1400 tokens with expected count ≥ 20 (p ≳ 1e-4) are bins, the tail one more;
// ε ≈ 0.024 (printed). Each β is checked to a Wilson half-width of about ±0.005.
// One request per call: verify_chain opens an OpenMP region only for B > 1, and on a loaded 2-core
// machine the barriers of 12'800 calls of 16 requests took 24-50 s instead of 1 s. A single
// request is ~2 s of work whatever the load and keeps memory small.
constexpr int64_t kLargeRows = 1, kLargeGamma = 4, kLargeVocab = 32000;
constexpr int64_t kLargeSamples = 204'800;  // one call per sample, step = sample index

TEST(VerifyChainStat, LargeVocabMatchesTargetAndClosedForms) {
  SyntheticBatchParams sp;
  sp.batch = 1;
  sp.gamma = kLargeGamma;
  sp.vocab = kLargeVocab;
  sp.seed = 20261129;  // the rows are fixed; only the sampling seed follows the test name
  const ChainBatchData rows = make_synthetic_batch(sp);
  const std::vector<double> beta = acceptance_rates(rows);
  const int64_t g = kLargeGamma, v = kLargeVocab;

  OwnedChainBatch batch(kLargeRows, g, v);
  batch.request_ids.resize(kLargeRows);
  for (int64_t r = 0; r < kLargeRows; ++r) {
    batch.request_ids[r] = static_cast<uint32_t>(r);
    std::copy(rows.probs_target.begin(), rows.probs_target.end(), batch.target_row(r, 0));
    std::copy(rows.probs_draft.begin(), rows.probs_draft.end(), batch.draft_row(r, 0));
  }
  std::vector<std::vector<uint64_t>> cumulative(g, std::vector<uint64_t>(v));
  for (int64_t i = 0; i < g; ++i) {
    uint64_t c = 0;
    for (int64_t t = 0; t < v; ++t) cumulative[i][t] = c += to_fixed(rows.probs_draft[i * v + t]);
  }

  const uint64_t seed = stat_seed("large_vocab");
  ChainParams params{ChainMethod::kToken, 1.0, seed, 0};
  std::vector<int64_t> first(v, 0), length(g + 1, 0);
  for (uint32_t call = 0; call < kLargeSamples / kLargeRows; ++call) {
    for (int64_t r = 0; r < kLargeRows; ++r) {
      for (int64_t i = 0; i < g; ++i) {
        const uint32_t bits = philox_bits({seed, static_cast<uint32_t>(r), call,
                                           static_cast<uint32_t>(i + 1), Purpose::kDraftSample, 0});
        const auto& cum = cumulative[i];
        const int32_t x = static_cast<int32_t>(
            std::upper_bound(cum.begin(), cum.end(), fixed_target(bits, cum.back())) - cum.begin());
        if (call < 64) {  // 256 draws checked against the O(V) rule
          ASSERT_EQ(x, sample_categorical({batch.draft_row(r, i), static_cast<size_t>(v)}, bits));
        }
        batch.token(r, i) = x;
      }
    }
    params.step = call;
    const ChainResult res = verify_chain(batch.view(), params);
    for (int64_t r = 0; r < kLargeRows; ++r) {
      ++first[res.emitted_tokens[r * (g + 1)]];
      ++length[res.n_accepted[r]];
    }
  }

  // p_1 renormalised in double: the float row sums to 1 only within rounding.
  std::vector<double> p1(rows.probs_target.begin(), rows.probs_target.begin() + v);
  double total = 0.0;
  for (double x : p1) total += x;
  for (double& x : p1) x /= total;
  const ChiSquareResult r = chi_square_check("first_token", first, p1, seed);
  EXPECT_TRUE(fits(r, kAlpha, seed));

  // Conditional acceptance at position i: trials are the steps that reached i (n ≥ i−1).
  int64_t reached = kLargeSamples;
  double expected_mean = 0.0, survive = 1.0;
  std::vector<double> p_length(g + 1, 0.0);
  for (int64_t i = 1; i <= g; ++i) {
    ++g_checks_run;
    int64_t accepted = 0;
    for (int64_t k = i; k <= g; ++k) accepted += length[k];
    const Interval ci = wilson_interval(accepted, reached, 1.0 - kAlpha);
    const double b = beta[i - 1];
    std::cout << "[stat] " << testing::current_test_name() << " position " << i << ": accepted "
              << accepted << "/" << reached << " beta=" << b << " Wilson [" << ci.lower << ", "
              << ci.upper << "]" << std::endl;
    ::testing::Test::RecordProperty("beta" + std::to_string(i), std::to_string(b));
    EXPECT_TRUE(ci.lower <= b && b <= ci.upper)
        << "position " << i << ": beta " << b << " outside [" << ci.lower << ", " << ci.upper
        << "] (seed " << seed << ")";
    p_length[i - 1] = survive * (1.0 - b);
    survive *= b;
    expected_mean += survive;
    reached = accepted;
  }
  p_length[g] = survive;
  double sum = 0.0;
  for (int64_t k = 0; k <= g; ++k) sum += static_cast<double>(k * length[k]);
  const Moments m = moments(p_length);
  EXPECT_NEAR(m.mean, expected_mean, 1e-12);  // Σ_k k·P(n = k) = Σ_i P(n ≥ i)
  EXPECT_TRUE(mean_matches("mean_accepted", sum / kLargeSamples, kLargeSamples, m, seed));
}

}  // namespace
}  // namespace speclab
