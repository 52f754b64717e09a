// The GPU cross-check must catch broken kernels (docs/testing.md "Mutants"): each mutant of
// gpu/verify/verify_chain.cuh runs under the SIMT emulation and must fail the comparison with core,
// by a token mismatch, a status where core has none, or a launch failure the emulation reports.
// Emulation only (label gpu-emu): the mutants are not built into the device library.
#if defined(SPECLAB_SIMT_EMULATION)

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/verify/verify_chain.hpp"
#include "gpu/emulation/simt.hpp"
#include "gpu/verify/verify_chain.hpp"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::ChainLauncher;
using testing::OwnedChainBatch;
using testing::RowKind;

// How many of the cases the cross-check flags for a mutant. The cases cover a one-warp and a
// many-warp block, V a multiple of the chunk size and not, residual and bonus rows.
int cases_flagged(gpu::KernelMutant mutant) {
  const ChainLauncher launcher = [mutant](const ChainBatch& b, const ChainParams& p,
                                          const gpu::ChainDeviceOutput& o, cudaStream_t s) {
    return gpu::verify_chain_mutant(mutant, b, p, o, s);
  };
  int flagged = 0;
  uint64_t seed = 500;
  for (const int64_t vocab : {300, 1000, 5000}) {
    for (const bool same : {false, true}) {
      const OwnedChainBatch batch = testing::random_batch(
          seed, 6, 3, vocab, {RowKind::kDense, RowKind::kPeaked}, same, false);
      const ChainParams params{ChainMethod::kToken, 1.0, seed++, 0};
      const ChainResult ref = verify_chain_reference(batch.view(), params);
      // Padding keeps a one-past-the-end read inside the allocation, so the off-by-one mutant
      // shows up as a wrong answer here rather than as an AddressSanitizer abort.
      const testing::GpuChainResult gpu = testing::run_gpu_chain(batch, params, launcher, 64);
      flagged += !testing::differences(gpu, ref).empty();
      // A launch failure is sticky, as on a device; each case is judged on its own (a device
      // would need a new process).
      emulation::clear_sticky_error();
    }
  }
  return flagged;
}

TEST(VerifyChainMutant, UnmutatedKernelPassesTheSameCases) {
  const int flagged = cases_flagged(gpu::KernelMutant::kNone);
  RecordProperty("cases_flagged", flagged);
  EXPECT_EQ(flagged, 0);
}

TEST(VerifyChainMutant, MissingSyncIsCaught) {
  const int flagged = cases_flagged(gpu::KernelMutant::kMissingSync);
  RecordProperty("cases_flagged", flagged);
  EXPECT_GT(flagged, 0) << "of 6 cases";
}

TEST(VerifyChainMutant, GridStrideOffByOneIsCaught) {
  const int flagged = cases_flagged(gpu::KernelMutant::kGridStrideOffByOne);
  RecordProperty("cases_flagged", flagged);
  EXPECT_GT(flagged, 0) << "of 6 cases";
}

TEST(VerifyChainMutant, ShuffleOffsetIsCaught) {
  const int flagged = cases_flagged(gpu::KernelMutant::kShuffleOffset);
  RecordProperty("cases_flagged", flagged);
  EXPECT_GT(flagged, 0) << "of 6 cases";
}

TEST(VerifyChainMutant, ShuffleMaskIsCaught) {
  const int flagged = cases_flagged(gpu::KernelMutant::kShuffleMask);
  RecordProperty("cases_flagged", flagged);
  EXPECT_GT(flagged, 0) << "of 6 cases";
}

#if defined(__SANITIZE_ADDRESS__)
// Without padding the off-by-one read of token V of the last row leaves the allocation:
// AddressSanitizer in the emulated kernel turns it into a crash with the faulting access.
TEST(VerifyChainMutant, AddressSanitizerCatchesOutOfBoundsRead) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const OwnedChainBatch batch =
      testing::random_batch(600, 1, 0, 1000, {RowKind::kDense}, false, false);
  const ChainLauncher launcher = [](const ChainBatch& b, const ChainParams& p,
                                    const gpu::ChainDeviceOutput& o, cudaStream_t s) {
    return gpu::verify_chain_mutant(gpu::KernelMutant::kGridStrideOffByOne, b, p, o, s);
  };
  EXPECT_DEATH(testing::run_gpu_chain(batch, {ChainMethod::kToken, 1.0, 600, 0}, launcher),
               "heap-buffer-overflow");
}
#endif

}  // namespace
}  // namespace speclab

#endif  // SPECLAB_SIMT_EMULATION
