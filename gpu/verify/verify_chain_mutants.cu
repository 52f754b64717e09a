// Mutant chain verifier kernels (docs/testing.md "Mutants"): the kernel of gpu/verify/verify_chain.cuh
// with one deliberate bug each, for the emulation's tests that the GPU cross-check catches them.
// Compiled into the emulation library only (gpu/CMakeLists.txt leaves it out of speclab_gpu).
#include "core/base/error.hpp"
#include "gpu/verify/verify_chain.cuh"

namespace speclab::gpu {

cudaError_t verify_chain_mutant(KernelMutant mutant, const ChainBatch& batch,
                                const ChainParams& params, const ChainDeviceOutput& output,
                                cudaStream_t stream) {
  using detail::launch_verify_chain;
  switch (mutant) {
    case KernelMutant::kNone:
      return launch_verify_chain<KernelMutant::kNone>(batch, params, output, stream);
    case KernelMutant::kMissingSync:
      return launch_verify_chain<KernelMutant::kMissingSync>(batch, params, output, stream);
    case KernelMutant::kGridStrideOffByOne:
      return launch_verify_chain<KernelMutant::kGridStrideOffByOne>(batch, params, output, stream);
    case KernelMutant::kShuffleOffset:
      return launch_verify_chain<KernelMutant::kShuffleOffset>(batch, params, output, stream);
    case KernelMutant::kShuffleMask:
      return launch_verify_chain<KernelMutant::kShuffleMask>(batch, params, output, stream);
  }
  throw InvalidInput("unknown kernel mutant " + std::to_string(static_cast<int>(mutant)));
}

}  // namespace speclab::gpu
