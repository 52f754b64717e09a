// The verifiers on logits with the temperature softmax fused (gpu::LogitsBatch) against core:
// core::probs_from_logits on every row (unfiltered, each model's temperature) followed by
// core::verify_chain_reference or core::verify_block must give the same tokens bit for bit.
// Also: the facts about exp_nonpositive the fused V2 relies on (gpu/fused_logits.cuh), bad
// logits, seed/step read from device memory, and (device only) a verification step captured in
// a CUDA graph and replayed. Built for the device (label gpu) and for the SIMT emulation
// (gpu-emu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/sampling.hpp"
#include "core/verify_block.hpp"
#include "core/verify_chain.hpp"
#include "gpu/logits.hpp"
#include "gpu/verify_block.hpp"
#include "gpu/verify_chain.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using gpu::LogitsFormat;
using testing::DeviceBuffer;
using testing::OwnedChainBatch;

const float kInf = std::numeric_limits<float>::infinity();

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// binary16 bits of a float that is exactly a half (a multiple of 1/64 below 16 in magnitude,
/// ±inf or NaN; the generators below make only those).
uint16_t exact_half_bits(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if ((b & 0x7fffffffu) == 0) return sign;
  if ((b & 0x7f800000u) == 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7c00u | ((b & 0x7fffffu) != 0 ? 0x200u : 0u));
  }
  const int exponent = static_cast<int>((b >> 23) & 0xffu) - 127;
  if (exponent < -14) {  // a subnormal half: mantissa · 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(std::fabs(x), 24)));
  }
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | ((b >> 13) & 0x3ffu));
}

/// One model's logits [rows, V]: what the device stores and the exact floats core is given.
struct HostLogits {
  LogitsFormat format = LogitsFormat::kFloat32;
  double temperature = 1.0;
  std::vector<float> values;     // as core sees them (each stored value converted exactly)
  std::vector<uint16_t> bits16;  // fp16/bf16 storage

  /// Stores `values` in `format` and replaces them by the stored values read back as floats.
  void encode() {
    if (format == LogitsFormat::kFloat32) return;
    bits16.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (format == LogitsFormat::kFloat16) {
        bits16[i] = exact_half_bits(values[i]);
        values[i] = gpu::half_bits_to_float(bits16[i]);
      } else {
        bits16[i] = static_cast<uint16_t>(bits_of(values[i]) >> 16);
        values[i] = gpu::bfloat16_bits_to_float(bits16[i]);
      }
    }
  }
};

enum class LogitRow { kNormal, kMasked, kOneFinite, kPeaked, kTies, kNearTie };

/// A random row of one kind. Values are multiples of 1/64 in (-16, 16) for fp16 (exact there),
/// arbitrary floats otherwise (bf16 keeps the top 16 bits).
void random_logit_row(std::mt19937_64& rng, float* row, int64_t v, LogitRow kind, bool half) {
  std::normal_distribution<float> normal(0.0f, kind == LogitRow::kPeaked ? 1.0f : 3.0f);
  std::uniform_int_distribution<int64_t> token(0, v - 1);
  std::uniform_int_distribution<int> coin(0, 3);
  std::uniform_int_distribution<int> small(-3, 0);
  auto value = [&] {
    float x = normal(rng);
    if (half) x = std::round(std::fmin(std::fmax(x, -15.0f), 15.0f) * 64.0f) / 64.0f;
    return x;
  };
  for (int64_t t = 0; t < v; ++t) {
    switch (kind) {
      case LogitRow::kTies:
        row[t] = static_cast<float>(small(rng));  // many equal logits, ties at the max
        break;
      case LogitRow::kMasked:
        row[t] = coin(rng) == 0 ? -kInf : value();
        break;
      case LogitRow::kOneFinite:
        row[t] = -kInf;
        break;
      default:
        row[t] = value();
    }
  }
  if (kind == LogitRow::kPeaked) row[token(rng)] = 12.0f;
  if (kind == LogitRow::kNearTie && !half) {
    // The max 0.25 and up to three logits 1, 2, 3 ulps (2^-26) below it, the rest ≤ 0.2: after
    // tempering by c = float(1/T), x = -k·2^-26·c, and exp rounds to 1 (a tie in p) for
    // k·c ≤ 2 (2 by round-half-to-even), not for k·c ≥ 3.
    for (int64_t t = 0; t < v; ++t) row[t] = std::fmin(row[t], 0.2f);
    for (int k = 3; k >= 1; --k) row[token(rng)] = 0.25f - static_cast<float>(k) * 0x1p-26f;
    row[token(rng)] = 0.25f;
  }
  if (kind == LogitRow::kMasked || kind == LogitRow::kOneFinite) row[token(rng)] = value();
}

