// gpu::verify_chain (docs/verifiers.md V1-V3) against core::verify_chain_reference, token for
// token: the fixed-point rule makes the token independent of reduction order, so equality is exact
// (no near-tie exemptions). Built for the device (label gpu) and for the SIMT emulation (gpu-emu).
#include "gpu/verify/verify_chain.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.hpp"
#include "core/verify/verify_chain.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/verify_chain_harness.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using testing::OwnedChainBatch;
using testing::random_batch;
using testing::RowKind;

const std::vector<RowKind> kAllKinds = {RowKind::kDense, RowKind::kSparse, RowKind::kOneHot,
                                        RowKind::kPeaked};

void expect_matches_reference(
    const OwnedChainBatch& batch, const ChainParams& params, const std::string& label,
    const testing::ChainLauncher& launcher = testing::verify_chain_probs) {
  const ChainResult ref = verify_chain_reference(batch.view(), params);
  const testing::GpuChainResult gpu = testing::run_gpu_chain(batch, params, launcher);
  EXPECT_EQ(testing::differences(gpu, ref), "")
      << label << " (B=" << batch.batch << " γ=" << batch.gamma << " V=" << batch.vocab
      << " method " << to_string(params.method) << " seed " << params.seed << ")";
}

TEST(VerifyChain, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 11;
  // V from one token to a 32k vocabulary: one partial warp of data up to 1024-thread CTAs.
  for (const int64_t vocab : {1, 2, 5, 33, 256, 257, 1000, 4099, 32000}) {
    for (const int64_t gamma : {0, 1, 3, 8}) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        const OwnedChainBatch batch = random_batch(seed, 8, gamma, vocab, kAllKinds, false, false);
        expect_matches_reference(batch, {ChainMethod::kToken, 1.0, seed, 3}, "random rows");
        ++seed;
      }
    }
  }
}

TEST(VerifyChain, GpuMatchesReferenceRaggedGamma) {
  SPECLAB_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 100; seed < 104; ++seed) {
    const OwnedChainBatch batch = random_batch(seed, 32, 8, 700, kAllKinds, false, true);
    expect_matches_reference(batch, {ChainMethod::kToken, 1.0, seed, 17}, "ragged γ");
  }
  // Long chains: the accept tests run 32 positions per ballot, so γ > 32 crosses a chunk.
  const OwnedChainBatch long_chain = random_batch(7, 4, 40, 64, {RowKind::kPeaked}, true, true);
  expect_matches_reference(long_chain, {ChainMethod::kToken, 1.0, 7, 0}, "γ = 40");
}

TEST(VerifyChain, GpuMatchesReferenceEdgeRows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Mostly-zero rows, one-hot rows, draft == target (everything accepted: the bonus path).
  expect_matches_reference(random_batch(21, 16, 4, 300, {RowKind::kSparse}, false, false),
                           {ChainMethod::kToken, 1.0, 21, 1}, "sparse rows");
  expect_matches_reference(random_batch(22, 16, 4, 300, {RowKind::kOneHot}, false, false),
                           {ChainMethod::kToken, 1.0, 22, 1}, "one-hot rows");
  const OwnedChainBatch same = random_batch(23, 16, 5, 1000, kAllKinds, true, false);
  const ChainResult ref = verify_chain_reference(same.view(), {ChainMethod::kToken, 1.0, 23, 1});
  for (int32_t n : ref.n_accepted) ASSERT_EQ(n, 5) << "draft == target must accept everything";
  expect_matches_reference(same, {ChainMethod::kToken, 1.0, 23, 1}, "draft == target");
}

TEST(VerifyChain, GpuMatchesReferenceLargeVocab) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // A Llama-3-sized vocabulary: 1024 threads per CTA, 501 chunks of 256 tokens (128256 = 501 ·
  // 256).
  const int64_t vocab = 128256;
  expect_matches_reference(
      random_batch(31, 3, 3, vocab, {RowKind::kDense, RowKind::kPeaked}, false, false),
      {ChainMethod::kToken, 1.0, 31, 5}, "V = 128256 residual");
  expect_matches_reference(random_batch(32, 2, 2, vocab, {RowKind::kDense}, true, false),
                           {ChainMethod::kToken, 1.0, 32, 5}, "V = 128256 bonus");
}

TEST(VerifyChain, GpuMatchesReferenceManyRequests) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_matches_reference(random_batch(41, 256, 4, 200, kAllKinds, false, true),
                           {ChainMethod::kToken, 1.0, 41, 9}, "B = 256, V = 200");
  expect_matches_reference(random_batch(42, 256, 6, 3000, kAllKinds, false, true),
                           {ChainMethod::kToken, 1.0, 42, 9}, "B = 256, V = 3000");
}

