// The verifiers on logits with the temperature softmax fused (gpu::LogitsBatch) against core:
// core::probs_from_logits on every row (unfiltered, each model's temperature) followed by
// core::verify_chain_reference or core::verify_block must give the same tokens bit for bit.
// Also: bad logits, seed/step read from device memory, and (device only) a verification step
// captured in a CUDA graph and replayed. Built for the device (label gpu) and for the SIMT
// emulation (gpu-emu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/verify/verify_block.hpp"
#include "gpu/verify/verify_chain.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/gpu/logits_case.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using gpu::LogitsFormat;
using testing::bits_of;
using testing::DeviceBuffer;
using testing::DeviceCase;
using testing::DeviceLogitsBuffers;
using testing::float_of;
using testing::kAllRows;
using testing::kFormats;
using testing::kInf;
using testing::LogitRow;
using testing::LogitsCase;
using testing::name;
using testing::OwnedChainBatch;
using testing::random_logit_row;

constexpr int kNoWorkspace = -1;

// `launch(output)` on the case's outputs: as given (slices = kNoWorkspace), or twice on one zeroed
// workspace with the outputs overwritten in between (testing::launch_twice_on_workspace; slices 0:
// rows in parallel when B < SMs, ≥ 2: forced).
testing::GpuChainResult run_case(
    DeviceCase& d, int slices,
    const std::function<cudaError_t(const gpu::ChainDeviceOutput&)>& launch) {
  if (slices == kNoWorkspace) return d.read(launch(d.output()));
  return d.read(testing::launch_twice_on_workspace(gpu::chain_workspace_bytes(d.b, d.g, d.v),
                                                   slices, d.b, d.output(), nullptr, launch));
}

testing::GpuChainResult run_chain(const LogitsCase& c, const ChainParams& params,
                                  bool without_draft = false, int slices = kNoWorkspace) {
  DeviceCase d(c, without_draft);
  const gpu::LogitsBatch batch = d.batch();
  return run_case(d, slices, [&](const gpu::ChainDeviceOutput& out) {
    return gpu::verify_chain(batch, params, out, nullptr);
  });
}

testing::GpuChainResult run_block(const LogitsCase& c, const BlockParams& params,
                                  const gpu::BlockKernelOptions& options = {},
                                  int slices = kNoWorkspace) {
  DeviceCase d(c);
  const gpu::LogitsBatch batch = d.batch();
  return run_case(d, slices, [&](const gpu::ChainDeviceOutput& out) {
    return gpu::verify_block(batch, params, out, nullptr, options);
  });
}

std::string rows_label(int slices) {
  return slices == kNoWorkspace ? "" : ", rows in parallel (slices " + std::to_string(slices) + ")";
}

void expect_chain_matches_core(const LogitsCase& c, const ChainParams& params,
                               const std::string& label, int slices = kNoWorkspace) {
  const ChainResult ref = verify_chain_reference(c.probs.view(), params);
  EXPECT_EQ(testing::differences(run_chain(c, params, false, slices), ref), "")
      << describe(c, label) << " method " << to_string(params.method) << rows_label(slices);
}

void expect_block_matches_core(const LogitsCase& c, const BlockParams& params,
                               const std::string& label,
                               const gpu::BlockKernelOptions& options = {},
                               int slices = kNoWorkspace) {
  const ChainResult ref = verify_block(c.probs.view(), params);
  EXPECT_EQ(testing::differences(run_block(c, params, options, slices), ref), "")
      << describe(c, label) << " block" << rows_label(slices);
}