/// A verification case: logits for both models, core's probabilities from them, drafts drawn
/// from q, optionally ragged γ with request ids.
struct LogitsCase {
  HostLogits target, draft;
  OwnedChainBatch probs;  // core::probs_from_logits of every row; the tokens of the case

  LogitsCase(uint64_t seed, int64_t b, int64_t g, int64_t v, LogitsFormat format, double t_target,
             double t_draft, const std::vector<LogitRow>& kinds, bool draft_is_target, bool ragged)
      : probs(b, g, v) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<size_t> pick(0, kinds.size() - 1);
    const bool half = format == LogitsFormat::kFloat16;
    target = {format, t_target, std::vector<float>(b * (g + 1) * v), {}};
    draft = {format, t_draft, std::vector<float>(b * g * v), {}};
    for (int64_t r = 0; r < b; ++r) {
      for (int64_t i = 0; i <= g; ++i) {
        random_logit_row(rng, &target.values[(r * (g + 1) + i) * v], v, kinds[pick(rng)], half);
      }
      for (int64_t i = 0; i < g; ++i) {
        float* row = &draft.values[(r * g + i) * v];
        if (draft_is_target) {
          std::copy_n(&target.values[(r * (g + 1) + i) * v], v, row);
        } else {
          random_logit_row(rng, row, v, kinds[pick(rng)], half);
        }
      }
    }
    target.encode();
    draft.encode();
    refresh_probs();
    probs.draw_drafts(seed ^ 0xd7af7u);
    if (ragged) {
      std::uniform_int_distribution<int32_t> n(0, static_cast<int32_t>(g));
      probs.n_draft.resize(b);
      for (auto& x : probs.n_draft) x = n(rng);
      probs.request_ids.resize(b);
      for (int64_t r = 0; r < b; ++r) probs.request_ids[r] = static_cast<uint32_t>(500 + 3 * r);
    }
  }

  /// core::probs_from_logits of every row (rows core rejects are left at 0).
  void refresh_probs() {
    const int64_t v = probs.vocab;
    auto convert = [&](const HostLogits& logits, std::vector<float>& out) {
      for (size_t row = 0; row * v < logits.values.size(); ++row) {
        try {
          probs_from_logits(std::span<const float>(&logits.values[row * v], v),
                            SamplingParams{logits.temperature, 0, 1.0, 0.0},
                            std::span<float>(&out[row * v], v));
        } catch (const InvalidInput&) {
          std::fill_n(&out[row * v], v, 0.0f);
        }
      }
    };
    convert(target, probs.probs_target);
    convert(draft, probs.probs_draft);
  }
};

/// Device copies of one model's logits.
struct DeviceLogitsBuffers {
  DeviceBuffer<float> f32;
  DeviceBuffer<uint16_t> b16;
  HostLogits host;

  explicit DeviceLogitsBuffers(const HostLogits& logits, bool empty = false)
      : f32(logits.format == LogitsFormat::kFloat32 && !empty ? logits.values
                                                              : std::vector<float>{}),
        b16(empty ? std::vector<uint16_t>{} : logits.bits16),
        host(logits) {}
  gpu::DeviceLogits view() const {
    const std::span<const std::byte> bytes = host.format == LogitsFormat::kFloat32
                                                 ? std::as_bytes(f32.const_span())
                                                 : std::as_bytes(b16.const_span());
    return {host.format, bytes, host.temperature};
  }
};

/// Device inputs and outputs of one case.
struct DeviceCase {
  DeviceLogitsBuffers target, draft;
  DeviceBuffer<int32_t> tokens, n_draft;
  DeviceBuffer<uint32_t> request_ids;
  DeviceBuffer<int32_t> emitted, n_accepted;
  DeviceBuffer<uint8_t> mask, fallback;
  DeviceBuffer<uint32_t> status;
  int64_t b, g, v;