// p = q except p(x) = q(x)/2 at the drafted x, with q(x) = 1e-4: p sums to 1 - 5e-5 (valid),
// max(0, p - q) is zero everywhere, and x is rejected about half the time: the fallback path.
OwnedChainBatch residual_fallback_batch(int64_t b, int64_t v) {
  OwnedChainBatch batch(b, 1, v);
  for (int64_t r = 0; r < b; ++r) {
    const int32_t x = static_cast<int32_t>(r % v);
    for (int64_t t = 0; t < v; ++t) batch.draft_row(r, 0)[t] = (1.0f - 1e-4f) / (v - 1);
    batch.draft_row(r, 0)[x] = 1e-4f;
    std::copy(batch.draft_row(r, 0), batch.draft_row(r, 0) + v, batch.target_row(r, 0));
    batch.target_row(r, 0)[x] = 5e-5f;
    std::copy(batch.draft_row(r, 0), batch.draft_row(r, 0) + v, batch.target_row(r, 1));
    batch.token(r, 0) = x;
  }
  return batch;
}

TEST(VerifyChain, GpuMatchesReferenceResidualFallback) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const OwnedChainBatch batch = residual_fallback_batch(32, 64);
  const ChainParams params{ChainMethod::kToken, 1.0, 51, 2};
  const ChainResult ref = verify_chain_reference(batch.view(), params);
  ASSERT_GT(ref.residual_fallbacks, 0) << "the instance must exercise the fallback";
  expect_matches_reference(batch, params, "residual fallback");
}

TEST(VerifyChainGreedy, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  for (const int64_t vocab : {1, 3, 100, 2000}) {
    // kOneHot and kSparse rows make exact ties between zeros; kDense ties between equal weights.
    OwnedChainBatch batch = random_batch(61 + vocab, 12, 4, vocab, kAllKinds, true, true);
    expect_matches_reference(batch, {ChainMethod::kGreedy, 1.0, 61, 0}, "greedy");
    batch.probs_draft.clear();  // V2 needs no q
    expect_matches_reference(batch, {ChainMethod::kGreedy, 1.0, 61, 0}, "greedy without q");
  }
}

TEST(VerifyChainLenient, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  for (const double leniency : {0.25, 0.7, 1.0}) {
    const OwnedChainBatch batch = random_batch(71, 16, 4, 500, kAllKinds, false, true);
    expect_matches_reference(batch, {ChainMethod::kLenient, leniency, 71, 4}, "lenient");
  }
}

