// gpu::sample_rows against core::sample_categorical: the same token for the same row and the same
// Philox bits (the fixed-point rule of core/base/rules.hpp is exact, so equality is bit for bit),
// for vocabularies that end inside a 256-token chunk, sparse, one-hot and peaked rows, strided
// rows, request ids, per-row limits, the sequence append and the row copy; an all-zero row sets
// kSampleZeroRow. gpu::sample_logits_rows against gpu::probs_from_logits followed by sample_rows:
// the same tokens, sequence appends, status bits and copied logits, bit for bit. Built for the
// device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/sampling/sampling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
#include "gpu/sampling/logits.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::DeviceBuffer;
using testing::RowKind;

TEST(Sampling, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(4242);
  const RowKind kinds[] = {RowKind::kDense, RowKind::kSparse, RowKind::kOneHot, RowKind::kPeaked};
  for (const int64_t vocab : {1, 2, 31, 256, 257, 1000, 4099}) {
    const int64_t rows = 9, stride = vocab + 3;  // strided rows: 3 floats of padding each
    std::vector<float> probs(rows * stride, -1.0f);
    for (int64_t r = 0; r < rows; ++r) {
      testing::random_row(rng, &probs[r * stride], vocab, kinds[r % 4]);
    }
    std::vector<uint32_t> ids(rows);
    std::vector<int32_t> limit(rows), lengths(rows);
    for (int64_t r = 0; r < rows; ++r) {
      ids[r] = static_cast<uint32_t>(100 + 3 * r);
      limit[r] = static_cast<int32_t>(r % 3);  // position 2 is sampled where limit ≥ 2
      lengths[r] = static_cast<int32_t>(r + 1);
    }
    const int64_t seq_stride = 16, token_stride = 2;
    DeviceBuffer<float> d_probs(probs), d_copy(rows * vocab);
    DeviceBuffer<uint32_t> d_ids(ids), d_status(std::vector<uint32_t>(rows, 0));
    DeviceBuffer<int32_t> d_limit(limit), d_lengths(lengths);
    DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>(rows * token_stride, -7));
    DeviceBuffer<int32_t> d_seq(std::vector<int32_t>(rows * seq_stride, -7));
    gpu::SampleRowsArgs a;
    a.probs = d_probs.const_span().data();
    a.probs_stride = stride;
    a.rows = rows;
    a.vocab = vocab;
    a.seed = 99;
    a.step = 5;
    a.position = 2;
    a.request_ids = d_ids.const_span().data();
    a.limit = d_limit.const_span().data();
    a.tokens = d_tokens.span().data() + 1;
    a.token_stride = token_stride;
    a.sequences = d_seq.span().data();
    a.seq_stride = seq_stride;
    a.lengths = d_lengths.const_span().data();
    a.seq_offset = 1;
    a.copy_to = d_copy.span().data();
    a.copy_stride = vocab;
    a.status = d_status.span().data();
    ASSERT_EQ(gpu::sample_rows(a, nullptr), cudaSuccess);
    std::vector<int32_t> tokens, seq;
    std::vector<float> copy;
    std::vector<uint32_t> status;
    ASSERT_EQ(d_tokens.copy_to(tokens), cudaSuccess);
    ASSERT_EQ(d_seq.copy_to(seq), cudaSuccess);
    ASSERT_EQ(d_copy.copy_to(copy), cudaSuccess);
    ASSERT_EQ(d_status.copy_to(status), cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      const std::span<const float> row(&probs[r * stride], vocab);
      EXPECT_EQ(status[r], 0u);
      if (limit[r] < 2) {  // not sampled: nothing written
        EXPECT_EQ(tokens[r * token_stride + 1], -7) << "V " << vocab << " row " << r;
        EXPECT_EQ(seq[r * seq_stride + lengths[r] + 1], -7);
        continue;
      }
      const RandomAddress address{99, ids[r], 5, 2, Purpose::kDraftSample, 0};
      const int32_t expected = sample_categorical(row, philox_bits(address));
      EXPECT_EQ(tokens[r * token_stride + 1], expected) << "V " << vocab << " row " << r;
      EXPECT_EQ(tokens[r * token_stride], -7);  // the stride's other slot is untouched
      EXPECT_EQ(seq[r * seq_stride + lengths[r] + 1], expected);
      for (int64_t t = 0; t < vocab; ++t) ASSERT_EQ(copy[r * vocab + t], row[t]);
    }
  }
}