  DeviceCase(const LogitsCase& c, bool without_draft = false)
      : target(c.target),
        draft(c.draft, without_draft),
        tokens(c.probs.draft_tokens),
        n_draft(c.probs.n_draft),
        request_ids(c.probs.request_ids),
        emitted(c.probs.batch * (c.probs.gamma + 1)),
        n_accepted(c.probs.batch),
        mask(c.probs.batch * c.probs.gamma),
        fallback(c.probs.batch),
        status(c.probs.batch),
        b(c.probs.batch),
        g(c.probs.gamma),
        v(c.probs.vocab) {}
  gpu::LogitsBatch batch() const {
    return {b,
            g,
            v,
            target.view(),
            draft.view(),
            tokens.const_span(),
            n_draft.const_span(),
            request_ids.const_span()};
  }
  gpu::ChainDeviceOutput output() {
    return {emitted.span(), n_accepted.span(), mask.span(), fallback.span(), status.span()};
  }
  testing::GpuChainResult read(cudaError_t launch) const {
    testing::GpuChainResult out;
    out.launch = launch;
    for (const cudaError_t e :
         {emitted.copy_to(out.emitted_tokens), n_accepted.copy_to(out.n_accepted),
          mask.copy_to(out.accept_mask), fallback.copy_to(out.residual_fallback),
          status.copy_to(out.status)}) {
      if (out.sync == cudaSuccess) out.sync = e;
    }
    return out;
  }
};

testing::GpuChainResult run_chain(const LogitsCase& c, const ChainParams& params,
                                  bool without_draft = false) {
  DeviceCase d(c, without_draft);
  return d.read(gpu::verify_chain(d.batch(), params, d.output(), nullptr));
}

testing::GpuChainResult run_block(const LogitsCase& c, const BlockParams& params,
                                  const gpu::BlockKernelOptions& options = {}) {
  DeviceCase d(c);
  return d.read(gpu::verify_block(d.batch(), params, d.output(), nullptr, options));
}

const char* name(LogitsFormat f) {
  return f == LogitsFormat::kFloat32 ? "fp32" : f == LogitsFormat::kFloat16 ? "fp16" : "bf16";
}

std::string describe(const LogitsCase& c, const std::string& label) {
  return label + " (" + name(c.target.format) + " B=" + std::to_string(c.probs.batch) +
         " γ=" + std::to_string(c.probs.gamma) + " V=" + std::to_string(c.probs.vocab) +
         " T=" + std::to_string(c.target.temperature) + "/" + std::to_string(c.draft.temperature) +
         ")";
}

void expect_chain_matches_core(const LogitsCase& c, const ChainParams& params,
                               const std::string& label) {
  const ChainResult ref = verify_chain_reference(c.probs.view(), params);
  EXPECT_EQ(testing::differences(run_chain(c, params), ref), "")
      << describe(c, label) << " method " << to_string(params.method);
}

void expect_block_matches_core(const LogitsCase& c, const BlockParams& params,
                               const std::string& label,
                               const gpu::BlockKernelOptions& options = {}) {
  const ChainResult ref = verify_block(c.probs.view(), params);
  EXPECT_EQ(testing::differences(run_block(c, params, options), ref), "")
      << describe(c, label) << " block";
}

const std::vector<LogitRow> kAllRows = {LogitRow::kNormal,    LogitRow::kMasked,
                                        LogitRow::kOneFinite, LogitRow::kPeaked,
                                        LogitRow::kTies,      LogitRow::kNearTie};
const LogitsFormat kFormats[] = {LogitsFormat::kFloat32, LogitsFormat::kFloat16,
                                 LogitsFormat::kBFloat16};