TEST(VerifyChainLogits, GpuMatchesReference) {
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

TEST(VerifyChainLogits, GpuMatchesReferenceEdgeRows) {
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
  // γ = 0: no draft rows at all (empty draft logits), only the bonus row or the argmax.
  const LogitsCase none(25, 5, 0, 250, LogitsFormat::kBFloat16, 1.0, 1.0, kAllRows, false, false);
  for (const ChainMethod method : {ChainMethod::kToken, ChainMethod::kGreedy}) {
    expect_chain_matches_core(none, {method, 1.0, 26, 1}, "γ = 0");
  }
  expect_block_matches_core(none, {26, 1}, "γ = 0");
  // V2 needs no draft logits.
  const LogitsCase c(30, 6, 4, 500, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, true, true);
  const ChainParams greedy{ChainMethod::kGreedy, 1.0, 0, 0};
  EXPECT_EQ(testing::differences(run_chain(c, greedy, true),
                                 verify_chain_reference(c.probs.view(), greedy)),
            "");
}

TEST(VerifyChainLogits, GpuMatchesReferenceManyRequests) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const LogitsCase c(40, 64, 3, 3000, LogitsFormat::kFloat16, 1.0, 1.0,
                     {LogitRow::kNormal, LogitRow::kPeaked}, false, true);
  expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, 41, 9}, "B = 64");
  const LogitsCase wide(42, 2, 2, 4099, LogitsFormat::kFloat32, 0.5, 0.5, kAllRows, false, false);
  expect_chain_matches_core(wide, {ChainMethod::kToken, 1.0, 43, 9}, "V = 4099");
}

TEST(VerifyLogits, GpuMatchesReferenceLargeVocab) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // A Llama-3-sized vocabulary: 1024 threads, 63 exponential tiles per row (⌈128256/2048⌉), 501
  // chunks (128256 = 501 · 256).
  const LogitsCase c(45, 2, 2, 128256, LogitsFormat::kBFloat16, 0.7, 0.7,
                     {LogitRow::kNormal, LogitRow::kPeaked, LogitRow::kMasked}, false, false);
  expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, 46, 1}, "V = 128256");
  expect_chain_matches_core(c, {ChainMethod::kGreedy, 1.0, 46, 1}, "V = 128256");
  expect_block_matches_core(c, {46, 1}, "V = 128256");
}

