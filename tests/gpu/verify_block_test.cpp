// gpu::verify_block (docs/verifiers.md V5) against core::verify_block, token for token. The
// fixed-point residual makes the last token order-independent, and the kernel re-decides every
// near-tie of η_i ≤ h_i with core's serial Z_i (gpu/verify/verify_block.hpp "Exactness"), so equality is
// exact: no near-tie exemptions. Built for the device (label gpu) and for the SIMT emulation
// (gpu-emu).
#include "gpu/verify/verify_block.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

// gpu::verify_block with every row of each request split into `slices` (0 = automatic; clamped to
// the vocabulary's maximum), launched twice on one zeroed workspace with the outputs overwritten in
// between (testing::launch_twice_on_workspace: the counters must be reset, every output written).
testing::GpuChainResult run_gpu_block_split(const OwnedChainBatch& batch, const BlockParams& params,
                                            int slices,
                                            const gpu::BlockKernelOptions& options = {}) {
  return testing::run_gpu_chain(batch,
                                ChainParams{ChainMethod::kToken, 1.0, params.seed, params.step},
                                [&](const ChainBatch& b, const ChainParams&,
                                    const gpu::ChainDeviceOutput& out, cudaStream_t stream) {
                                  return testing::launch_twice_on_workspace(
                                      gpu::chain_workspace_bytes(b.batch, b.gamma, b.vocab),
                                      std::min(slices, gpu::chain_max_slices(b.vocab)), b.batch,
                                      out, stream, [&](const gpu::ChainDeviceOutput& split) {
                                        return gpu::verify_block(b, params, split, stream, options);
                                      });
                                });
}

constexpr int kNoSplit = -1;

void expect_matches_reference(const OwnedChainBatch& batch, const BlockParams& params,
                              const std::string& label, const gpu::BlockKernelOptions& options = {},
                              int slices = kNoSplit) {
  const ChainResult ref = verify_block(batch.view(), params);
  const testing::GpuChainResult gpu = slices == kNoSplit
                                          ? run_gpu_block(batch, params, options)
                                          : run_gpu_block_split(batch, params, slices, options);
  EXPECT_EQ(testing::differences(gpu, ref), "")
      << label << " (B=" << batch.batch << " γ=" << batch.gamma << " V=" << batch.vocab << " seed "
      << params.seed << (options.always_serial_z ? ", serial Z" : "")
      << (slices == kNoSplit ? "" : ", split into " + std::to_string(slices) + " slices") << ")";
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

// p = q·(1 − 9e-5) (a valid row: the sum is within 1 ± 1e-4): w_1 = 1 − 9e-5 < 1, and when
// η_1 > w_1 nothing passes, τ = 0, and max(0, p − q) is zero everywhere: docs/verifiers.md V5's
// fallback to p. A seed with such an η_1 is searched (about one in 11000).
void expect_zero_mass_residual_falls_back_to_p(uint64_t batch_seed, int64_t vocab, int slices) {
  OwnedChainBatch batch = random_batch(batch_seed, 1, 1, vocab, {RowKind::kDense}, false, false);
  for (int64_t t = 0; t < batch.vocab; ++t) {
    batch.target_row(0, 0)[t] = batch.draft_row(0, 0)[t] * (1.0f - 9e-5f);
  }
  const double w1 = block_weights(batch.view(), 0).w[1];
  ASSERT_LT(w1, 1.0);
  uint64_t seed = 0;
  while (philox_uniform({seed, 0, 4, 1, Purpose::kBlockEta, 0}) <= w1) ++seed;
  const ChainResult ref = verify_block(batch.view(), {seed, 4});
  ASSERT_EQ(ref.residual_fallback[0], 1) << "seed " << seed;
  expect_matches_reference(batch, {seed, 4}, "zero-mass residual", {}, slices);
}

TEST(VerifyBlock, ZeroMassResidualFallsBackToP) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_zero_mass_residual_falls_back_to_p(61, 300, kNoSplit);
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
  // Request 3: a draft token its own q gives probability 0 (the row still sums to 1), at the last
  // position, which V5 reads however the tests go.
  const int32_t x = batch.draft_tokens[3 * 3 + 2];
  float* q = batch.draft_row(3, 2);
  q[(x + 1) % 100] += q[x];
  q[x] = 0.0f;
  const testing::GpuChainResult gpu = run_gpu_block(batch, {91, 0});
  ASSERT_EQ(gpu.launch, cudaSuccess);
  ASSERT_EQ(gpu.sync, cudaSuccess);
  EXPECT_EQ(gpu.status[0], 0u);
  EXPECT_EQ(gpu.status[1], gpu::kChainBadValue);
  EXPECT_EQ(gpu.status[2], gpu::kChainBadToken);
  EXPECT_EQ(gpu.status[3], gpu::kChainImpossibleDraft);
  for (const int64_t r : {1, 2, 3}) {
    EXPECT_EQ(gpu.n_accepted[r], 0);
    for (int64_t i = 0; i <= 3; ++i) EXPECT_EQ(gpu.emitted_tokens[r * 4 + i], -1);
  }
}