TEST(Sampling, ZeroRowSetsStatus) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const std::vector<float> probs = {0.0f, 0.0f, 0.0f, 0.25f, 0.75f, 0.0f};
  DeviceBuffer<float> d_probs(probs);
  DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>(2, -7));
  DeviceBuffer<uint32_t> d_status(std::vector<uint32_t>(2, 0));
  gpu::SampleRowsArgs a;
  a.probs = d_probs.const_span().data();
  a.rows = 2;
  a.vocab = 3;
  a.tokens = d_tokens.span().data();
  a.status = d_status.span().data();
  ASSERT_EQ(gpu::sample_rows(a, nullptr), cudaSuccess);
  std::vector<int32_t> tokens;
  std::vector<uint32_t> status;
  ASSERT_EQ(d_tokens.copy_to(tokens), cudaSuccess);
  ASSERT_EQ(d_status.copy_to(status), cudaSuccess);
  EXPECT_EQ(status[0], gpu::kSampleZeroRow);
  EXPECT_EQ(tokens[0], 0);  // a valid id, flagged by the status, never garbage
  EXPECT_EQ(status[1], 0u);
  EXPECT_GE(tokens[1], 0);
  EXPECT_LE(tokens[1], 2);
  EXPECT_NE(tokens[1], 2);  // probability zero
}

// Logits rows of several shapes: dense, peaked, masked (-inf), tied maxima, and (with `bad`) one
// row with a NaN and one with every logit -inf.
std::vector<float> logits_rows(std::mt19937_64& rng, int64_t rows, int64_t vocab, bool bad) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &out[r * vocab];
    for (int64_t t = 0; t < vocab; ++t) row[t] = 3.0f * normal(rng);
    switch (r % 5) {
      case 1:  // peaked
        row[(r * 977) % vocab] = 25.0f;
        break;
      case 2:  // masked: every third token -inf, one finite left
        for (int64_t t = 0; t < vocab; t += 3) row[t] = -inf;
        break;
      case 3:  // tied maxima
        for (int64_t t = r; t < vocab; t += 7) row[t] = 12.0f;
        break;
      default:
        break;
    }
  }
  if (bad && rows >= 2 && vocab >= 2) {
    out[(rows - 2) * vocab + vocab / 2] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t t = 0; t < vocab; ++t) out[(rows - 1) * vocab + t] = -inf;
  }
  return out;
}

