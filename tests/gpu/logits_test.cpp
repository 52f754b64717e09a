// gpu::probs_from_logits against core::probs_from_logits (no filters): bitwise equal
// probabilities for fp32, fp16 and bf16 logits (gpu/sampling/logits.hpp: the same float exp and
// core's summation order for the normaliser), and the verifiers fed with the device probabilities
// give core's tokens. Built for the device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/sampling/logits.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_block.hpp"
#include "gpu/verify/verify_block.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using gpu::LogitsFormat;
using testing::DeviceBuffer;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

/// binary16 bits of a float that is exactly a normal half, ±0 or ±inf (the test's values are).
uint16_t exact_half_bits(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if ((b & 0x7fffffffu) == 0) return sign;
  if ((b & 0x7fffffffu) == 0x7f800000u) return sign | 0x7c00u;
  const int exponent = static_cast<int>((b >> 23) & 0xffu) - 127;
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | ((b >> 13) & 0x3ffu));
}

/// Logits in a given storage: the raw device bytes and the exact floats core sees.
struct Logits {
  LogitsFormat format = LogitsFormat::kFloat32;
  int64_t rows = 0, vocab = 0;
  std::vector<float> as_float;   // what core is given (each stored value, converted exactly)
  std::vector<uint16_t> bits16;  // fp16/bf16 storage
};

enum class LogitKind { kNormal, kMasked, kTies, kWide };

/// Random logits of one kind; values are multiples of 1/64 below 32 in magnitude, so exact in
/// fp16, then (bf16) rounded down to bf16 by truncation.
Logits random_logits(uint64_t seed, LogitsFormat format, int64_t rows, int64_t vocab) {
  std::mt19937_64 rng(seed);
  Logits out{format, rows, vocab, std::vector<float>(rows * vocab), {}};
  for (int64_t r = 0; r < rows; ++r) {
    const auto kind = static_cast<LogitKind>(r % 4);
    std::uniform_int_distribution<int> k(kind == LogitKind::kWide ? -2047 : -400,
                                         kind == LogitKind::kTies ? 0 : 400);
    std::uniform_int_distribution<int> coin(0, 3);
    for (int64_t t = 0; t < vocab; ++t) {
      float x = static_cast<float>(k(rng)) / 64.0f;
      if (kind == LogitKind::kTies) x = std::floor(x);  // many equal logits, ties at the max
      if (kind == LogitKind::kMasked && coin(rng) == 0) x = -std::numeric_limits<float>::infinity();
      out.as_float[r * vocab + t] = x;
    }
    if (kind == LogitKind::kMasked) out.as_float[r * vocab + (seed % vocab)] = 1.0f;  // one finite
  }
  if (format != LogitsFormat::kFloat32) {
    out.bits16.resize(out.as_float.size());
    for (size_t i = 0; i < out.as_float.size(); ++i) {
      if (format == LogitsFormat::kFloat16) {
        out.bits16[i] = exact_half_bits(out.as_float[i]);
        out.as_float[i] = gpu::half_bits_to_float(out.bits16[i]);
      } else {
        out.bits16[i] = static_cast<uint16_t>(bits_of(out.as_float[i]) >> 16);
        out.as_float[i] = gpu::bfloat16_bits_to_float(out.bits16[i]);
      }
    }
  }
  return out;
}

struct GpuProbs {
  cudaError_t launch = cudaSuccess, sync = cudaSuccess;
  std::vector<float> probs;
  std::vector<uint32_t> status;
};

/// Runs the kernel on `logits` into `probs`/`status` device buffers.
cudaError_t launch_logits(const Logits& logits, double temperature, DeviceBuffer<float>& probs,
                          DeviceBuffer<uint32_t>& status, DeviceBuffer<float>& f32,
                          DeviceBuffer<uint16_t>& b16) {
  const std::span<const std::byte> bytes = logits.format == LogitsFormat::kFloat32
                                               ? std::as_bytes(f32.const_span())
                                               : std::as_bytes(b16.const_span());
  return gpu::probs_from_logits(logits.format, bytes, logits.rows, logits.vocab, temperature,
                                probs.span(), status.span(), nullptr);
}

GpuProbs run_logits(const Logits& logits, double temperature) {
  DeviceBuffer<float> f32(logits.format == LogitsFormat::kFloat32 ? logits.as_float
                                                                  : std::vector<float>{});
  DeviceBuffer<uint16_t> b16(logits.bits16);
  DeviceBuffer<float> probs(logits.as_float.size());
  DeviceBuffer<uint32_t> status(logits.rows);
  GpuProbs out;
  out.launch = launch_logits(logits, temperature, probs, status, f32, b16);
  out.sync = probs.copy_to(out.probs);
  if (out.sync == cudaSuccess) out.sync = status.copy_to(out.status);
  return out;
}

const char* name(LogitsFormat f) {
  return f == LogitsFormat::kFloat32 ? "fp32" : f == LogitsFormat::kFloat16 ? "fp16" : "bf16";
}