TEST(VerifyBlockSplit, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 401;
  // Either side of the 2048-token (8-chunk) boundary, 17 chunks with a partial last chunk, and 125
  // chunks; slices that divide the chunks and slices that do not; ragged n_draft.
  for (const int64_t vocab : {2047, 2049, 4099, 32000}) {
    for (const int slices : {0, 2, 3, 7}) {
      for (const int64_t gamma : {0, 1, 4}) {
        const OwnedChainBatch batch = random_batch(seed, 3, gamma, vocab, kAllKinds, false, true);
        expect_matches_reference(batch, {seed, 5}, "random rows", {}, slices);
        ++seed;
      }
    }
  }
  // Draft == target: every test passes at γ_b, so the bonus row is the split one.
  const OwnedChainBatch same = random_batch(seed, 2, 3, 6000, kAllKinds, true, false);
  expect_matches_reference(same, {seed, 1}, "bonus row", {}, 5);
  // Near-equal rows: long accepted blocks, τ strictly inside (1, γ_b).
  const OwnedChainBatch peaked =
      random_batch(seed + 1, 4, 6, 3000, {RowKind::kPeaked}, false, true);
  expect_matches_reference(peaked, {seed + 1, 2}, "peaked rows", {}, 0);
}

TEST(VerifyBlockSplit, SerialZPathMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // The last CTA re-decides with core's serial Z_i: the split's Z_i (slice-order sums) must give
  // the same decisions as core either way.
  const gpu::BlockKernelOptions serial{true};
  for (uint64_t seed = 450; seed < 453; ++seed) {
    expect_matches_reference(random_batch(seed, 3, 5, 2100, kAllKinds, false, true), {seed, 5},
                             "serial Z", serial, 3);
  }
}

TEST(VerifyBlockSplit, ZeroMassResidualFallsBackToP) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // As VerifyBlock.ZeroMassResidualFallsBackToP, with a vocabulary large enough to split.
  expect_zero_mass_residual_falls_back_to_p(62, 2300, 2);
}

