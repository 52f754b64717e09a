// "--fmad=false ⇒ bitwise core" as a fact: the device's scalar rules against core's host
// functions on every input (or, under the SIMT emulation, a dense stratified subset), and the
// device's row normaliser against core's softmax at V = 128256.
//
// Method: a sweep is a function of an index k (tests/gpu/bit_sweep.hpp). On the device one CTA of
// 1024 threads evaluates a block of inputs and sums a checksum term per input (a bijection of the
// result for each k, so any single difference changes the block's sum); the host evaluates the
// same inputs with core's own functions — exp_nonpositive_row (the softmax's exponential),
// fp16_to_float, fixed_point_total, chain_residual_weights, block_residual_weights — on all cores,
// and compares block by block. A differing block is evaluated again element by element to name
// the first input that differs.
//
// Coverage. On a device: exp_nonpositive on all 2^31 non-positive floats (−0 … −inf and the
// negative NaNs, which must give 0 as on the host) and +0; fp16 and bf16 → float on all 65,536
// patterns; to_fixed on all 2^32 floats; the residual weights on ~8200 × 8200 probability pairs
// (7800 patterns evenly over [0, 1] plus every exponent boundary) at five leniencies, plus the
// near-equal pairs (q within ±16 ulps of p); the block residual weight likewise at seven weights.
// Under the emulation, which runs each kernel thread as a fiber on one core, the same kernels on a
// dense stratified subset: every 127th non-positive float for exp (16.9M inputs), every 251st
// float for to_fixed (17.1M), ~2000 × 2000 probability pairs; the conversions stay exhaustive, and
// both builds add every exponent boundary, the clamps (−87, 32, 2^-58) and exp's reduction
// boundaries ((j − ½)·ln2). So the device run adds only the inputs in between.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/io/gguf.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/base/cuda_check.hpp"
#include "gpu/sampling/logits.hpp"
#include "tests/gpu/bit_sweep.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::BitRule;
using testing::BitSweep;
using testing::DeviceBuffer;

#if defined(SPECLAB_SIMT_EMULATION)
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

uint32_t bits_of(float x) { return gpu::bits_from_float(x); }
float float_of(uint32_t bits) { return gpu::float_from_bits(bits); }
uint64_t canonical(float value) { return std::isnan(value) ? 0x7fc00000u : bits_of(value); }

// Core's results for inputs [begin, end) of the sweep (host operands).
std::vector<uint64_t> core_results(const BitSweep& s, uint64_t begin, uint64_t end) {
  const size_t n = static_cast<size_t>(end - begin);
  std::vector<float> p(n), q(n);
  std::vector<uint32_t> p_bits(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t pb = 0, qb = 0;
    testing::sweep_operands(s, begin + i, &pb, &qb);
    p_bits[i] = pb;
    p[i] = float_of(pb);
    q[i] = float_of(qb);
  }
  std::vector<uint64_t> out(n);
  switch (s.rule) {
    case BitRule::kExpNonpositive: {
      std::vector<float> e(n);
      exp_nonpositive_row(p, e);
      for (size_t i = 0; i < n; ++i) out[i] = bits_of(e[i]);
      break;
    }
    case BitRule::kHalfToFloat:
      for (size_t i = 0; i < n; ++i)
        out[i] = canonical(fp16_to_float(static_cast<uint16_t>(p_bits[i])));
      break;
    case BitRule::kBFloat16ToFloat:
      // bf16 is the upper half of a float; core has no converter of its own, so the host form
      // of gpu/sampling/logits.hpp (what the softmax tests feed core with) is the reference.
      for (size_t i = 0; i < n; ++i) {
        out[i] = canonical(gpu::bfloat16_bits_to_float(static_cast<uint16_t>(p_bits[i])));
      }
      break;
    case BitRule::kToFixed:
      for (size_t i = 0; i < n; ++i) out[i] = fixed_point_total(std::span<const float>(&p[i], 1));
      break;
    case BitRule::kResidual: {
      const std::vector<uint64_t> w = chain_residual_weights(p, q, s.scalar);
      std::copy(w.begin(), w.end(), out.begin());
      break;
    }
    case BitRule::kBlockResidual: {
      const std::vector<uint64_t> w = block_residual_weights(s.scalar, p, q);
      std::copy(w.begin(), w.end(), out.begin());
      break;
    }
  }
  return out;
}

