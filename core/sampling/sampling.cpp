// The sampling pipeline and row validation (docs/verifiers.md "Sampling pipeline", "Bad input").
#include "core/sampling/sampling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/base/rules.hpp"
#include "core/base/simd_width.hpp"

namespace speclab {
namespace {

// The normaliser's 16 lanes as 16 / kVectorFloats native vectors (core/base/simd_width.hpp).
constexpr size_t kVectorFloats = simd::kNativeFloats;
using FloatLanes = simd::NativeFloats;
using IntLanes = simd::NativeInts;
static_assert(kNormaliserLanes % kVectorFloats == 0);

template <class To, class From>
inline To convert(From x) {
  if constexpr (std::is_arithmetic_v<From>) {
    return static_cast<To>(x);
  } else {
    return __builtin_convertvector(x, To);
  }
}

// 1 where a comparison holds, else 0, as integers (vector comparisons give -1).
template <class I, class M>
inline I select_int(M mask) {
  if constexpr (std::is_same_v<M, bool>) {
    return static_cast<I>(mask);
  } else {
    return -mask;
  }
}

// exp(x) for x ≤ 0 in float (Cephes expf: x = k·ln2 + r, Cody-Waite reduction, degree-6
// polynomial, relative error below 2e-7). Inputs below -87 (including -inf, a masked logit) give
// exactly 0: such tokens are < 1.7e-38 times as likely as the best one. Written once over a
// generic lane type so the same arithmetic runs on 16-wide vectors and on scalars.
template <class F, class I>
inline F exp_nonpositive(F x) {
  const F clamped = x > -87.0f ? x : F{} - 87.0f;
  // k = floor(v) as truncation plus a correction (negative v truncates upwards).
  const F v = clamped * 1.44269504088896341f + 0.5f;
  I k_int = convert<I>(v);
  k_int = k_int - select_int<I>(v < convert<F>(k_int));
  const F k = convert<F>(k_int);
  const F r = clamped - k * 0.693359375f - k * -2.12194440e-4f;
  F poly = F{} + 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const F y = poly * r * r + r + 1.0f;
  const I exponent_bits = (k_int + 127) << 23;  // 2^k as a float
  F scale;
  std::memcpy(&scale, &exponent_bits, sizeof scale);
  return x >= -87.0f ? y * scale : F{};
}

// out[i] = exp((in[i] - shift) * scale) for in[i] ≤ shift; returns Σ out in double, in the
// normaliser's fixed order (core/base/rules.hpp): per block of kNormaliserBlockTokens tokens, 16
// float lane sums (one vector lane each), added in double in lane order; block totals in block
// order.
double exp_shifted(const float* in, float* out, size_t n, float shift, float scale) {
  constexpr size_t kLanes = kNormaliserLanes;
  constexpr size_t kBlock = kNormaliserBlockTokens;
  constexpr size_t kVectors = kLanes / kVectorFloats;  // vectors per 16 tokens
  double total = 0.0;
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t end = std::min(n, base + kBlock);
    FloatLanes vector_sums[kVectors] = {};  // lane k of the 16 is vector k / W, lane k mod W
    size_t i = base;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t v = 0; v < kVectors; ++v) {
        FloatLanes x;
        std::memcpy(&x, in + i + v * kVectorFloats, sizeof x);
        const FloatLanes e = exp_nonpositive<FloatLanes, IntLanes>((x - shift) * scale);
        std::memcpy(out + i + v * kVectorFloats, &e, sizeof e);
        vector_sums[v] += e;
      }
    }
    float lane_sums[kLanes];
    static_assert(sizeof lane_sums == sizeof vector_sums);
    std::memcpy(lane_sums, vector_sums, sizeof lane_sums);
    for (; i < end; ++i) {  // the row's last, partial 16 tokens: lane (i − base) mod 16
      out[i] = exp_nonpositive<float, int32_t>((in[i] - shift) * scale);
      lane_sums[(i - base) % kLanes] += out[i];
    }
    double block = 0.0;
    for (size_t k = 0; k < kLanes; ++k) block += lane_sums[k];
    total += block;
  }
  return total;
}

}  // namespace