TEST(VerifyBlockSplit, BadRowsSetTheOneCtaStatus) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Corrupted rows and tokens: the split launch reads every row j < γ_b when the first test fails
  // (the one-CTA kernel only rows τ..γ_b−1), so its status must be the one-CTA kernel's: set for
  // the rows both read (and then core rejects the request too), clear for a row below the stop.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t g = 3, v = 2100;
  int below_stop = 0;
  for (uint64_t seed = 81; seed < 84; ++seed) {
    OwnedChainBatch batch =
        random_batch(seed, 12, g, v, {RowKind::kDense, RowKind::kPeaked}, false, true);
    for (int64_t r = 0; r < batch.batch; ++r) batch.n_draft[r] = static_cast<int32_t>(g);
    // Requests 0 and 11: q = p on rows 1..γ−1, so w_i = 1 and every test i < γ passes (Z_i = 0,
    // h_i = 1): τ = γ − 1 unless the first test passes.
    for (const int64_t r : {0, 11}) {
      for (int64_t j = 0; j + 1 < g; ++j) {
        std::copy_n(batch.target_row(r, j), v, batch.draft_row(r, j));
        // A token drawn from the old q may have no mass under the new one: the row's mode has.
        const float* q = batch.draft_row(r, j);
        if (q[batch.token(r, j)] == 0.0f) {
          batch.token(r, j) = static_cast<int32_t>(std::max_element(q, q + v) - q);
        }
      }
    }
    const BlockParams params{seed, 6};
    const ChainResult clean = verify_block(batch.view(), params);
    auto tau = [&](int64_t r) { return clean.n_accepted[r]; };
    batch.target_row(1, 0)[batch.token(1, 0)] = nan;  // the gathered p_1(x_1)
    batch.draft_row(2, 0)[batch.token(2, 0)] = nan;   // the gathered q_1(x_1)
    const auto spare = [&](int64_t r) { return batch.token(r, 0) == 0 ? 1 : 0; };
    batch.target_row(3, tau(3))[spare(3)] = inf;  // the row τ is sampled from
    batch.target_row(4, tau(4))[v - 1] = -0.25f;  // negative
    for (int64_t t = 0; t < v; ++t) batch.target_row(5, tau(5))[t] *= 1.01f;  // unnormalised
    batch.target_row(6, g)[7] = nan;  // the bonus row: read only if everything is accepted
    batch.token(7, 0) = -1;           // token ids outside [0, V)
    batch.token(8, 0) = static_cast<int32_t>(v);
    batch.n_draft[9] = static_cast<int32_t>(g + 1);  // n_draft outside [0, γ]
    batch.n_draft[10] = -1;
    // Rows below the stop: read by the split launch when τ < γ_b, never by the one-CTA kernel.
    for (const int64_t r : {0, 11}) {
      if (tau(r) >= 1 && tau(r) < g) {
        batch.target_row(r, 0)[spare(r)] = nan;
        batch.draft_row(r, 0)[spare(r)] = -1.0f;
        ++below_stop;
      }
    }
    const testing::GpuChainResult one = run_gpu_block(batch, params);
    ASSERT_EQ(one.launch, cudaSuccess);
    for (const int slices : {0, 3}) {
      const testing::GpuChainResult split = run_gpu_block_split(batch, params, slices);
      ASSERT_EQ(split.launch, cudaSuccess);
      ASSERT_EQ(split.sync, cudaSuccess);
      EXPECT_EQ(split.status, one.status) << "seed " << seed << " slices " << slices;
      EXPECT_EQ(split.emitted_tokens, one.emitted_tokens) << "seed " << seed;
      EXPECT_EQ(split.n_accepted, one.n_accepted) << "seed " << seed;
      EXPECT_EQ(split.residual_fallback, one.residual_fallback) << "seed " << seed;
    }
    for (const int64_t r : {1, 2, 3, 4, 5, 7, 8, 9, 10}) {
      EXPECT_NE(one.status[r], 0u) << "seed " << seed << " request " << r;
      EXPECT_THROW(verify_block(testing::padded_single_request(batch, r).view(), params),
                   InvalidInput);
    }
    for (const int64_t r : {0, 11}) {
      if (tau(r) >= 1 && tau(r) < g) {
        EXPECT_EQ(one.status[r], 0u) << "seed " << seed << " request " << r;
        EXPECT_EQ(one.n_accepted[r], tau(r));
      }
    }
  }
  EXPECT_GE(below_stop, 1) << "no instance corrupted a row below the stop";
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