// Corrupts rows and tokens of a 12-request batch of vocabulary v and checks that the device flags
// exactly the requests core rejects alone, with core's tokens elsewhere.
void expect_flags_invalid_rows_it_reads(int64_t v, const testing::ChainLauncher& launcher) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const ChainMethod method : {ChainMethod::kToken, ChainMethod::kGreedy}) {
    const ChainParams params{method, 1.0, 81, 6};
    const int64_t g = 3;
    OwnedChainBatch batch =
        random_batch(81, 12, g, v, {RowKind::kDense, RowKind::kPeaked}, false, true);
    for (const int64_t r : {1, 2, 7, 8}) batch.n_draft[r] = static_cast<int32_t>(g);
    const ChainResult clean = verify_chain(batch.view(), params);
    auto n = [&](int64_t r) { return clean.n_accepted[r]; };
    batch.target_row(1, 0)[batch.token(1, 0)] = nan;  // the gathered p_1(x_1)
    batch.draft_row(2, 0)[batch.token(2, 0)] = nan;   // the gathered q_1(x_1)
    batch.target_row(3, n(3))[0] = inf;               // the residual or bonus row
    batch.target_row(4, n(4))[v - 1] = -0.25f;        // negative
    for (int64_t t = 0; t < v; ++t) batch.target_row(5, n(5))[t] *= 1.01f;  // unnormalised
    batch.target_row(6, g)[7] = nan;  // the bonus row: read only if everything is accepted
    batch.token(7, 0) = -1;           // token ids outside [0, V)
    batch.token(8, 0) = static_cast<int32_t>(v);
    batch.n_draft[9] = static_cast<int32_t>(g + 1);  // n_draft outside [0, γ]
    batch.n_draft[10] = -1;
    if (n(11) < batch.n_draft[11]) batch.draft_row(11, n(11))[3] = nan;  // the residual's q row
    const testing::GpuChainResult gpu = testing::run_gpu_chain(batch, params, launcher);
    ASSERT_EQ(gpu.launch, cudaSuccess);
    ASSERT_EQ(gpu.sync, cudaSuccess);
    // Core's fast path validates exactly what it reads, as the kernel does: the request's status
    // is set iff core rejects the request alone, and otherwise the tokens are core's.
    int flagged = 0;
    for (int64_t r = 0; r < batch.batch; ++r) {
      const OwnedChainBatch one = testing::padded_single_request(batch, r);
      bool rejected = false;
      ChainResult ref;
      try {
        ref = verify_chain(one.view(), params);
      } catch (const InvalidInput&) {
        rejected = true;
      }
      SCOPED_TRACE("method " + std::string(to_string(method)) + " request " + std::to_string(r));
      if (rejected) {
        ++flagged;
        EXPECT_NE(gpu.status[r], 0u);
        EXPECT_EQ(gpu.n_accepted[r], 0);
        EXPECT_EQ(gpu.residual_fallback[r], 0);
        for (int64_t i = 0; i <= g; ++i) EXPECT_EQ(gpu.emitted_tokens[r * (g + 1) + i], -1);
        for (int64_t i = 0; i < g; ++i) EXPECT_EQ(gpu.accept_mask[r * g + i], 0);
      } else {
        EXPECT_EQ(gpu.status[r], 0u);
        EXPECT_EQ(gpu.n_accepted[r], ref.n_accepted[0]);
        for (int64_t i = 0; i <= g; ++i) {
          EXPECT_EQ(gpu.emitted_tokens[r * (g + 1) + i], ref.emitted_tokens[i]);
          EXPECT_LT(gpu.emitted_tokens[r * (g + 1) + i], v);
        }
      }
    }
    // These corruptions sit in rows every path reads (the gathered p_1(x_1), the row after the
    // accepted prefix at a token that is not the gathered one, the tokens, n_draft).
    for (const int64_t r : {1, 3, 4, 7, 8, 9, 10}) EXPECT_NE(gpu.status[r], 0u) << "request " << r;
    EXPECT_GE(flagged, 7);
    EXPECT_EQ(gpu.status[0], 0u) << "a clean request in a batch with bad ones is unaffected";
  }
}

// A draft token whose own q gives it probability 0 cannot have been drawn from that q: the
// reference refuses the batch, the kernel flags the request (kChainImpossibleDraft) and emits
// nothing for it, where both used to reject the token as if p had decided.
TEST(VerifyChain, GpuFlagsADraftTokenItsQCannotHaveDrawn) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const int64_t g = 3, v = 50;
  OwnedChainBatch batch = random_batch(95, 4, g, v, {RowKind::kDense}, false, false);
  const int32_t x = batch.token(1, 0);
  float* q = batch.draft_row(1, 0);
  q[(x + 1) % v] += q[x];  // the row stays a distribution
  q[x] = 0.0f;
  const ChainParams params{ChainMethod::kToken, 1.0, 95, 2};
  EXPECT_THAT(testing::error_of([&] { verify_chain_reference(batch.view(), params); }),
              ::testing::HasSubstr("draft_tokens[1, 0] (request 1, position 1) is " +
                                   std::to_string(x) + ", which has probability 0"));
  EXPECT_THAT(testing::error_of([&] { verify_chain(batch.view(), params); }),
              ::testing::HasSubstr("which has probability 0 in its own probs_draft row 3"));
  const testing::GpuChainResult gpu = testing::run_gpu_chain(batch, params);
  ASSERT_EQ(gpu.launch, cudaSuccess);
  ASSERT_EQ(gpu.sync, cudaSuccess);
  EXPECT_EQ(gpu.status[1], gpu::kChainImpossibleDraft);
  EXPECT_EQ(gpu.n_accepted[1], 0);
  for (int64_t i = 0; i <= g; ++i) EXPECT_EQ(gpu.emitted_tokens[1 * (g + 1) + i], -1);
  for (const int64_t r : {0, 2, 3}) EXPECT_EQ(gpu.status[r], 0u) << "request " << r;
}

TEST(VerifyChain, GpuFlagsInvalidRowsItReads) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_flags_invalid_rows_it_reads(300, testing::verify_chain_probs);
}