void validate_sampling_params(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0.0) {
    throw InvalidInput(
        fmt::format("sampling.temperature is {}; expected a finite value ≥ 0", params.temperature));
  }
  if (params.top_k < 0) {
    throw InvalidInput(
        fmt::format("sampling.top_k is {}; expected ≥ 0 (0 turns top-k off)", params.top_k));
  }
  if (!(params.top_p > 0.0 && params.top_p <= 1.0)) {
    throw InvalidInput(fmt::format(
        "sampling.top_p is {}; expected 0 < top_p ≤ 1 (1 turns top-p off)", params.top_p));
  }
  if (!(params.min_p >= 0.0 && params.min_p <= 1.0)) {
    throw InvalidInput(fmt::format(
        "sampling.min_p is {}; expected 0 ≤ min_p ≤ 1 (0 turns min-p off)", params.min_p));
  }
}

double tempered_exponentials(std::span<const float> logits, float shift, float scale,
                             std::span<float> exps) {
  if (exps.size() != logits.size()) {
    throw InvalidInput(fmt::format("exps has {} entries; expected {} (one per logit)", exps.size(),
                                   logits.size()));
  }
  return exp_shifted(logits.data(), exps.data(), logits.size(), shift, scale);
}

int32_t argmax_lowest(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

void probs_from_logits(std::span<const float> logits, const SamplingParams& params,
                       std::span<float> probs) {
  validate_sampling_params(params);
  const size_t vocab = logits.size();
  if (vocab == 0) throw InvalidInput("logits is empty; expected a row of V ≥ 1 values");
  if (probs.size() != vocab) {
    throw InvalidInput(
        fmt::format("probs has {} entries; expected {} (one per logit)", probs.size(), vocab));
  }
  // One vectorised pass decides validity and finds the largest logit (the softmax's shift; a
  // maximum is exact in any order); the slow loop only runs to name the bad token.
  uint32_t bad = 0, finite = 0;
  float max_logit = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(| : bad, finite) reduction(max : max_logit)
  for (size_t i = 0; i < vocab; ++i) {
    const float x = logits[i];
    bad |= static_cast<uint32_t>(!(x < std::numeric_limits<float>::infinity()));  // NaN, +inf
    finite |= static_cast<uint32_t>(x > -std::numeric_limits<float>::infinity());
    max_logit = x > max_logit ? x : max_logit;
  }
  if (bad) {
    for (size_t i = 0; i < vocab; ++i) {
      if (!(logits[i] < std::numeric_limits<float>::infinity())) {
        throw InvalidInput(fmt::format(
            "logits token {} is {}; expected a finite value or -inf (masked)", i, logits[i]));
      }
    }
  }
  if (!finite) throw InvalidInput("logits are all -inf; at least one token must be possible");

  if (params.temperature == 0.0) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[argmax_lowest(logits)] = 1.0f;
    return;
  }

  // Tempered softmax: e_i = exp((l_i - max) / T) in float, vectorised; the sum in double.
  const double total = exp_shifted(logits.data(), probs.data(), vocab, max_logit,
                                   static_cast<float>(1.0 / params.temperature));
  const bool filtered = (params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab) ||
                        params.top_p < 1.0 || params.min_p > 0.0;
  if (!filtered) {
    const float scale = static_cast<float>(1.0 / total);
#pragma omp simd
    for (size_t i = 0; i < vocab; ++i) probs[i] *= scale;
    return;
  }
  std::vector<double> tempered(vocab);
  for (size_t i = 0; i < vocab; ++i) tempered[i] = probs[i] / total;
  // Mutants: a filter that measures the T = 1 probabilities instead of the tempered ones.
  std::vector<double> untempered;
  if (mutant(Mutant::kMinPUntempered) || mutant(Mutant::kTopPUntempered)) {
    std::vector<float> exps(vocab);
    const double untempered_total = exp_shifted(logits.data(), exps.data(), vocab, max_logit, 1.0f);
    for (size_t i = 0; i < vocab; ++i) untempered.push_back(exps[i] / untempered_total);
  }
  const std::vector<double>& top_p_probs = mutant(Mutant::kTopPUntempered) ? untempered : tempered;
  const std::vector<double>& min_p_probs = mutant(Mutant::kMinPUntempered) ? untempered : tempered;

  std::vector<uint8_t> keep(vocab, 1);
  for (size_t i = 0; i < vocab; ++i) keep[i] = tempered[i] > 0.0;
  const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  if (use_top_k || params.top_p < 1.0) {
    // Most probable first; the lower id first among equals, so boundaries are deterministic.
    // The order is total, so only the first k need sorting (a large V with a small top-k is the
    // common case; a full sort of V = 49152 per row would dominate decoding a memoised model).
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    const auto before = [&](int32_t a, int32_t b) {
      return tempered[a] > tempered[b] || (tempered[a] == tempered[b] && a < b);
    };
    const size_t k = use_top_k ? static_cast<size_t>(params.top_k) : vocab;
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      before);
    for (size_t r = k; r < vocab; ++r) keep[order[r]] = 0;
    if (params.top_p < 1.0) {
      double survivor_mass = 0.0;
      for (size_t r = 0; r < k; ++r) survivor_mass += top_p_probs[order[r]];
      const double needed = params.top_p * survivor_mass;
      double cumulative = 0.0;
      size_t r = 0;
      for (; r < k; ++r) {
        cumulative += top_p_probs[order[r]];
        if (mutant(Mutant::kTopPStrict) ? cumulative > needed : cumulative >= needed) break;
      }
      for (size_t s = r + 1; s < k; ++s) keep[order[s]] = 0;
    }
  }
  if (params.min_p > 0.0) {
    const int32_t best = mutant(Mutant::kMinPTokenZero) ? 0 : argmax_lowest(logits);
    const double threshold = params.min_p * min_p_probs[best];
    for (size_t i = 0; i < vocab; ++i) {
      if (min_p_probs[i] < threshold) keep[i] = 0;
    }
  }

  double kept = 0.0;
  for (size_t i = 0; i < vocab; ++i) kept += keep[i] ? tempered[i] : 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    probs[i] = keep[i] ? static_cast<float>(tempered[i] / kept) : 0.0f;
  }
}