// One draft position sampled both ways on the same logits (fp32 or bf16): probs_from_logits then
// sample_rows, and sample_logits_rows with the seed and step read from a device word whose step
// differs from the argument (so the word is what is used).
void expect_fused_sampler_matches(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                                  double temperature, gpu::LogitsFormat format) {
  std::vector<std::byte> bytes;
  if (format == gpu::LogitsFormat::kFloat32) {
    const auto* p = reinterpret_cast<const std::byte*>(logits.data());
    bytes.assign(p, p + logits.size() * sizeof(float));
  } else {
    std::vector<uint16_t> bits(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) bits[i] = gpu::bfloat16_bits_from_float(logits[i]);
    const auto* p = reinterpret_cast<const std::byte*>(bits.data());
    bytes.assign(p, p + bits.size() * sizeof(uint16_t));
  }
  const int64_t element = format == gpu::LogitsFormat::kFloat32 ? 4 : 2;
  std::vector<uint32_t> ids(rows);
  std::vector<int32_t> limit(rows), lengths(rows);
  for (int64_t r = 0; r < rows; ++r) {
    ids[r] = static_cast<uint32_t>(7 + 5 * r);
    limit[r] = r % 4 == 3 ? 0 : 3;  // every fourth row is past its γ_b: not sampled
    lengths[r] = static_cast<int32_t>(2 + r);
  }
  const int64_t seq_stride = rows + 8, token_stride = 3;
  DeviceBuffer<std::byte> d_logits(bytes);
  DeviceBuffer<float> d_probs(rows * vocab);
  DeviceBuffer<uint32_t> d_logits_status(rows), d_ids(ids);
  DeviceBuffer<int32_t> d_limit(limit), d_lengths(lengths);
  const gpu::DeviceSeedStep word{31, 6, 0};
  DeviceBuffer<gpu::DeviceSeedStep> d_word(std::vector<gpu::DeviceSeedStep>{word});
  struct Out {
    std::vector<int32_t> tokens, seq;
    std::vector<uint32_t> status;
  };
  DeviceBuffer<float> d_q(std::vector<float>(rows * (vocab + 1), -3.0f));
  const auto run = [&](bool fused, std::vector<std::byte>* copied) {
    DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>(rows * token_stride, -7));
    DeviceBuffer<int32_t> d_seq(std::vector<int32_t>(rows * seq_stride, -7));
    DeviceBuffer<uint32_t> d_status(std::vector<uint32_t>(rows, 0));
    DeviceBuffer<std::byte> d_copy(
        std::vector<std::byte>(rows * 2 * vocab * element, std::byte{0x5a}));
    gpu::SampleRowsArgs a;
    a.rows = rows;
    a.vocab = vocab;
    a.seed = word.seed;
    a.step = word.step;
    a.position = 3;
    a.request_ids = d_ids.const_span().data();
    a.limit = d_limit.const_span().data();
    a.tokens = d_tokens.span().data() + 2;
    a.token_stride = token_stride;
    a.sequences = d_seq.span().data();
    a.seq_stride = seq_stride;
    a.lengths = d_lengths.const_span().data();
    a.seq_offset = 2;
    a.status = d_status.span().data();
    if (fused) {
      gpu::SampleLogitsArgs f;
      f.logits = {format, d_logits.const_span(), temperature};
      f.sample = a;
      f.sample.step = word.step + 1000;  // wrong on purpose: the device word must be read
      f.sample.seed_step = d_word.const_span().data();
      f.copy_logits_to = d_copy.span().data();
      f.copy_logits_stride = 2 * vocab;  // strided destination rows
      f.probs_to = d_q.span().data();
      f.probs_stride = vocab + 1;
      EXPECT_EQ(gpu::sample_logits_rows(f, nullptr), cudaSuccess);
    } else {
      EXPECT_EQ(gpu::probs_from_logits(format, d_logits.const_span(), rows, vocab, temperature,
                                       d_probs.span(), d_logits_status.span(), nullptr),
                cudaSuccess);
      a.probs = d_probs.const_span().data();
      EXPECT_EQ(gpu::sample_rows(a, nullptr), cudaSuccess);
    }
    Out out;
    EXPECT_EQ(d_tokens.copy_to(out.tokens), cudaSuccess);
    EXPECT_EQ(d_seq.copy_to(out.seq), cudaSuccess);
    EXPECT_EQ(d_status.copy_to(out.status), cudaSuccess);
    if (copied != nullptr) {
      EXPECT_EQ(d_copy.copy_to(*copied), cudaSuccess);
    }
    return out;
  };
  std::vector<std::byte> copied;
  const Out expected = run(false, nullptr);
  const Out fused = run(true, &copied);
  const std::string what = "V " + std::to_string(vocab) + " T " + std::to_string(temperature) +
                           (format == gpu::LogitsFormat::kFloat32 ? " fp32" : " bf16");
  EXPECT_EQ(fused.tokens, expected.tokens) << what;
  EXPECT_EQ(fused.seq, expected.seq) << what;
  EXPECT_EQ(fused.status, expected.status) << what;
  std::vector<float> probs, q;
  ASSERT_EQ(d_probs.copy_to(probs), cudaSuccess);
  ASSERT_EQ(d_q.copy_to(q), cudaSuccess);
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* got = &copied[r * 2 * vocab * element];
    if (limit[r] < 3) {  // not sampled: nothing copied
      EXPECT_EQ(got[0], std::byte{0x5a}) << what << " row " << r;
      EXPECT_EQ(q[r * (vocab + 1)], -3.0f) << what << " row " << r;
      continue;
    }
    // q bit for bit (NaN-free: a bad row is zeros on both sides).
    ASSERT_TRUE(std::equal(&probs[r * vocab], &probs[r * vocab] + vocab, &q[r * (vocab + 1)]))
        << what << " row " << r;
    EXPECT_EQ(q[r * (vocab + 1) + vocab], -3.0f) << what << " row " << r;
    const std::byte* want = &bytes[r * vocab * element];
    ASSERT_TRUE(std::equal(want, want + vocab * element, got)) << what << " row " << r;
    EXPECT_EQ(got[vocab * element], std::byte{0x5a}) << what << " row " << r;  // stride padding
  }
}