// gpu::verify_chain with a zeroed workspace split into `slices` (0 = automatic; V1/V3: clamped to
// the vocabulary's maximum; V2: ≥ 2 reduces the rows in parallel), launched twice on the same
// workspace with the outputs overwritten in between: the second launch must find the arrival
// counters reset by the first and write every output again.
testing::ChainLauncher split_launcher(int slices) {
  return [slices](const ChainBatch& batch, const ChainParams& params,
                  const gpu::ChainDeviceOutput& output, cudaStream_t stream) -> cudaError_t {
    return testing::launch_twice_on_workspace(
        gpu::chain_workspace_bytes(batch.batch, batch.gamma, batch.vocab),
        params.method == ChainMethod::kGreedy
            ? slices
            : std::min(slices, gpu::chain_max_slices(batch.vocab)),
        batch.batch, output, stream, [&](const gpu::ChainDeviceOutput& split) {
          return gpu::verify_chain(batch, params, split, stream);
        });
  };
}

TEST(VerifyChainSplit, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  uint64_t seed = 301;
  // 8 chunks (at most 2 slices), 17 chunks with V % 4 ≠ 0 (scalar loads, a partial last chunk),
  // 125 chunks (V = 32000, 16-byte loads); slices that divide the chunks and slices that do not.
  for (const int64_t vocab : {2048, 4099, 32000}) {
    for (const int slices : {0, 2, 3, 7}) {
      for (const int64_t gamma : {0, 1, 4}) {
        const OwnedChainBatch batch = random_batch(seed, 3, gamma, vocab, kAllKinds, false, true);
        expect_matches_reference(batch, {ChainMethod::kToken, 1.0, seed, 5},
                                 "split into " + std::to_string(slices) + " slices",
                                 split_launcher(slices));
        ++seed;
      }
    }
  }
  const OwnedChainBatch batch = random_batch(seed, 2, 4, 5000, kAllKinds, false, true);
  expect_matches_reference(batch, {ChainMethod::kLenient, 0.6, seed, 1}, "lenient, split",
                           split_launcher(0));
  // Draft == target: everything accepted, so the bonus row is the split one.
  const OwnedChainBatch same = random_batch(seed + 1, 2, 3, 6000, kAllKinds, true, false);
  expect_matches_reference(same, {ChainMethod::kToken, 1.0, seed + 1, 1}, "bonus row, split",
                           split_launcher(5));
}

TEST(VerifyChainSplit, GreedyRowsInParallelMatchReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // V2 with one CTA per row (automatic at B < SMs, and forced): the last row CTA stops where the
  // one-CTA kernel stops — the first mismatch, the first bad row, or row γ_b (ragged γ_b, ties).
  for (const int64_t vocab : {1, 3, 100, 2000}) {
    for (const int slices : {0, 2}) {
      OwnedChainBatch batch = random_batch(611 + vocab, 12, 4, vocab, kAllKinds, true, true);
      expect_matches_reference(batch, {ChainMethod::kGreedy, 1.0, 61, 0}, "greedy rows",
                               split_launcher(slices));
      batch.probs_draft.clear();  // V2 needs no q
      expect_matches_reference(batch, {ChainMethod::kGreedy, 1.0, 61, 0}, "greedy rows, no q",
                               split_launcher(slices));
    }
  }
}

TEST(VerifyChainSplit, GpuMatchesReferenceResidualFallback) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const OwnedChainBatch batch = residual_fallback_batch(16, 2304);  // 9 chunks
  const ChainParams params{ChainMethod::kToken, 1.0, 52, 2};
  const ChainResult ref = verify_chain_reference(batch.view(), params);
  ASSERT_GT(ref.residual_fallbacks, 0) << "the instance must exercise the fallback";
  expect_matches_reference(batch, params, "residual fallback, split", split_launcher(2));
}

TEST(VerifyChainSplit, GpuFlagsInvalidRowsItReads) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_flags_invalid_rows_it_reads(2100, split_launcher(3));
}

