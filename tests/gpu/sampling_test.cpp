// gpu::sample_rows against core::sample_categorical: the same token for the same row and the same
// Philox bits (the fixed-point rule of core/base/rules.hpp is exact, so equality is bit for bit),
// for vocabularies that end inside a 256-token chunk, sparse, one-hot and peaked rows, strided
// rows, request ids, per-row limits, the sequence append and the row copy; an all-zero row sets
// kSampleZeroRow. Built for the device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/sampling.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/sampling/sampling.hpp"
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
