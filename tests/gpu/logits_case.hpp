// Logits test cases for the fused-softmax verifiers (tests/gpu/*logits*_test.cpp): random logits
// rows of several kinds in fp32/fp16/bf16, core::probs_from_logits of every row as the reference
// probabilities, and device copies of the case for gpu::LogitsBatch launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/sampling/sampling.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/verify/verify_chain.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab::testing {

using gpu::LogitsFormat;

inline const float kInf = std::numeric_limits<float>::infinity();

inline uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

inline float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// binary16 bits of a float that is exactly a half (a multiple of 1/64 below 16 in magnitude,
/// ±inf or NaN; the generators below make only those).
inline uint16_t exact_half_bits(float x) {
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
inline void random_logit_row(std::mt19937_64& rng, float* row, int64_t v, LogitRow kind,
                             bool half) {
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
  GpuChainResult read(cudaError_t launch) const {
    GpuChainResult out;
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

inline const char* name(LogitsFormat f) {
  return f == LogitsFormat::kFloat32 ? "fp32" : f == LogitsFormat::kFloat16 ? "fp16" : "bf16";
}

inline std::string describe(const LogitsCase& c, const std::string& label) {
  return label + " (" + name(c.target.format) + " B=" + std::to_string(c.probs.batch) +
         " γ=" + std::to_string(c.probs.gamma) + " V=" + std::to_string(c.probs.vocab) +
         " T=" + std::to_string(c.target.temperature) + "/" + std::to_string(c.draft.temperature) +
         ")";
}

inline const std::vector<LogitRow> kAllRows = {LogitRow::kNormal,    LogitRow::kMasked,
                                               LogitRow::kOneFinite, LogitRow::kPeaked,
                                               LogitRow::kTies,      LogitRow::kNearTie};
inline const LogitsFormat kFormats[] = {LogitsFormat::kFloat32, LogitsFormat::kFloat16,
                                        LogitsFormat::kBFloat16};

}  // namespace speclab::testing