TEST(VerifyChainSplit, BadWorkspaceThrows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const OwnedChainBatch host = random_batch(9, 2, 2, 4096, kAllKinds, false, false);
  const int too_many = gpu::chain_max_slices(host.vocab) + 1;  // 16 chunks: at most 4 slices
  EXPECT_EQ(too_many, 5);
  const testing::ChainLauncher forced = [&](const ChainBatch& batch, const ChainParams& params,
                                            const gpu::ChainDeviceOutput& output,
                                            cudaStream_t stream) {
    testing::DeviceBuffer<std::byte> workspace{
        std::vector<std::byte>(gpu::chain_workspace_bytes(batch.batch, batch.gamma, batch.vocab))};
    gpu::ChainDeviceOutput split = output;
    split.workspace = {workspace.span(), too_many};
    EXPECT_THAT(testing::error_of([&] { (void)gpu::verify_chain(batch, params, split, stream); }),
                ::testing::HasSubstr("workspace.slices is 5; expected 0 (automatic), 1 (no split) "
                                     "or 2..4 for V=4096"));
    // 16 bytes more than needed, used from byte 8: large enough, but misaligned for its arrays.
    testing::DeviceBuffer<std::byte> larger{std::vector<std::byte>(
        gpu::chain_workspace_bytes(batch.batch, batch.gamma, batch.vocab) + 16)};
    split.workspace = {larger.span().subspan(8, larger.span().size() - 16), 0};
    EXPECT_THAT(testing::error_of([&] { (void)gpu::verify_chain(batch, params, split, stream); }),
                ::testing::HasSubstr(", not a multiple of 16: its arrays need 16-byte alignment"));
    split.workspace = {workspace.span().first(workspace.span().size() - 1), 0};
    EXPECT_THAT(
        testing::error_of([&] { (void)gpu::verify_chain(batch, params, split, stream); }),
        ::testing::HasSubstr("bytes; expected at least chain_workspace_bytes(B=2, γ=2, V=4096)"));
    return cudaSuccess;
  };
  (void)testing::run_gpu_chain(host, {ChainMethod::kToken, 1.0, 9, 0}, forced);
}

TEST(VerifyChainPersistent, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // B ≥ SMs (132 under the emulation): V1/V3 run a persistent grid of 2·SMs CTAs of ≤ 512
  // threads, each verifying requests b, b + 264, …: B = 270 makes some CTAs take two requests,
  // B = 140 gives one each with fewer threads than the one-CTA kernel's at V = 32000.
  uint64_t seed = 701;
  for (const int64_t vocab : {257, 2100}) {
    for (const int64_t gamma : {0, 1, 4}) {
      const OwnedChainBatch batch = random_batch(seed, 270, gamma, vocab, kAllKinds, false, true);
      expect_matches_reference(batch, {ChainMethod::kToken, 1.0, seed, 2}, "persistent grid");
      expect_matches_reference(batch, {ChainMethod::kLenient, 0.7, seed, 2}, "persistent grid");
      ++seed;
    }
  }
  const OwnedChainBatch wide = random_batch(seed, 140, 1, 32000, kAllKinds, false, true);
  expect_matches_reference(wide, {ChainMethod::kToken, 1.0, seed, 2}, "persistent grid");
  // γ = 40 with two warps (V = 600): long accepted chains whose outputs more than one warp
  // writes, in CTAs that take two requests.
  const OwnedChainBatch long_chain =
      random_batch(seed + 2, 270, 40, 600, {RowKind::kPeaked}, true, true);
  expect_matches_reference(long_chain, {ChainMethod::kToken, 1.0, seed + 2, 2},
                           "persistent grid, γ = 40");
  // With a workspace at B ≥ SMs the split picks one slice: the persistent grid again.
  const OwnedChainBatch same = random_batch(seed + 1, 270, 3, 2100, kAllKinds, true, true);
  expect_matches_reference(same, {ChainMethod::kToken, 1.0, seed + 1, 2},
                           "persistent grid, workspace", split_launcher(0));
}

TEST(VerifyChain, GpuRejectsBadShapes) {
  // Shapes are checked on the host before anything touches the device, so this runs everywhere.
  const OwnedChainBatch batch = random_batch(91, 2, 2, 10, {RowKind::kDense}, false, false);
  std::vector<int32_t> emitted(6), n_accepted(2);
  std::vector<uint8_t> mask(4), fallback(2);
  std::vector<uint32_t> status(2);
  const gpu::ChainDeviceOutput out{emitted, n_accepted, mask, fallback, status};
  const ChainParams params{ChainMethod::kToken, 1.0, 0, 0};
  ChainBatch view = batch.view();
  view.probs_target = view.probs_target.first(view.probs_target.size() - 1);
  EXPECT_THROW(gpu::verify_chain(view, params, out, nullptr), InvalidInput);
  view = batch.view();
  view.batch = 0;
  EXPECT_THROW(gpu::verify_chain(view, params, out, nullptr), InvalidInput);
  EXPECT_THROW(gpu::verify_chain(batch.view(), {ChainMethod::kLenient, 0.0, 0, 0}, out, nullptr),
               InvalidInput);
  const gpu::ChainDeviceOutput short_out{std::span<int32_t>(emitted).first(5), n_accepted, mask,
                                         fallback, status};
  EXPECT_THROW(gpu::verify_chain(batch.view(), params, short_out, nullptr), InvalidInput);
}

}  // namespace
}  // namespace speclab