struct SweepOutcome {
  uint64_t inputs = 0, blocks = 0, differing_blocks = 0;
  std::string first_difference;
};

std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

// Runs sweep `host` (operands in host memory) on the device with the same operands copied there,
// and compares every block's checksum with core's.
SweepOutcome run_sweep(const BitSweep& host) {
  SweepOutcome outcome;
  outcome.inputs = host.count;
  outcome.blocks = (host.count + host.per_block - 1) / host.per_block;
  std::vector<uint32_t> a_host, b_host;
  if (host.a != nullptr)
    a_host.assign(host.a, host.a + (host.b != nullptr ? host.count / host.nb : host.count));
  if (host.b != nullptr) b_host.assign(host.b, host.b + host.nb);
  DeviceBuffer<uint32_t> d_a(a_host), d_b(b_host);
  DeviceBuffer<uint64_t> d_sums(static_cast<size_t>(outcome.blocks));
  BitSweep device = host;
  device.a = host.a != nullptr ? d_a.span().data() : nullptr;
  device.b = host.b != nullptr ? d_b.span().data() : nullptr;
  SPECLAB_CUDA_CHECK(testing::launch_bit_sweep(device, 0, d_sums.span().data(), nullptr, nullptr));
  std::vector<uint64_t> sums;
  SPECLAB_CUDA_CHECK(d_sums.copy_to(sums));

  // Core's checksums, blocks spread over the host's cores.
  std::vector<uint64_t> expected(static_cast<size_t>(outcome.blocks));
  const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (uint64_t blk = w; blk < outcome.blocks; blk += workers) {
        const uint64_t begin = blk * host.per_block;
        const uint64_t end = std::min(host.count, begin + host.per_block);
        const std::vector<uint64_t> r = core_results(host, begin, end);
        uint64_t sum = 0;
        for (uint64_t k = begin; k < end; ++k) sum += testing::checksum_term(k, r[k - begin]);
        expected[blk] = sum;
      }
    });
  }
  for (std::thread& t : pool) t.join();

  for (uint64_t blk = 0; blk < outcome.blocks; ++blk) {
    if (sums[blk] == expected[blk]) continue;
    if (outcome.differing_blocks++ > 0) continue;
    // Locate: the block's results one by one.
    const uint64_t begin = blk * host.per_block;
    const uint64_t end = std::min(host.count, begin + host.per_block);
    BitSweep one = device;
    one.count = end;
    DeviceBuffer<uint64_t> d_values(static_cast<size_t>(end - begin)), d_one(1);
    SPECLAB_CUDA_CHECK(testing::launch_bit_sweep(one, begin, d_one.span().data(),
                                                 d_values.span().data(), nullptr));
    std::vector<uint64_t> values;
    SPECLAB_CUDA_CHECK(d_values.copy_to(values));
    const std::vector<uint64_t> r = core_results(host, begin, end);
    for (uint64_t k = begin; k < end; ++k) {
      if (values[k - begin] == r[k - begin]) continue;
      uint32_t p = 0, q = 0;
      testing::sweep_operands(host, k, &p, &q);
      std::ostringstream what;
      what << "block " << blk << ", input " << k << ": operands " << hex(p) << " (" << float_of(p)
           << ")";
      if (host.b != nullptr)
        what << ", " << hex(q) << " (" << float_of(q) << "), scalar " << host.scalar;
      what << ": device " << hex(values[k - begin]) << ", core " << hex(r[k - begin]);
      outcome.first_difference = what.str();
      break;
    }
  }
  return outcome;
}