TEST(Logits, HalfConversionsAreExact) {
  EXPECT_EQ(gpu::half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(gpu::half_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(gpu::half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(gpu::half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(gpu::half_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(gpu::half_bits_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(bits_of(gpu::half_bits_to_float(0x8000)), 0x80000000u);
  EXPECT_EQ(gpu::half_bits_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(gpu::half_bits_to_float(0x7e00)));
  EXPECT_EQ(gpu::bfloat16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(gpu::bfloat16_bits_to_float(0xc2f7), -123.5f);
  for (uint32_t h = 0; h < 0x10000u; ++h) {  // every finite half round-trips through the helper
    const float x = gpu::half_bits_to_float(static_cast<uint16_t>(h));
    if ((h & 0x7c00u) != 0x7c00u && (h & 0x7fffu) >= 0x0400u) {
      ASSERT_EQ(exact_half_bits(x), h) << std::hex << h;
    }
  }
}

TEST(Logits, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 5;
  for (const LogitsFormat format :
       {LogitsFormat::kFloat32, LogitsFormat::kFloat16, LogitsFormat::kBFloat16}) {
    for (const int64_t vocab : {1, 5, 16, 17, 100, 1000, 4099, 32000}) {
      for (const double temperature : {0.0, 0.7, 1.0, 2.5}) {
        const Logits logits = random_logits(seed++, format, 4, vocab);
        const GpuProbs gpu = run_logits(logits, temperature);
        ASSERT_EQ(gpu.launch, cudaSuccess);
        ASSERT_EQ(gpu.sync, cudaSuccess);
        int64_t mismatches = 0;
        std::ostringstream first;
        for (int64_t r = 0; r < logits.rows; ++r) {
          EXPECT_EQ(gpu.status[r], 0u);
          const std::vector<float> ref =
              probs_from_logits(std::span<const float>(&logits.as_float[r * vocab], vocab),
                                SamplingParams{temperature, 0, 1.0, 0.0});
          for (int64_t t = 0; t < vocab; ++t) {
            const float g = gpu.probs[r * vocab + t];
            if (bits_of(g) != bits_of(ref[t]) && mismatches++ == 0) {
              first << "row " << r << " token " << t << ": gpu " << g << " core " << ref[t];
            }
          }
        }
        EXPECT_EQ(mismatches, 0) << name(format) << " V=" << vocab << " T=" << temperature
                                 << ", first: " << first.str();
      }
    }
  }
}

TEST(Logits, BadRowsSetStatus) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  Logits logits{LogitsFormat::kFloat32, 4, 40, std::vector<float>(160, 0.5f), {}};
  logits.as_float[1 * 40 + 7] = std::numeric_limits<float>::quiet_NaN();
  logits.as_float[2 * 40 + 39] = inf;
  for (int t = 0; t < 40; ++t) logits.as_float[3 * 40 + t] = -inf;
  const GpuProbs gpu = run_logits(logits, 1.0);
  ASSERT_EQ(gpu.launch, cudaSuccess);
  ASSERT_EQ(gpu.sync, cudaSuccess);
  EXPECT_EQ(gpu.status[0], gpu::kLogitsOk);
  EXPECT_EQ(gpu.status[1], gpu::kLogitsBadValue);
  EXPECT_EQ(gpu.status[2], gpu::kLogitsBadValue);
  EXPECT_EQ(gpu.status[3], gpu::kLogitsAllMasked);
  for (int64_t t = 40; t < 160; ++t) EXPECT_EQ(gpu.probs[t], 0.0f) << t;
  EXPECT_EQ(gpu.probs[0], 1.0f / 40.0f);
}

TEST(Logits, BadArgumentsThrow) {
  SPECLAB_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> logits(std::vector<float>(20, 0.0f)), probs(20);
  DeviceBuffer<uint32_t> status(2);
  const auto bytes = std::as_bytes(logits.const_span());
  EXPECT_THROW(gpu::probs_from_logits(LogitsFormat::kFloat32, bytes, 2, 10, -1.0, probs.span(),
                                      status.span(), nullptr),
               InvalidInput);
  EXPECT_THROW(gpu::probs_from_logits(LogitsFormat::kFloat16, bytes, 2, 10, 1.0, probs.span(),
                                      status.span(), nullptr),
               InvalidInput);  // 80 bytes are 40 halves, not 20
  EXPECT_THROW(gpu::probs_from_logits(LogitsFormat::kFloat32, bytes, 2, 10, 1.0,
                                      probs.span().first(10), status.span(), nullptr),
               InvalidInput);
}

// A logits span must start at a multiple of one logit's size: the kernels load whole elements,
// and a misaligned fp32 row faults on a device. The launcher says so before any launch.
TEST(Logits, MisalignedLogitsAreRejectedOnTheHost) {
  SPECLAB_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> logits(std::vector<float>(21, 0.0f)), probs(20);
  DeviceBuffer<uint32_t> status(2);
  const std::span<const std::byte> all = std::as_bytes(logits.const_span());
  // 80 bytes from byte 2: the right size for 20 fp32 (or 40 half) logits, aligned for halves
  // only; from byte 1 aligned for neither.
  const std::span<const std::byte> from2 = all.subspan(2, 80), from1 = all.subspan(1, 80);
  EXPECT_THAT(testing::error_of([&] {
                (void)gpu::probs_from_logits(LogitsFormat::kFloat32, from2, 2, 10, 1.0,
                                             probs.span(), status.span(), nullptr);
              }),
              ::testing::HasSubstr("not a multiple of 4 (the size of one logit)"));
  // Aligned for halves, the same 80 bytes are accepted as bf16 (40 logits, rows·V = 2·20).
  DeviceBuffer<float> probs40(40);
  EXPECT_EQ(gpu::probs_from_logits(LogitsFormat::kBFloat16, from2, 2, 20, 1.0, probs40.span(),
                                   status.span(), nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_THAT(testing::error_of([&] {
                (void)gpu::probs_from_logits(LogitsFormat::kBFloat16, from1, 2, 20, 1.0,
                                             probs40.span(), status.span(), nullptr);
              }),
              ::testing::HasSubstr("not a multiple of 2 (the size of one logit)"));
}

TEST(Logits, VerifierOnDeviceProbsMatchesCore) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Logits -> probabilities on the device, then gpu::verify_block on those device rows; core runs
  // probs_from_logits and verify_block on the host. Equal probabilities (bitwise) give equal
  // tokens.
  const int64_t b = 6, g = 4, vocab = 3000;
  for (const LogitsFormat format : {LogitsFormat::kFloat32, LogitsFormat::kFloat16}) {
    for (const double temperature : {0.8, 1.3}) {
      const Logits target = random_logits(900 + b, format, b * (g + 1), vocab);
      const Logits draft = random_logits(901 + b, format, b * g, vocab);
      testing::OwnedChainBatch host(b, g, vocab);
      const SamplingParams sampling{temperature, 0, 1.0, 0.0};
      for (int64_t row = 0; row < b * (g + 1); ++row) {
        probs_from_logits(std::span<const float>(&target.as_float[row * vocab], vocab), sampling,
                          std::span<float>(&host.probs_target[row * vocab], vocab));
      }
      for (int64_t row = 0; row < b * g; ++row) {
        probs_from_logits(std::span<const float>(&draft.as_float[row * vocab], vocab), sampling,
                          std::span<float>(&host.probs_draft[row * vocab], vocab));
      }
      host.draw_drafts(77);
      const BlockParams params{12345, 9};
      const ChainResult ref = verify_block(host.view(), params);

      DeviceBuffer<float> target_f32(format == LogitsFormat::kFloat32 ? target.as_float
                                                                      : std::vector<float>{});
      DeviceBuffer<float> draft_f32(format == LogitsFormat::kFloat32 ? draft.as_float
                                                                     : std::vector<float>{});
      DeviceBuffer<uint16_t> target_b16(target.bits16), draft_b16(draft.bits16);
      DeviceBuffer<float> probs_target(host.probs_target.size()),
          probs_draft(host.probs_draft.size());
      DeviceBuffer<uint32_t> target_status(b * (g + 1)), draft_status(b * g);
      ASSERT_EQ(
          launch_logits(target, temperature, probs_target, target_status, target_f32, target_b16),
          cudaSuccess);
      ASSERT_EQ(launch_logits(draft, temperature, probs_draft, draft_status, draft_f32, draft_b16),
                cudaSuccess);
      DeviceBuffer<int32_t> tokens(host.draft_tokens), emitted(b * (g + 1)), n_accepted(b);
      DeviceBuffer<uint8_t> mask(b * g), fallback(b);
      DeviceBuffer<uint32_t> status(b);
      const ChainBatch batch{
          b,  g, vocab, probs_target.const_span(), probs_draft.const_span(), tokens.const_span(),
          {}, {}};
      testing::GpuChainResult gpu;
      gpu.launch = gpu::verify_block(
          batch, params,
          {emitted.span(), n_accepted.span(), mask.span(), fallback.span(), status.span()},
          nullptr);
      for (const cudaError_t e :
           {emitted.copy_to(gpu.emitted_tokens), n_accepted.copy_to(gpu.n_accepted),
            mask.copy_to(gpu.accept_mask), fallback.copy_to(gpu.residual_fallback),
            status.copy_to(gpu.status)}) {
        if (gpu.sync == cudaSuccess) gpu.sync = e;
      }
      EXPECT_EQ(testing::differences(gpu, ref), "") << name(format) << " T=" << temperature;
      std::vector<float> device_target;
      ASSERT_EQ(probs_target.copy_to(device_target), cudaSuccess);
      EXPECT_EQ(std::memcmp(device_target.data(), host.probs_target.data(),
                            device_target.size() * sizeof(float)),
                0)
          << "device probabilities differ from core's";
    }
  }
}

}  // namespace
}  // namespace speclab