TEST(FusedLogits, ExpNonpositiveFactsForGreedy) {
  // The facts gpu/fused_logits.cuh's V2 relies on, over every float where they are not obvious:
  // (1) exp_nonpositive(x) ≤ 1 for x ≤ 0 (and = 1 at 0); (3) exp_nonpositive(x) < 1 for
  // x < -2^-22. Every float in [-1, -2^-40] is checked (x in (-2^-40, 0] gives r = x, so
  // 1 + r rounds to 1: fact (1) with equality); below -1 the result is at most 2^-1·1.5.
  EXPECT_EQ(gpu::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(gpu::exp_nonpositive(-0.0f), 1.0f);
  const uint32_t near_zero = bits_of(-0x1p-40f), minus_one = bits_of(-1.0f);
  const uint32_t gap = bits_of(-0x1p-22f);
  int64_t above_one = 0, tie_below_gap = 0;
  for (uint32_t b = near_zero; b <= minus_one; ++b) {  // negative floats grow with their bits
    const float e = gpu::exp_nonpositive(float_of(b));
    above_one += e > 1.0f;
    tie_below_gap += b > gap && e >= 1.0f;
  }
  EXPECT_EQ(above_one, 0);
  EXPECT_EQ(tie_below_gap, 0);
  for (float x = -1.0f; x > -100.0f; x -= 0.0078125f) ASSERT_LT(gpu::exp_nonpositive(x), 0.75f);
  EXPECT_EQ(gpu::exp_nonpositive(-kInf), 0.0f);
  // (2): e < 1 gives float(e·norm) < norm for every normal norm in [2^-31, 1]; the worst e is
  // the float below 1, checked on a dense sample of norms.
  const float below_one = std::nextafter(1.0f, 0.0f);
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> norm_bits(bits_of(0x1p-31f), bits_of(1.0f));
  for (int k = 0; k < 1000000; ++k) {
    const float norm = float_of(norm_bits(rng));
    ASSERT_LT(below_one * norm, norm) << norm;
  }
}

TEST(FusedLogits, ProbabilitiesAndGreedyTokensMatchCoreBitwise) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // The verifiers' p(t) (row statistics + LogitsProbRow) written out by the test hook: every
  // probability bitwise core::probs_from_logits', and the V2 token core's argmax_lowest of those
  // probabilities (near-tie rows included, where it differs from the logits' argmax).
  uint64_t seed = 400;
  int64_t logit_argmax_differs = 0;
  for (const LogitsFormat format : kFormats) {
    for (const int64_t vocab : {1, 5, 16, 17, 100, 2049, 4099, 32000}) {
      for (const double temperature : {0.0, 0.5, 1.0, 2.0}) {
        const int64_t rows = vocab >= 32000 ? 2 : 6;
        LogitsCase c(seed++, rows, 0, vocab, format, temperature, temperature, kAllRows, false,
                     false);
        if (vocab >= 32000) {  // one near-tie row among the two
          std::mt19937_64 rng(seed);
          random_logit_row(rng, c.target.values.data(), vocab, LogitRow::kNearTie, false);
          c.target.bits16.clear();
          c.target.encode();
          c.refresh_probs();
        }
        const DeviceLogitsBuffers device(c.target);
        DeviceBuffer<float> probs(rows * vocab);
        DeviceBuffer<int32_t> greedy(rows);
        DeviceBuffer<uint32_t> status(rows);
        ASSERT_EQ(gpu::fused_logits_rows(device.view(), rows, vocab, probs.span(), greedy.span(),
                                         status.span(), nullptr),
                  cudaSuccess);
        std::vector<float> gpu_probs;
        std::vector<int32_t> gpu_greedy;
        std::vector<uint32_t> gpu_status;
        ASSERT_EQ(probs.copy_to(gpu_probs), cudaSuccess);
        ASSERT_EQ(greedy.copy_to(gpu_greedy), cudaSuccess);
        ASSERT_EQ(status.copy_to(gpu_status), cudaSuccess);
        int64_t mismatches = 0;
        std::string first;
        for (int64_t r = 0; r < rows; ++r) {
          const std::span<const float> ref(&c.probs.probs_target[r * vocab], vocab);
          const std::span<const float> logits(&c.target.values[r * vocab], vocab);
          ASSERT_EQ(gpu_status[r], 0u) << "row " << r;
          EXPECT_EQ(gpu_greedy[r], argmax_lowest(ref)) << name(format) << " V=" << vocab
                                                       << " T=" << temperature << " row " << r;
          logit_argmax_differs += argmax_lowest(ref) != argmax_lowest(logits);
          for (int64_t t = 0; t < vocab; ++t) {
            if (bits_of(gpu_probs[r * vocab + t]) != bits_of(ref[t]) && mismatches++ == 0) {
              first = "row " + std::to_string(r) + " token " + std::to_string(t);
            }
          }
        }
        EXPECT_EQ(mismatches, 0) << name(format) << " V=" << vocab << " T=" << temperature
                                 << ", first at " << first;
      }
    }
  }
  EXPECT_GT(logit_argmax_differs, 0) << "near-tie rows must exercise the exact V2 pass";
}

TEST(VerifyLogits, ChainMatchesCore) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (const LogitsFormat format : kFormats) {
    for (const double temperature : {0.5, 1.0, 2.0}) {
      for (const int64_t vocab : {1, 5, 300, 2500}) {
        const int64_t gamma = vocab == 1 ? 2 : 4;
        const LogitsCase c(seed, 6, gamma, vocab, format, temperature, temperature, kAllRows, false,
                           true);
        expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, seed, 3}, "random logits");
        expect_chain_matches_core(c, {ChainMethod::kLenient, 0.6, seed, 3}, "random logits");
        expect_chain_matches_core(c, {ChainMethod::kGreedy, 1.0, seed, 3}, "random logits");
        ++seed;
      }
    }
  }
}

