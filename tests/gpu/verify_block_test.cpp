// gpu::verify_block (docs/verifiers.md V5) against core::verify_block, token for token. The
// fixed-point residual makes the last token order-independent, and the kernel re-decides every
// near-tie of η_i ≤ h_i with core's serial Z_i (gpu/verify_block.hpp "Exactness"), so equality is
// exact: no near-tie exemptions. Built for the device (label gpu) and for the SIMT emulation
// (gpu-emu).
#include "gpu/verify_block.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/verify/verify_block.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::OwnedChainBatch;
using testing::random_batch;
using testing::RowKind;

const std::vector<RowKind> kAllKinds = {RowKind::kDense, RowKind::kSparse, RowKind::kOneHot,
                                        RowKind::kPeaked};

testing::GpuChainResult run_gpu_block(const OwnedChainBatch& batch, const BlockParams& params,
                                      const gpu::BlockKernelOptions& options = {}) {
  return testing::run_gpu_chain(
      batch, ChainParams{ChainMethod::kToken, 1.0, params.seed, params.step},
      [&](const ChainBatch& b, const ChainParams&, const gpu::ChainDeviceOutput& out,
          cudaStream_t stream) { return gpu::verify_block(b, params, out, stream, options); });
}

void expect_matches_reference(const OwnedChainBatch& batch, const BlockParams& params,
                              const std::string& label,
                              const gpu::BlockKernelOptions& options = {}) {
  const ChainResult ref = verify_block(batch.view(), params);
  const testing::GpuChainResult gpu = run_gpu_block(batch, params, options);
  EXPECT_EQ(testing::differences(gpu, ref), "")
      << label << " (B=" << batch.batch << " γ=" << batch.gamma << " V=" << batch.vocab << " seed "
      << params.seed << (options.always_serial_z ? ", serial Z" : "") << ")";
}

TEST(VerifyBlock, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 31;
  // V from one token to a 32k vocabulary; rows of every kind (zeros, one-hot, peaked, dense).
  for (const int64_t vocab : {1, 2, 5, 33, 257, 1000, 4099, 32000}) {
    for (const int64_t gamma : {0, 1, 3, 8}) {
      const int repeats = vocab >= 4099 ? 1 : 3;
      for (int repeat = 0; repeat < repeats; ++repeat) {
        const int64_t b = vocab >= 32000 ? 4 : 8;
        const OwnedChainBatch batch = random_batch(seed, b, gamma, vocab, kAllKinds, false, false);
        expect_matches_reference(batch, {seed, 3}, "random rows");
        ++seed;
      }
    }
  }
}

TEST(VerifyBlock, GpuMatchesReferenceRaggedGamma) {
  SPECLAB_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 200; seed < 204; ++seed) {
    const OwnedChainBatch batch = random_batch(seed, 32, 8, 700, kAllKinds, false, true);
    expect_matches_reference(batch, {seed, 17}, "ragged γ");
  }
  // γ > 32: the gathers of warp 0 wrap around; near-equal rows make long accepted blocks.
  const OwnedChainBatch long_chain = random_batch(7, 4, 40, 64, {RowKind::kPeaked}, false, true);
  expect_matches_reference(long_chain, {7, 0}, "γ = 40");
}

TEST(VerifyBlock, GpuMatchesReferenceEdgeRows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_matches_reference(random_batch(41, 16, 4, 300, {RowKind::kSparse}, false, false), {41, 1},
                           "sparse rows (mostly zeros)");
  expect_matches_reference(random_batch(42, 16, 4, 300, {RowKind::kOneHot}, false, false), {42, 1},
                           "one-hot rows");
  const OwnedChainBatch same = random_batch(43, 16, 5, 1000, kAllKinds, true, false);
  const ChainResult ref = verify_block(same.view(), {43, 1});
  for (int32_t n : ref.n_accepted) ASSERT_EQ(n, 5) << "draft == target must accept everything";
  expect_matches_reference(same, {43, 1}, "draft == target");
}