void expect_same(const BitSweep& s, const std::string& label) {
  const auto start = std::chrono::steady_clock::now();
  const SweepOutcome o = run_sweep(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ sweep    ] %s: %llu inputs in %llu blocks, %.2f s\n", label.c_str(),
              static_cast<unsigned long long>(o.inputs), static_cast<unsigned long long>(o.blocks),
              seconds);
  EXPECT_EQ(o.differing_blocks, 0u) << label << ": " << o.differing_blocks << " of " << o.blocks
                                    << " blocks differ; first " << o.first_difference;
}

// `base` ± `radius` patterns (within the 32-bit range).
void add_around(std::vector<uint32_t>& out, uint32_t base, uint32_t radius) {
  for (int64_t d = -static_cast<int64_t>(radius); d <= static_cast<int64_t>(radius); ++d) {
    const int64_t b = static_cast<int64_t>(base) + d;
    if (b >= 0 && b <= 0xffffffffll) out.push_back(static_cast<uint32_t>(b));
  }
}

// Every exponent of `sign`: the first, second, middle and last significands.
void add_exponent_boundaries(std::vector<uint32_t>& out, uint32_t sign) {
  for (uint32_t e = 0; e < 256; ++e) {
    for (const uint32_t m : {0u, 1u, 2u, 0x3fffffu, 0x400000u, 0x7ffffdu, 0x7ffffeu, 0x7fffffu}) {
      out.push_back(sign | e << 23 | m);
    }
  }
}

// Patterns of `list`, `per_block` to a checksum.
BitSweep list_sweep(BitRule rule, const std::vector<uint32_t>& list, uint64_t per_block) {
  BitSweep s;
  s.rule = rule;
  s.a = list.data();
  s.count = list.size();
  s.per_block = per_block;
  return s;
}

BitSweep strided_sweep(BitRule rule, uint32_t first, uint32_t stride, uint64_t count,
                       uint64_t per_block) {
  BitSweep s;
  s.rule = rule;
  s.first = first;
  s.stride = stride;
  s.count = count;
  s.per_block = per_block;
  return s;
}

TEST(BitEquality, ExpNonpositiveOnEveryNonPositiveFloat) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // 0x80000000 (−0) … 0xffffffff: every negative float, −inf and the negative NaNs.
  const uint32_t stride = kEmulated ? 127 : 1;
  const uint64_t count = (0x80000000ull + stride - 1) / stride;
  expect_same(strided_sweep(BitRule::kExpNonpositive, 0x80000000u, stride, count, 1u << 16),
              kEmulated ? "exp_nonpositive, every 127th non-positive float"
                        : "exp_nonpositive, every non-positive float");
  // +0, every exponent boundary, the clamp at −87, the reduction's k = round(x/ln2) boundaries
  // ((j − ½)·ln2), and the inputs just below 0 where exp rounds to 1.
  std::vector<uint32_t> list = {0x00000000u};
  add_exponent_boundaries(list, 0x80000000u);
  add_around(list, bits_of(-87.0f), 64);
  for (int j = 0; j >= -126; --j) {
    add_around(list, bits_of(static_cast<float>((j - 0.5) * 0.6931471805599453)), 16);
  }
  add_around(list, bits_of(-std::ldexp(1.0f, -22)), 16);
  add_around(list, bits_of(-std::ldexp(1.0f, -24)), 16);
  expect_same(list_sweep(BitRule::kExpNonpositive, list, 1024), "exp_nonpositive, boundaries");
}

TEST(BitEquality, HalfAndBFloat16ToFloatOnAllPatterns) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_same(strided_sweep(BitRule::kHalfToFloat, 0, 1, 65536, 4096),
              "fp16 -> float, all 65536 patterns");
  expect_same(strided_sweep(BitRule::kBFloat16ToFloat, 0, 1, 65536, 4096),
              "bf16 -> float, all 65536 patterns");
}