TEST(Sampling, LogitsRowsMatchProbsFromLogitsThenSampleRows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(777);
  // Vocabularies inside one 256-token chunk, at and across the 2048-token normaliser blocks.
  for (const int64_t vocab : {1, 3, 255, 2047, 2048, 2049, 4096 + 300}) {
    const int64_t rows = vocab > 2048 ? 7 : 10;
    const std::vector<float> logits = logits_rows(rng, rows, vocab, true);
    for (const double temperature : {1.0, 0.0, 0.35, 1.8}) {
      expect_fused_sampler_matches(logits, rows, vocab, temperature, gpu::LogitsFormat::kFloat32);
    }
    expect_fused_sampler_matches(logits, rows, vocab, 0.7, gpu::LogitsFormat::kBFloat16);
  }
}

TEST(Sampling, LogitsRowsAgreeWithCore) {
  // The fused sampler's token is core's: core::probs_from_logits, then core::sample_categorical.
  SPECLAB_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(91);
  const int64_t rows = 6, vocab = 2100;
  const std::vector<float> logits = logits_rows(rng, rows, vocab, false);
  for (const double temperature : {0.0, 0.6, 1.0}) {
    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> d_tokens(rows);
    gpu::SampleLogitsArgs f;
    f.logits = {gpu::LogitsFormat::kFloat32, std::as_bytes(d_logits.const_span()), temperature};
    f.sample.rows = rows;
    f.sample.vocab = vocab;
    f.sample.seed = 5;
    f.sample.step = 2;
    f.sample.position = 1;
    f.sample.tokens = d_tokens.span().data();
    ASSERT_EQ(gpu::sample_logits_rows(f, nullptr), cudaSuccess);
    std::vector<int32_t> tokens;
    ASSERT_EQ(d_tokens.copy_to(tokens), cudaSuccess);
    SamplingParams params;
    params.temperature = temperature;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> p = probs_from_logits(
          std::span<const float>(&logits[r * vocab], static_cast<size_t>(vocab)), params);
      const RandomAddress address{5, static_cast<uint32_t>(r), 2, 1, Purpose::kDraftSample, 0};
      EXPECT_EQ(tokens[r], sample_categorical(p, philox_bits(address)))
          << "T " << temperature << " row " << r;
    }
  }
}

TEST(Sampling, LogitsRowsBadArgumentsThrow) {
  SPECLAB_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> d_logits(std::vector<float>{0.0f, 1.0f});
  DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>{0});
  gpu::SampleLogitsArgs f;
  f.logits = {gpu::LogitsFormat::kFloat32, std::as_bytes(d_logits.const_span()), 1.0};
  f.sample.rows = 1;
  f.sample.vocab = 2;
  f.sample.tokens = d_tokens.span().data();
  EXPECT_EQ(gpu::sample_logits_rows(f, nullptr), cudaSuccess);
  f.sample.vocab = 3;  // logits are not rows·V
  EXPECT_THROW(gpu::sample_logits_rows(f, nullptr), InvalidInput);
  f.sample.vocab = 2;
  f.logits.temperature = -1.0;
  EXPECT_THROW(gpu::sample_logits_rows(f, nullptr), InvalidInput);
  f.logits.temperature = 1.0;
  f.sample.probs = d_logits.const_span().data();  // no probability row exists
  EXPECT_THROW(gpu::sample_logits_rows(f, nullptr), InvalidInput);
  f.sample.probs = nullptr;
  f.sample.tokens = nullptr;
  EXPECT_THROW(gpu::sample_logits_rows(f, nullptr), InvalidInput);
}

TEST(Sampling, BadArgumentsThrow) {
  SPECLAB_SKIP_WITHOUT_GPU();
  DeviceBuffer<float> d_probs(std::vector<float>{1.0f});
  DeviceBuffer<int32_t> d_tokens(std::vector<int32_t>{0});
  gpu::SampleRowsArgs a;
  a.probs = d_probs.const_span().data();
  a.rows = 1;
  a.vocab = 1;
  a.tokens = d_tokens.span().data();
  a.rows = 0;
  EXPECT_THROW(gpu::sample_rows(a, nullptr), InvalidInput);
  a.rows = 1;
  a.vocab = 0;
  EXPECT_THROW(gpu::sample_rows(a, nullptr), InvalidInput);
  a.vocab = 1;
  a.tokens = nullptr;
  EXPECT_THROW(gpu::sample_rows(a, nullptr), InvalidInput);
}

}  // namespace
}  // namespace speclab