TEST(VerifyChainLogits, GreedyFollowsProbabilityTiesNotLogitTies) {
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

TEST(VerifyBlockLogits, GpuMatchesReference) {
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
  const LogitsCase many(69, 64, 3, 2000, LogitsFormat::kFloat16, 1.0, 1.0,
                        {LogitRow::kNormal, LogitRow::kPeaked}, false, true);
  expect_block_matches_core(many, {69, 5}, "B = 64");
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

// Corrupts one row of each request and checks that exactly the requests whose corrupt row the
// one-CTA kernels read are flagged (row_read), with core's tokens elsewhere.
void expect_flags_bad_logits_in_rows_it_reads(int slices, int64_t v = 200) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const LogitsFormat format : {LogitsFormat::kFloat32, LogitsFormat::kFloat16}) {
    for (int method_index = 0; method_index < 4; ++method_index) {
      const bool block = method_index == 3;
      const ChainMethod method =
          block ? ChainMethod::kToken : static_cast<ChainMethod>(method_index);
      const ChainParams params{method, 0.5, 80, 4};
      const int64_t b = 24, g = 3;
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
      const testing::GpuChainResult gpu =
          block ? run_block(c, {80, 4}, {}, slices) : run_chain(c, params, false, slices);
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

TEST(VerifyLogits, GpuFlagsBadLogitsInRowsItReads) {
  SPECLAB_SKIP_WITHOUT_GPU();
  expect_flags_bad_logits_in_rows_it_reads(kNoWorkspace);
}

TEST(VerifyLogitsRows, GpuFlagsBadLogitsInRowsItReads) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // Every row is reduced in parallel; the statuses of rows past the stop must be ignored.
  expect_flags_bad_logits_in_rows_it_reads(0);
  expect_flags_bad_logits_in_rows_it_reads(2);
}

TEST(VerifyLogitsSplit, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // V1/V3 with the residual or bonus row split over S slices after the rows-parallel statistics
  // launch: S automatic and forced (clamped to the vocabulary's maximum), V on both sides of a
  // 2048-token block and across chunks (scalar loads: logits rows), γ ∈ {0, 1, 4}, ragged γ_b.
  uint64_t seed = 1000;
  for (const int64_t vocab : {2047, 2049, 4099, 32000}) {
    for (const int slices : {0, 2, 3, 7}) {
      for (const int64_t gamma : {0, 1, 4}) {
        const LogitsFormat format = kFormats[seed % std::size(kFormats)];
        const double t_draft = seed % 3 == 0 ? 0.0 : 0.5;
        const LogitsCase c(seed, 3, gamma, vocab, format, 1.0, t_draft, kAllRows, false, true);
        const int forced = slices == 0 ? 0 : std::min(slices, gpu::chain_max_slices(vocab));
        expect_chain_matches_core(c, {ChainMethod::kToken, 1.0, seed, 3}, "split", forced);
        expect_chain_matches_core(c, {ChainMethod::kLenient, 0.6, seed, 3}, "split", forced);
        ++seed;
      }
    }
  }
  // Draft == target: the bonus row is the split one.
  const LogitsCase same(1100, 2, 3, 5000, LogitsFormat::kBFloat16, 1.0, 1.0, kAllRows, true, false);
  expect_chain_matches_core(same, {ChainMethod::kToken, 1.0, 7, 1}, "bonus row, split", 5);
}

TEST(VerifyLogitsSplit, GpuFlagsBadLogitsInRowsItReads) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // 2100 tokens: 9 chunks, 2 slices for V1/V3 (V2 and V5 reduce their rows in parallel).
  expect_flags_bad_logits_in_rows_it_reads(0, 2100);
  expect_flags_bad_logits_in_rows_it_reads(2, 2100);
}

TEST(VerifyLogitsRows, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  // The row statistics of all γ+1 (V5, V1/V3: 2γ+1) rows by parallel CTAs: automatic (B < SMs)
  // and forced; every method, format and temperature (T = 0 on either side); ragged n_draft;
  // vocabularies inside a chunk, across chunks and across a 2048-token normaliser block.
  uint64_t seed = 900;
  for (const LogitsFormat format : kFormats) {
    for (const auto& [t_target, t_draft] :
         std::vector<std::pair<double, double>>{{1.0, 1.0}, {0.5, 2.0}, {0.0, 1.0}}) {
      for (const int64_t vocab : {5, 300, 2049}) {
        for (const int64_t gamma : {0, 1, 4}) {
          const int slices = seed % 2 == 0 ? 0 : 2;
          const LogitsCase c(seed, 3, gamma, vocab, format, t_target, t_draft, kAllRows, false,
                             true);
          for (const ChainMethod method :
               {ChainMethod::kToken, ChainMethod::kLenient, ChainMethod::kGreedy}) {
            expect_chain_matches_core(c, {method, 0.6, seed, 3}, "random logits", slices);
          }
          expect_block_matches_core(c, {seed, 3}, "random logits", {}, slices);
          ++seed;
        }
      }
    }
  }
  // Draft == target: every draft accepted, the bonus row's statistics from the workspace.
  const LogitsCase same(950, 4, 4, 700, LogitsFormat::kFloat32, 1.0, 1.0, kAllRows, true, false);
  expect_chain_matches_core(same, {ChainMethod::kToken, 1.0, 4, 1}, "draft == target", 0);
  expect_chain_matches_core(same, {ChainMethod::kGreedy, 1.0, 4, 1}, "draft == target", 0);
  expect_block_matches_core(same, {4, 1}, "draft == target", {}, 0);
  // Near-ties of the tempered max (V2's exact pass) and the serial Z path.
  const LogitsCase ties(951, 4, 3, 400, LogitsFormat::kBFloat16, 0.5, 2.0, {LogitRow::kTies}, false,
                        true);
  expect_chain_matches_core(ties, {ChainMethod::kGreedy, 1.0, 5, 2}, "ties", 2);
  expect_block_matches_core(ties, {5, 2}, "serial Z", {true, nullptr}, 2);
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

TEST(VerifyLogits, GraphReplayMatchesReference) {
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
  // Warm-up: one uncaptured launch of each kernel first, so that loading the modules (lazy by
  // default) and any launcher-side attribute call happen outside the capture.
  ASSERT_EQ(gpu::verify_chain(d.batch(), {ChainMethod::kToken, 1.0, 0, 0}, d.output(), stream,
                              word.const_span().data()),
            cudaSuccess);
  ASSERT_EQ(gpu::verify_block(d_block.batch(), {0, 0}, d_block.output(), stream,
                              {false, word.const_span().data()}),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
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
}

TEST(VerifyLogits, GpuRejectsBadShapesAndTemperatures) {
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