TEST(BitEquality, ToFixedOnEveryFloat) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const uint32_t stride = kEmulated ? 251 : 1;
  const uint64_t count = ((1ull << 32) + stride - 1) / stride;
  expect_same(strided_sweep(BitRule::kToFixed, 0, stride, count, 1u << 16),
              kEmulated ? "to_fixed, every 251st float" : "to_fixed, every float");
  std::vector<uint32_t> list;
  add_exponent_boundaries(list, 0);
  add_exponent_boundaries(list, 0x80000000u);
  add_around(list, bits_of(32.0f), 64);                  // the clamp
  add_around(list, bits_of(std::ldexp(1.0f, -58)), 64);  // the smallest nonzero weight
  add_around(list, bits_of(1.0f), 64);
  add_around(list, 0x7f800000u, 16);  // +inf and NaNs
  expect_same(list_sweep(BitRule::kToFixed, list, 1024), "to_fixed, boundaries");
}

// Probabilities for the residual sweeps: `n` patterns evenly over [0, 1.0f], every exponent
// boundary from 2^-126 up, 0, the smallest subnormal and 1.
std::vector<uint32_t> probability_patterns(uint32_t n) {
  std::vector<uint32_t> out;
  const uint32_t one = bits_of(1.0f);
  for (uint32_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>(uint64_t{one} * i / n));
  for (uint32_t e = 1; e < 127; ++e) {
    for (const uint32_t m : {0u, 1u, 0x7fffffu}) out.push_back(e << 23 | m);
  }
  for (const uint32_t extra : {0u, 1u, one}) out.push_back(extra);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Offsets −16 … 16 in units of the last place (the near-equal pairs).
std::vector<uint32_t> near_offsets() {
  std::vector<uint32_t> out;
  for (int32_t d = -16; d <= 16; ++d) out.push_back(static_cast<uint32_t>(d));
  return out;
}

BitSweep pair_sweep(BitRule rule, const std::vector<uint32_t>& p, const std::vector<uint32_t>& q,
                    bool diagonal, float scalar) {
  BitSweep s;
  s.rule = rule;
  s.a = p.data();
  s.b = q.data();
  s.nb = q.size();
  s.diagonal = diagonal ? 1 : 0;
  s.scalar = scalar;
  s.count = p.size() * q.size();
  s.per_block = 1u << 16;
  return s;
}

TEST(BitEquality, ResidualWeightsOnDenseSweeps) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> p = probability_patterns(kEmulated ? 1664 : 7800);
  const std::vector<uint32_t> offsets = near_offsets();
  for (const float l : {1.0f, 0.5f, 0.9f, 0.999f, 0.3f}) {
    expect_same(
        pair_sweep(BitRule::kResidual, p, p, false, l),
        "residual_fixed, " + std::to_string(p.size()) + "^2 pairs, l = " + std::to_string(l));
    expect_same(pair_sweep(BitRule::kResidual, p, offsets, true, l),
                "residual_fixed, near-equal pairs, l = " + std::to_string(l));
  }
}

TEST(BitEquality, BlockResidualWeightOnDenseSweeps) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const std::vector<uint32_t> p = probability_patterns(kEmulated ? 1664 : 7800);
  const std::vector<uint32_t> offsets = near_offsets();
  for (const float w : {1.0f, 0.5f, 0.999999f, 0.3f, 1e-3f, std::ldexp(1.0f, -20), 0.7f}) {
    expect_same(
        pair_sweep(BitRule::kBlockResidual, p, p, false, w),
        "block_residual_fixed, " + std::to_string(p.size()) + "^2 pairs, w = " + std::to_string(w));
    expect_same(pair_sweep(BitRule::kBlockResidual, p, offsets, true, w),
                "block_residual_fixed, near-equal pairs, w = " + std::to_string(w));
  }
}