TEST(VerifyBlock, ZeroMassResidualFallsBackToP) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // p = q·(1 − 9e-5) (a valid row: the sum is within 1 ± 1e-4): w_1 = 1 − 9e-5 < 1, and when
  // η_1 > w_1 nothing passes, τ = 0, and max(0, p − q) is zero everywhere: docs/verifiers.md V5's
  // fallback to p. A seed with such an η_1 is searched (about one in 11000).
  OwnedChainBatch batch = random_batch(61, 1, 1, 300, {RowKind::kDense}, false, false);
  for (int64_t t = 0; t < batch.vocab; ++t) {
    batch.target_row(0, 0)[t] = batch.draft_row(0, 0)[t] * (1.0f - 9e-5f);
  }
  const double w1 = block_weights(batch.view(), 0).w[1];
  ASSERT_LT(w1, 1.0);
  uint64_t seed = 0;
  while (philox_uniform({seed, 0, 4, 1, Purpose::kBlockEta, 0}) <= w1) ++seed;
  const ChainResult ref = verify_block(batch.view(), {seed, 4});
  ASSERT_EQ(ref.residual_fallback[0], 1) << "seed " << seed;
  expect_matches_reference(batch, {seed, 4}, "zero-mass residual");
}

TEST(VerifyBlock, SerialZPathMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Every η_i ≤ h_i decided with the serial core-order Z_i, the path a near-tie takes: it must give
  // core's tokens too (with it, the parallel path is only a shortcut for clear decisions).
  const gpu::BlockKernelOptions serial{true};
  for (uint64_t seed = 300; seed < 303; ++seed) {
    expect_matches_reference(random_batch(seed, 8, 6, 1000, kAllKinds, false, true), {seed, 5},
                             "serial Z", serial);
  }
  expect_matches_reference(random_batch(303, 2, 4, 32000, kAllKinds, false, false), {303, 5},
                           "serial Z, V = 32000", serial);
}

TEST(VerifyBlock, BadValuesSetStatus) {
  SPECLAB_SKIP_WITHOUT_GPU();
  OwnedChainBatch batch = random_batch(91, 4, 3, 100, {RowKind::kDense}, false, false);
  // Request 1: a NaN in the draft row of position 1 (the gathered value for its own token).
  batch.draft_row(1, 0)[batch.draft_tokens[1 * 3 + 0]] = std::numeric_limits<float>::quiet_NaN();
  // Request 2: a draft token out of range.
  batch.draft_tokens[2 * 3 + 1] = 100;
  const testing::GpuChainResult gpu = run_gpu_block(batch, {91, 0});
  ASSERT_EQ(gpu.launch, cudaSuccess);
  ASSERT_EQ(gpu.sync, cudaSuccess);
  EXPECT_EQ(gpu.status[0], 0u);
  EXPECT_EQ(gpu.status[1], gpu::kChainBadValue);
  EXPECT_EQ(gpu.status[2], gpu::kChainBadToken);
  for (const int64_t r : {1, 2}) {
    EXPECT_EQ(gpu.n_accepted[r], 0);
    for (int64_t i = 0; i <= 3; ++i) EXPECT_EQ(gpu.emitted_tokens[r * 4 + i], -1);
  }
}

TEST(VerifyBlock, BadShapeThrows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const OwnedChainBatch host = random_batch(1, 2, 2, 10, {RowKind::kDense}, false, false);
  testing::DeviceBuffer<float> target(host.probs_target);
  testing::DeviceBuffer<int32_t> tokens(host.draft_tokens), emitted(6), n_accepted(2);
  testing::DeviceBuffer<uint8_t> mask(4), fallback(2);
  testing::DeviceBuffer<uint32_t> status(2);
  const ChainBatch batch{2, 2, 10, target.const_span(), {}, tokens.const_span(), {}, {}};
  EXPECT_THROW(gpu::verify_block(
                   batch, {1, 0},
                   {emitted.span(), n_accepted.span(), mask.span(), fallback.span(), status.span()},
                   nullptr),
               InvalidInput);
}

}  // namespace
}  // namespace speclab