TEST(VerifyLogits, ChainMatchesCoreEdgeCases) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Draft == target: everything accepted, the bonus path (and V2 accepts the draft's argmax
  // only when it is the target's).
  const LogitsCase same(11, 8, 5, 700, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, true, false);
  const ChainResult all =
      verify_chain_reference(same.probs.view(), {ChainMethod::kToken, 1.0, 4, 1});
  for (const int32_t n : all.n_accepted) ASSERT_EQ(n, 5) << "draft == target accepts everything";
  expect_chain_matches_core(same, {ChainMethod::kToken, 1.0, 4, 1}, "draft == target");
  // Rows with one finite logit (one-hot probabilities), masked rows, ties.
  for (const LogitRow kind : {LogitRow::kOneFinite, LogitRow::kMasked, LogitRow::kTies}) {
    const LogitsCase c(12 + static_cast<int>(kind), 8, 3, 400, LogitsFormat::kBFloat16, 0.5, 2.0,
                       {kind}, false, true);
    expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, 5, 2}, "one row kind");
    expect_chain_matches_core(c, {ChainMethod::kGreedy, 1.0, 5, 2}, "one row kind");
  }
  // Different temperatures for target and draft, and T = 0 (one-hot rows) on either side.
  for (const auto& [t_target, t_draft] :
       std::vector<std::pair<double, double>>{{2.0, 0.5}, {0.0, 1.0}, {1.0, 0.0}, {0.0, 0.0}}) {
    const LogitsCase c(20, 8, 4, 333, LogitsFormat::kFloat16, t_target, t_draft, kAllRows, false,
                       true);
    for (const ChainMethod method :
         {ChainMethod::kToken, ChainMethod::kLenient, ChainMethod::kGreedy}) {
      expect_chain_matches_core(c, {method, 0.5, 21, 7}, "temperatures");
    }
  }
  // V2 needs no draft logits.
  const LogitsCase c(30, 6, 4, 500, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, true, true);
  const ChainParams greedy{ChainMethod::kGreedy, 1.0, 0, 0};
  EXPECT_EQ(testing::differences(run_chain(c, greedy, true),
                                 verify_chain_reference(c.probs.view(), greedy)),
            "");
}

TEST(VerifyLogits, ChainMatchesCoreLargeBatch) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const LogitsCase c(40, 64, 3, 3000, LogitsFormat::kFloat16, 1.0, 1.0,
                     {LogitRow::kNormal, LogitRow::kPeaked}, false, true);
  expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, 41, 9}, "B = 64");
  const LogitsCase wide(42, 2, 2, 4099, LogitsFormat::kFloat32, 0.5, 0.5, kAllRows, false, false);
  expect_chain_matches_core(wide, {ChainMethod::kToken, 1.0, 43, 9}, "V = 4099");
}

TEST(VerifyLogits, GreedyFollowsProbabilityTiesNotLogitTies) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Token 2 has the logit just below the max (token 5): its tempered gap x = -2^-26 rounds
  // exp to exactly 1, so p(2) = p(5) and core's V2 (lowest id among the maximal probabilities)
  // picks 2, not the logits' argmax 5. The same gap at T = 1/64 (x = -2^-20) is a clear loss.
  const int64_t v = 40;
  for (const double temperature : {1.0, 1.0 / 64.0}) {
    LogitsCase c(50, 2, 1, v, LogitsFormat::kFloat32, temperature, temperature, {LogitRow::kNormal},
                 true, false);
    for (int64_t row = 0; row < 2 * 2; ++row) {
      float* logits = &c.target.values[row * v];
      for (int64_t t = 0; t < v; ++t) logits[t] = -1.0f - static_cast<float>(t % 7);
      logits[5] = 0.25f;
      logits[2] = 0.25f - 0x1p-26f;  // the float below 0.25
    }
    c.refresh_probs();
    const int32_t expected = temperature == 1.0 ? 2 : 5;
    ASSERT_EQ(argmax_lowest(std::span<const float>(c.probs.probs_target.data(), v)), expected)
        << "the instance must (not) tie in probability at T = " << temperature;
    for (int64_t r = 0; r < 2; ++r) c.probs.token(r, 0) = r == 0 ? 2 : 5;
    expect_chain_matches_core(c, {ChainMethod::kGreedy, 1.0, 0, 0}, "near-tie");
  }
}