std::vector<float> probs_from_logits(std::span<const float> logits, const SamplingParams& params) {
  std::vector<float> probs(logits.size());
  probs_from_logits(logits, params, probs);
  return probs;
}

namespace {
std::string describe(const RowLocation& where) {
  return fmt::format("{} row {} (request {}, position {})", where.argument, where.row,
                     where.request, where.position);
}
}  // namespace

void validate_probability_value(float value, int64_t token, const RowLocation& where) {
  if (!std::isfinite(value) || value < 0.0f || value > 1.0f + kProbSumTolerance) {
    throw InvalidInput(
        fmt::format("{}: token {} has probability {}; expected a finite value in [0, 1]",
                    describe(where), token, value));
  }
}

void validate_probability_row(std::span<const float> row, const RowLocation& where) {
  // One vectorised pass decides validity and sums the row; the slow loop only runs to name the
  // bad token. A loop that may throw at every token does not vectorise: 88 rows of V = 32000
  // took 1.76 ms that way against 0.16 ms (AVX-512) and 0.29 ms (AVX2) like this.
  uint32_t bad = 0;
  double sum = 0.0;
#pragma omp simd reduction(| : bad) reduction(+ : sum)
  for (size_t i = 0; i < row.size(); ++i) {
    const float x = row[i];
    // & rather than &&: no branch, so the loop vectorises (NaN fails both comparisons).
    bad |= static_cast<uint32_t>(!((x >= 0.0f) & (x <= std::numeric_limits<float>::max())));
    sum += x;
  }
  if (bad) {
    for (size_t i = 0; i < row.size(); ++i) {
      const float x = row[i];
      if (!std::isfinite(x) || x < 0.0f) {
        throw InvalidInput(
            fmt::format("{}: token {} has probability {}; probabilities must be finite and ≥ 0",
                        describe(where), i, x));
      }
    }
  }
  if (std::abs(sum - 1.0) > kProbSumTolerance) {
    throw InvalidInput(fmt::format("{} sums to {:.6g}; expected 1 ± {:g}", describe(where), sum,
                                   kProbSumTolerance));
  }
}

uint64_t fixed_point_total(std::span<const float> weights) {
  uint64_t total = 0;
#pragma omp simd reduction(+ : total)
  for (size_t i = 0; i < weights.size(); ++i) total += to_fixed(weights[i]);
  return total;
}

