// Fast chain verifiers V1-V3 (docs/verifiers.md): the same tokens as verify_chain_reference for the
// same uniforms. Accept tests gather p(x_i), q(x_i); only the one residual or bonus row per request
// is read, in one pass that validates it and sums fixed-point weights per block of kChunkTokens
// tokens. Integer block sums are exact, so locating the sampled token in its block and rescanning
// those kChunkTokens tokens gives the reference's inverse-CDF token bit for bit.
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <limits>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain.hpp"
#include "core/verify/verify_chain_detail.hpp"

namespace speclab {
namespace {

// Below this many B·V a second thread costs more than it saves (and on a loaded machine waiting
// for it can cost a scheduler time slice).
constexpr int64_t kParallelWork = int64_t{1} << 17;

struct RowPass {
  std::vector<uint64_t> block_sums;
  uint64_t total = 0;  ///< Σ of the sampling weights, fixed point
  bool finite_nonnegative = true;
  double sum_target = 0.0;  ///< Σ p (only for the 1 ± 1e-4 check)
  double sum_draft = 0.0;   ///< Σ q, likewise
};

inline bool valid_prob(float x) {
  return (x >= 0.0f) & (x < std::numeric_limits<float>::infinity());  // NaN fails both
}

struct BlockSums {
  uint64_t weights = 0;
  float target = 0.0f, draft = 0.0f;
  uint32_t bad = 0;
};

// Sums over one block of tokens: fixed-point weights max(0, p - l·q) (or p), Σp and Σq (float,
// reassociated: they only feed the 1 ± 1e-4 check), and a flag for any non-finite or negative
// entry. Selects and integer sums only, so it vectorises.
template <bool kResidual>
BlockSums block_sums(const float* p, const float* q, float leniency, int64_t n) {
  uint64_t weights = 0;
  float target = 0.0f, draft = 0.0f;
  uint32_t bad = 0;
  if constexpr (kResidual) {
#pragma omp simd reduction(+ : weights, target, draft) reduction(| : bad)
    for (int64_t t = 0; t < n; ++t) {
      const float a = p[t], b = q[t];
      bad |= static_cast<uint32_t>(!valid_prob(a)) | static_cast<uint32_t>(!valid_prob(b));
      target += a;
      draft += b;
      weights += residual_fixed(a, b, leniency);
    }
  } else {
#pragma omp simd reduction(+ : weights, target) reduction(| : bad)
    for (int64_t t = 0; t < n; ++t) {
      const float a = p[t];
      bad |= static_cast<uint32_t>(!valid_prob(a));
      target += a;
      weights += to_fixed(a);
    }
  }
  return {weights, target, draft, bad};
}

// One pass over p (and q for a residual): per-block weight sums for locate(), with the
// finiteness and row-sum checks of docs/verifiers.md "Bad input" fused in.
template <bool kResidual>
void weight_pass(const float* p, const float* q, float leniency, int64_t vocab, RowPass& pass) {
  const int64_t n_blocks = (vocab + kChunkTokens - 1) / kChunkTokens;
  pass.block_sums.resize(n_blocks);
  uint64_t total = 0;
  double sum_p = 0.0, sum_q = 0.0;
  uint32_t bad = 0;
  for (int64_t blk = 0; blk < n_blocks; ++blk) {
    const int64_t begin = blk * kChunkTokens;
    const BlockSums b = block_sums<kResidual>(p + begin, kResidual ? q + begin : nullptr, leniency,
                                              std::min(kChunkTokens, vocab - begin));
    pass.block_sums[blk] = b.weights;
    total += b.weights;
    sum_p += b.target;
    sum_q += b.draft;
    bad |= b.bad;
  }
  pass.total = total;
  pass.finite_nonnegative = bad == 0;
  pass.sum_target = sum_p;
  pass.sum_draft = sum_q;
}

// Locates the token whose fixed-point prefix sum first exceeds the target: block by block, then
// within the one block by recomputing its kChunkTokens weights.
int32_t locate(const float* p, const float* q, float leniency, int64_t vocab, const RowPass& pass,
               uint32_t bits) {
  const uint64_t target = fixed_target(bits, pass.total);
  uint64_t cumulative = 0;
  int64_t blk = 0;
  const int64_t n_blocks = static_cast<int64_t>(pass.block_sums.size());
  while (blk + 1 < n_blocks && cumulative + pass.block_sums[blk] <= target) {
    cumulative += pass.block_sums[blk++];
  }
  const int64_t begin = blk * kChunkTokens;
  const int64_t end = std::min(vocab, begin + kChunkTokens);
  for (int64_t t = begin; t < end; ++t) {
    cumulative += q != nullptr ? residual_fixed(p[t], q[t], leniency) : to_fixed(p[t]);
    if (cumulative > target) return static_cast<int32_t>(t);
  }
  return static_cast<int32_t>(end - 1);  // unreachable: target < total
}

// Argmax (lowest id on ties) fused with the row checks.
int32_t checked_argmax(std::span<const float> row, const RowLocation& where) {
  int32_t best = 0;
  bool ok = true;
  double sum = 0.0;
  for (size_t t = 0; t < row.size(); ++t) {
    ok &= valid_prob(row[t]);
    sum += row[t];
    if (row[t] > row[best]) best = static_cast<int32_t>(t);
  }
  if (!ok || std::abs(sum - 1.0) > kProbSumTolerance) validate_probability_row(row, where);
  return best;
}

void verify_request_fast(const ChainBatch& batch, const ChainParams& params, int64_t r,
                         ChainResult& out, RowPass& pass) {
  const int64_t n_draft = detail::draft_count(batch, r);
  const int64_t g = batch.gamma, v = batch.vocab;
  const bool greedy = params.method == ChainMethod::kGreedy;
  const float leniency =
      params.method == ChainMethod::kLenient ? static_cast<float>(params.leniency) : 1.0f;
  RandomAddress address{params.seed, detail::request_id(batch, r), params.step,
                        0,           Purpose::kAcceptTest,         0};
  auto target_where = [&](int64_t i) {
    return RowLocation{"probs_target", r * (g + 1) + i, r, i + 1};
  };
  auto draft_where = [&](int64_t i) { return RowLocation{"probs_draft", r * g + i, r, i + 1}; };

  if (!greedy) {
    // The accept tests are sequential, but their gathered values are independent loads: start
    // them all now so their cache misses overlap instead of queueing one after another.
    for (int64_t i = 0; i < n_draft; ++i) {
      const int32_t x = batch.draft_tokens[r * g + i];
      __builtin_prefetch(&detail::target_row(batch, r, i)[x]);
      __builtin_prefetch(&detail::draft_row(batch, r, i)[x]);
    }
  }
  int64_t n = 0;
  for (; n < n_draft; ++n) {
    const int32_t x = batch.draft_tokens[r * g + n];
    const auto p = detail::target_row(batch, r, n);
    bool accepted;
    if (greedy) {
      accepted = x == checked_argmax(p, target_where(n));
    } else {
      const float pv = p[x], qv = detail::draft_row(batch, r, n)[x];
      validate_probability_value(pv, x, target_where(n));
      validate_probability_value(qv, x, draft_where(n));
      detail::check_drafted_from_q(qv, x, r, n, g);
      address.position = mutant(Mutant::kReusedUniform) ? 1u : static_cast<uint32_t>(n + 1);
      const double u = philox_uniform(address);
      accepted = lenient_accepts(u, leniency, qv, pv);  // l = 1 is bit-for-bit V1's test
    }
    if (!accepted) break;
    out.accept_mask[r * g + n] = 1;
    out.emitted_tokens[r * (g + 1) + n] = x;
  }
  out.n_accepted[r] = static_cast<int32_t>(n);

  const auto p = detail::target_row(batch, r, n);
  address.position = static_cast<uint32_t>(n + 1);
  int32_t last;
  if (greedy) {
    last = checked_argmax(p, target_where(n));
  } else {
    const bool bonus = n == n_draft;
    if (bonus && mutant(Mutant::kMissingBonus) && n > 0) return;
    const float* q = bonus ? nullptr : detail::draft_row(batch, r, n).data();
    if (bonus || mutant(Mutant::kResidualFromTarget)) {
      weight_pass<false>(p.data(), nullptr, leniency, v, pass);
    } else {
      weight_pass<true>(p.data(), q, leniency, v, pass);
    }
    const bool sums_ok = std::abs(pass.sum_target - 1.0) <= kProbSumTolerance &&
                         (bonus || std::abs(pass.sum_draft - 1.0) <= kProbSumTolerance);
    if (!pass.finite_nonnegative || !sums_ok) {
      validate_probability_row(p, target_where(n));
      if (!bonus) validate_probability_row(detail::draft_row(batch, r, n), draft_where(n));
    }
    address.purpose = bonus ? Purpose::kBonusSample : Purpose::kResidualSample;
    if (bonus && mutant(Mutant::kBonusWithoutStep)) address.step = 0;
    const uint32_t bits = philox_bits(address);
    if (!bonus && pass.total == 0) {
      out.residual_fallback[r] = 1;  // docs/verifiers.md V1: sample p and count the event
      last = sample_categorical(
          mutant(Mutant::kFallbackFromDraft) ? detail::draft_row(batch, r, n) : p, bits);
    } else {
      last = locate(p.data(), mutant(Mutant::kResidualFromTarget) ? nullptr : q, leniency, v, pass,
                    bits);
    }
  }
  out.emitted_tokens[r * (g + 1) + n] = last;
  if (mutant(Mutant::kAcceptedOffByOne) && !greedy && n < n_draft) {
    out.accept_mask[r * g + n] = 1;
    out.emitted_tokens[r * (g + 1) + n] = batch.draft_tokens[r * g + n];
    out.emitted_tokens[r * (g + 1) + n + 1] = last;
    out.n_accepted[r] = static_cast<int32_t>(n + 1);
  }
}

}  // namespace

ChainResult verify_chain(const ChainBatch& batch, const ChainParams& params) {
  validate_chain_shapes(batch, params);
  ChainResult result = detail::make_result(batch, params);
  // Requests are independent; errors are collected per request and the lowest request's error
  // is rethrown, so the message does not depend on thread timing.
  std::vector<std::exception_ptr> errors(batch.batch);
#pragma omp parallel if (batch.batch > 1 && batch.batch * batch.vocab >= kParallelWork)
  {
    RowPass pass;
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < batch.batch; ++r) {
      try {
        verify_request_fast(batch, params, r, result, pass);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    }
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  detail::finish_result(result);
  return result;
}

}  // namespace speclab