TEST(VerifyLogits, BlockMatchesCore) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 60;
  for (const LogitsFormat format : kFormats) {
    for (const double temperature : {0.5, 1.0, 2.0}) {
      for (const int64_t vocab : {1, 17, 300, 2500}) {
        const LogitsCase c(seed, 6, 4, vocab, format, temperature, temperature, kAllRows, false,
                           true);
        expect_block_matches_core(c, {seed, 5}, "random logits");
        ++seed;
      }
    }
  }
  const LogitsCase same(70, 8, 5, 600, LogitsFormat::kFloat16, 1.0, 1.0, kAllRows, true, true);
  expect_block_matches_core(same, {71, 2}, "draft == target");
  const LogitsCase greedy(72, 8, 3, 300, LogitsFormat::kFloat32, 0.0, 1.0, kAllRows, false, true);
  expect_block_matches_core(greedy, {73, 2}, "T = 0 target");
  const LogitsCase serial(74, 6, 4, 500, LogitsFormat::kBFloat16, 1.0, 2.0, kAllRows, false, true);
  expect_block_matches_core(serial, {75, 2}, "serial Z", {true, nullptr});
}

/// The target rows 0..n and draft rows 0..min(n, γ_b − 1) a chain method reads for request r of
/// a clean run (V2: target rows 0..n); V5 reads rows 0..γ_b − 1 of both, and target row γ_b iff
/// τ = γ_b.
bool row_read(ChainMethod method, bool block, bool is_target, int64_t row, int32_t n,
              int32_t n_draft) {
  if (block) return row < n_draft || (is_target && row == n_draft && n == n_draft);
  if (method == ChainMethod::kGreedy) return is_target && row <= n;
  return is_target ? row <= n : row <= n && row < n_draft;
}

TEST(VerifyLogits, BadLogitsSetStatusInRowsRead) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const LogitsFormat format : {LogitsFormat::kFloat32, LogitsFormat::kFloat16}) {
    for (int method_index = 0; method_index < 4; ++method_index) {
      const bool block = method_index == 3;
      const ChainMethod method =
          block ? ChainMethod::kToken : static_cast<ChainMethod>(method_index);
      const ChainParams params{method, 0.5, 80, 4};
      const int64_t b = 24, g = 3, v = 200;
      LogitsCase c(80 + method_index, b, g, v, format, 1.0, 1.0,
                   {LogitRow::kNormal, LogitRow::kPeaked}, false, true);
      const ChainResult clean = block ? verify_block(c.probs.view(), {80, 4})
                                      : verify_chain_reference(c.probs.view(), params);
      // Request r gets one corruption in a random row: NaN, +inf, or every logit -inf.
      std::mt19937_64 rng(90 + method_index);
      std::vector<int> expect_bad(b, 0);
      for (int64_t r = 0; r < b; ++r) {
        const int32_t n_draft = c.probs.n_draft[r];
        const bool is_target = r < 8 || r % 3 != 0 || n_draft == 0;
        const int64_t rows = is_target ? n_draft + 1 : n_draft;
        const int64_t row = r < 8 ? 0 : std::uniform_int_distribution<int64_t>(0, rows - 1)(rng);
        float* logits = is_target ? &c.target.values[(r * (g + 1) + row) * v]
                                  : &c.draft.values[(r * g + row) * v];
        switch (r % 4) {
          case 0:
            logits[row % v] = nan;
            break;
          case 1:
            logits[v - 1] = kInf;
            break;
          default:
            std::fill_n(logits, v, -kInf);
        }
        expect_bad[r] = row_read(method, block, is_target, row, clean.n_accepted[r], n_draft) &&
                        (is_target || method != ChainMethod::kGreedy);
      }
      c.target.bits16.clear();
      c.draft.bits16.clear();
      c.target.encode();
      c.draft.encode();
      const testing::GpuChainResult gpu = block ? run_block(c, {80, 4}) : run_chain(c, params);
      ASSERT_EQ(gpu.launch, cudaSuccess);
      ASSERT_EQ(gpu.sync, cudaSuccess);
      int flagged = 0;
      for (int64_t r = 0; r < b; ++r) {
        SCOPED_TRACE(std::string(name(format)) + " method " + std::to_string(method_index) +
                     " request " + std::to_string(r));
        if (expect_bad[r]) {
          ++flagged;
          EXPECT_NE(gpu.status[r], 0u);
          EXPECT_EQ(gpu.n_accepted[r], 0);
          for (int64_t i = 0; i <= g; ++i) EXPECT_EQ(gpu.emitted_tokens[r * (g + 1) + i], -1);
          for (int64_t i = 0; i < g; ++i) EXPECT_EQ(gpu.accept_mask[r * g + i], 0);
        } else {  // an unread corrupt row changes nothing
          EXPECT_EQ(gpu.status[r], 0u);
          EXPECT_EQ(gpu.n_accepted[r], clean.n_accepted[r]);
          for (int64_t i = 0; i <= g; ++i) {
            EXPECT_EQ(gpu.emitted_tokens[r * (g + 1) + i], clean.emitted_tokens[r * (g + 1) + i]);
          }
        }
        for (int64_t i = 0; i <= gpu.n_accepted[r] && gpu.status[r] == 0; ++i) {
          const int32_t token = gpu.emitted_tokens[r * (g + 1) + i];
          EXPECT_TRUE(token >= 0 && token < v) << "position " << i << " token " << token;
        }
      }
      EXPECT_GE(flagged, 8) << "requests 0..7 corrupt row 0, which every method reads";
    }
  }
}