int32_t sample_categorical(std::span<const float> weights, uint32_t bits) {
  // Fixed-point sums per chunk of kChunkTokens weights (a vectorised pass), then the chunk that
  // holds the target, then the token inside it: the same token as a serial scan, since integer
  // sums are exact (core/base/rules.hpp), at one pass over the row plus one chunk.
  constexpr size_t kBlock = kChunkTokens;
  const size_t n = weights.size();
  const size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<uint64_t> block_sums(n_blocks);
  uint64_t total = 0;
  for (size_t blk = 0; blk < n_blocks; ++blk) {
    const size_t end = std::min(n, (blk + 1) * kBlock);
    uint64_t sum = 0;
#pragma omp simd reduction(+ : sum)
    for (size_t i = blk * kBlock; i < end; ++i) sum += to_fixed(weights[i]);
    block_sums[blk] = sum;
    total += sum;
  }
  if (total == 0) {
    throw InvalidInput(
        fmt::format("sample_categorical: all {} weights are zero; expected a positive total", n));
  }
  const uint64_t target = fixed_target(bits, total);
  uint64_t cumulative = 0;
  size_t blk = 0;
  while (blk + 1 < n_blocks && cumulative + block_sums[blk] <= target)
    cumulative += block_sums[blk++];
  for (size_t i = blk * kBlock; i < n; ++i) {
    cumulative += to_fixed(weights[i]);
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(n) - 1;  // unreachable: target < total
}

void exp_nonpositive_row(std::span<const float> x, std::span<float> out) {
  if (out.size() != x.size()) {
    throw InvalidInput(
        fmt::format("exp_nonpositive_row: {} inputs but {} outputs", x.size(), out.size()));
  }
  constexpr size_t kLanes = kVectorFloats;
  size_t i = 0;
  for (; i + kLanes <= x.size(); i += kLanes) {
    FloatLanes lanes;
    std::memcpy(&lanes, x.data() + i, sizeof lanes);
    const FloatLanes e = exp_nonpositive<FloatLanes, IntLanes>(lanes);
    std::memcpy(out.data() + i, &e, sizeof e);
  }
  for (; i < x.size(); ++i) out[i] = exp_nonpositive<float, int32_t>(x[i]);
}

std::string_view to_string(TokenSampling sampling) {
  return sampling == TokenSampling::kGumbel ? "gumbel" : "inverse-cdf";
}

TokenSampling parse_token_sampling(std::string_view name, std::string_view what) {
  if (name == "inverse-cdf") return TokenSampling::kInverseCdf;
  if (name == "gumbel") return TokenSampling::kGumbel;
  throw InvalidInput(
      fmt::format("{} is \"{}\"; expected \"inverse-cdf\" or \"gumbel\"", what, name));
}

int32_t sample_gumbel(std::span<const float> weights, uint64_t seed, uint32_t request,
                      uint32_t position) {
  const size_t n = weights.size();
  if (n >= (size_t{1} << 26)) {
    throw InvalidInput(fmt::format("sample_gumbel: {} tokens; expected fewer than 2^26", n));
  }
  RandomAddress a{seed, request, position, 0, Purpose::kGumbelNoise, 0};
  int32_t best = -1;
  double best_key = 0.0;
  for (size_t block = 0; block * 4 < n; ++block) {
    const size_t begin = block * 4, end = std::min(n, begin + 4);
    bool any = false;
    for (size_t v = begin; v < end; ++v) any |= weights[v] > 0.0f;
    if (!any) continue;  // the noise of a block without candidates is never needed
    a.index = static_cast<uint32_t>(block);
    const auto words = philox_block(a);
    for (size_t v = begin; v < end; ++v) {
      if (!(weights[v] > 0.0f)) continue;
      const double u = uniform_from_bits(words[v - begin]);
      // −ln u ≥ 1 − u, and 1 − u is exact: a key bounded below by the best one so far cannot
      // win (ties go to the lower id, which came first), so its logarithm is skipped. The
      // factor 1 − 1e-12 keeps the bound below the rounded logarithm; the token picked is the
      // one the full computation picks, at a logarithm for a few tokens per row instead of V.
      if (best >= 0 && (1.0 - u) * (1.0 - 1e-12) / weights[v] >= best_key) continue;
      const double key = -std::log(u) / weights[v];
      if (best < 0 || key < best_key) {
        best = static_cast<int32_t>(v);
        best_key = key;
      }
    }
  }
  if (best < 0) {
    throw InvalidInput(
        fmt::format("sample_gumbel: all {} weights are zero; expected a positive weight", n));
  }
  return best;
}

int32_t sample_output_token(std::span<const float> weights, TokenSampling sampling, uint64_t seed,
                            uint32_t request, uint32_t position) {
  if (sampling == TokenSampling::kGumbel) return sample_gumbel(weights, seed, request, position);
  const RandomAddress a{seed, request, position, 0, Purpose::kPlainSample, 0};
  return sample_categorical(weights, philox_bits(a));
}

}  // namespace speclab