// The row normaliser: gpu::probs_from_logits against core's probs_from_logits on V = 128256 rows
// (a Llama-3 vocabulary: 8016 lane sums of 16, no tail), every probability bit for bit.
TEST(BitEquality, RowNormaliserAtLlamaVocabulary) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const int64_t vocab = 128256, rows = 3;
  std::mt19937_64 rng(128256);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const gpu::LogitsFormat format :
       {gpu::LogitsFormat::kFloat32, gpu::LogitsFormat::kFloat16, gpu::LogitsFormat::kBFloat16}) {
    // Row 0 Gaussian, row 1 Gaussian with masked tokens and a tie at the max, row 2 peaked.
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < vocab; ++t) {
        float x = normal(rng) * (r == 2 ? 4.0f : 1.0f);
        if (r == 1 && t % 97 == 0) x = -INFINITY;
        logits[static_cast<size_t>(r * vocab + t)] = x;
      }
    }
    logits[static_cast<size_t>(vocab + 5)] = logits[static_cast<size_t>(vocab + 7)] = 20.0f;
    // Stored as the format; core reads the same values (the conversions are exact).
    std::vector<std::byte> stored;
    std::vector<float> values(logits.size());
    if (format == gpu::LogitsFormat::kFloat32) {
      stored.resize(logits.size() * 4);
      std::memcpy(stored.data(), logits.data(), stored.size());
      values = logits;
    } else {
      std::vector<uint16_t> bits(logits.size());
      for (size_t i = 0; i < logits.size(); ++i) {
        if (format == gpu::LogitsFormat::kBFloat16) {
          bits[i] = gpu::bfloat16_bits_from_float(logits[i]);
          values[i] = gpu::bfloat16_bits_to_float(bits[i]);
        } else {
          // fp16: the half of largest magnitude at or below |x|, by bisection over the patterns
          // of x's sign (ordered by magnitude) with core's converter.
          const float clamped = logits[i];
          uint16_t h = 0;
          uint16_t lo = clamped < 0 ? 0x8000 : 0x0000;
          uint16_t hi = clamped < 0 ? 0xfc00 : 0x7c00;
          if (std::isinf(clamped)) {
            h = hi;
          } else {
            while (hi - lo > 1) {
              const uint16_t mid = static_cast<uint16_t>(lo + (hi - lo) / 2);
              (std::fabs(fp16_to_float(mid)) <= std::fabs(clamped) ? lo : hi) = mid;
            }
            h = lo;
          }
          bits[i] = h;
          values[i] = fp16_to_float(h);
        }
      }
      stored.resize(bits.size() * 2);
      std::memcpy(stored.data(), bits.data(), stored.size());
    }
    for (const double temperature : {0.7, 1.0, 2.5}) {
      SCOPED_TRACE(::testing::Message()
                   << "format " << static_cast<int>(format) << " T " << temperature);
      std::vector<std::byte> stored_copy = stored;
      DeviceBuffer<std::byte> d_logits(stored_copy);
      DeviceBuffer<float> d_probs(static_cast<size_t>(rows * vocab));
      DeviceBuffer<uint32_t> d_status(static_cast<size_t>(rows));
      SPECLAB_CUDA_CHECK(gpu::probs_from_logits(format, d_logits.const_span(), rows, vocab,
                                                temperature, d_probs.span(), d_status.span(),
                                                nullptr));
      SPECLAB_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> probs;
      std::vector<uint32_t> status;
      SPECLAB_CUDA_CHECK(d_probs.copy_to(probs));
      SPECLAB_CUDA_CHECK(d_status.copy_to(status));
      SamplingParams params;
      params.temperature = temperature;
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(status[static_cast<size_t>(r)], 0u) << "row " << r;
        const std::vector<float> core =
            probs_from_logits(std::span<const float>(values).subspan(static_cast<size_t>(r * vocab),
                                                                     static_cast<size_t>(vocab)),
                              params);
        int64_t differ = 0, first = -1;
        for (int64_t t = 0; t < vocab; ++t) {
          if (bits_of(probs[static_cast<size_t>(r * vocab + t)]) !=
              bits_of(core[static_cast<size_t>(t)])) {
            if (differ++ == 0) first = t;
          }
        }
        EXPECT_EQ(differ, 0) << "row " << r << ": first at token " << first << ": device "
                             << (first >= 0 ? probs[static_cast<size_t>(r * vocab + first)] : 0.0f)
                             << ", core " << (first >= 0 ? core[static_cast<size_t>(first)] : 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace speclab