TEST(VerifyLogits, SeedAndStepFromDeviceMemory) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // A launch given a device word ignores params.seed/step and uses the word's: the same result
  // as passing the word's values as arguments, for the probability and the logits kernels.
  const LogitsCase c(100, 16, 4, 300, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, false, true);
  const ChainParams ignored{ChainMethod::kToken, 1.0, 999, 999};
  int differing_steps = 0;
  for (const uint32_t step : {1u, 2u}) {
    const gpu::DeviceSeedStep word{12345, step, 0};
    DeviceBuffer<gpu::DeviceSeedStep> device_word(std::vector<gpu::DeviceSeedStep>{word});
    const ChainParams params{ChainMethod::kToken, 1.0, word.seed, word.step};
    const ChainResult ref = verify_chain_reference(c.probs.view(), params);
    const ChainResult other = verify_chain_reference(c.probs.view(), ignored);
    differing_steps += testing::differences(run_chain(c, ignored), ref) != "";
    {
      DeviceCase d(c);
      const auto gpu = d.read(gpu::verify_chain(d.batch(), ignored, d.output(), nullptr,
                                                device_word.const_span().data()));
      EXPECT_EQ(testing::differences(gpu, ref), "") << "logits chain, step " << step;
    }
    {
      const auto gpu = testing::run_gpu_chain(
          c.probs, ignored,
          [&](const ChainBatch& batch, const ChainParams& p, const gpu::ChainDeviceOutput& out,
              cudaStream_t stream) {
            return gpu::verify_chain(batch, p, out, stream, device_word.const_span().data());
          });
      EXPECT_EQ(testing::differences(gpu, ref), "") << "probability chain, step " << step;
      EXPECT_NE(testing::differences(gpu, other), "") << "the word must change the result";
    }
    const BlockParams block{word.seed, word.step};
    const ChainResult block_ref = verify_block(c.probs.view(), block);
    const gpu::BlockKernelOptions options{false, device_word.const_span().data()};
    EXPECT_EQ(testing::differences(run_block(c, {999, 999}, options), block_ref), "")
        << "logits block, step " << step;
    const auto gpu =
        testing::run_gpu_chain(c.probs, ignored,
                               [&](const ChainBatch& batch, const ChainParams&,
                                   const gpu::ChainDeviceOutput& out, cudaStream_t stream) {
                                 return gpu::verify_block(batch, {999, 999}, out, stream, options);
                               });
    EXPECT_EQ(testing::differences(gpu, block_ref), "") << "probability block, step " << step;
  }
  EXPECT_EQ(differing_steps, 2) << "the argument path must differ from the word's seed/step";
}

TEST(VerifyLogits, GraphReplayMatchesCore) {
  // Device only: the emulation's runtime has no stream capture.
#if defined(SPECLAB_SIMT_EMULATION)
  GTEST_SKIP() << "CUDA graphs need the device runtime (the emulation has no stream capture)";
#else
  SPECLAB_SKIP_WITHOUT_GPU();
  // One verification step (logits chain V1 and logits block V5) is captured once; each replay
  // gets new logits and tokens copied into the same device buffers and a new step written to the
  // device word, with no re-capture, and must give core's tokens for that step's inputs.
  const int64_t b = 8, g = 4, v = 1000;
  const LogitsCase first(200, b, g, v, LogitsFormat::kFloat16, 1.0, 1.0, kAllRows, false, true);
  DeviceCase d(first);
  DeviceCase d_block(first);
  DeviceBuffer<gpu::DeviceSeedStep> word(std::vector<gpu::DeviceSeedStep>{{777, 0, 0}});
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const cudaError_t chain_launch = gpu::verify_chain(d.batch(), {ChainMethod::kToken, 1.0, 0, 0},
                                                     d.output(), stream, word.const_span().data());
  const cudaError_t block_launch = gpu::verify_block(d_block.batch(), {0, 0}, d_block.output(),
                                                     stream, {false, word.const_span().data()});
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(chain_launch, cudaSuccess);
  ASSERT_EQ(block_launch, cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint32_t step = 1; step <= 4; ++step) {
    const LogitsCase c(200 + step, b, g, v, LogitsFormat::kFloat16, 1.0, 1.0, kAllRows, false,
                       true);
    const gpu::DeviceSeedStep host_word{777, step, 0};
    for (DeviceCase* target : {&d, &d_block}) {
      ASSERT_EQ(cudaMemcpyAsync(target->target.b16.span().data(), c.target.bits16.data(),
                                c.target.bits16.size() * 2, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(target->draft.b16.span().data(), c.draft.bits16.data(),
                                c.draft.bits16.size() * 2, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(target->tokens.span().data(), c.probs.draft_tokens.data(),
                                c.probs.draft_tokens.size() * 4, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(target->n_draft.span().data(), c.probs.n_draft.data(),
                                c.probs.n_draft.size() * 4, cudaMemcpyHostToDevice, stream),
                cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpyAsync(word.span().data(), &host_word, sizeof host_word,
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const ChainResult chain_ref =
        verify_chain_reference(c.probs.view(), {ChainMethod::kToken, 1.0, 777, step});
    const ChainResult block_ref = verify_block(c.probs.view(), {777, step});
    EXPECT_EQ(testing::differences(d.read(cudaSuccess), chain_ref), "") << "replay " << step;
    EXPECT_EQ(testing::differences(d_block.read(cudaSuccess), block_ref), "") << "replay " << step;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
#endif
}

TEST(VerifyLogits, BadShapesAndTemperaturesThrow) {
  // Checked on the host before anything touches the device, so this runs everywhere.
  const LogitsCase c(300, 2, 2, 10, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, false, false);
  std::vector<int32_t> emitted(6), n_accepted(2);
  std::vector<uint8_t> mask(4), fallback(2);
  std::vector<uint32_t> status(2);
  const gpu::ChainDeviceOutput out{emitted, n_accepted, mask, fallback, status};
  const ChainParams params{ChainMethod::kToken, 1.0, 0, 0};
  const auto target_bytes = std::as_bytes(std::span<const float>(c.target.values));
  const auto draft_bytes = std::as_bytes(std::span<const float>(c.draft.values));
  const gpu::LogitsBatch good{2,
                              2,
                              10,
                              {LogitsFormat::kFloat32, target_bytes, 1.0},
                              {LogitsFormat::kFloat32, draft_bytes, 1.0},
                              c.probs.draft_tokens,
                              {},
                              {}};
  gpu::LogitsBatch bad = good;
  bad.target.data = target_bytes.first(target_bytes.size() - 4);
  EXPECT_THROW(gpu::verify_chain(bad, params, out, nullptr), InvalidInput);
  bad = good;
  bad.draft.format = LogitsFormat::kFloat16;  // 160 bytes are 80 halves, not 40
  EXPECT_THROW(gpu::verify_chain(bad, params, out, nullptr), InvalidInput);
  EXPECT_THROW(gpu::verify_block(bad, {0, 0}, out, nullptr), InvalidInput);
  bad = good;
  bad.draft.data = {};
  EXPECT_THROW(gpu::verify_chain(bad, params, out, nullptr), InvalidInput);  // V1 needs q
  for (const double t : {-1.0, std::nan(""), 1e-300}) {
    bad = good;
    bad.target.temperature = t;
    EXPECT_THROW(gpu::verify_chain(bad, params, out, nullptr), InvalidInput) << t;
  }
  bad = good;
  bad.vocab = 0;
  EXPECT_THROW(gpu::verify_chain(bad, params, out, nullptr), InvalidInput);
  EXPECT_THROW(gpu::verify_chain(good, {ChainMethod::kLenient, 0.0, 0, 0}, out, nullptr),
               InvalidInput);
}

}  // namespace
}  // namespace speclab
