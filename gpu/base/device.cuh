// Memory and launch helpers of the device code: 16-byte vector loads, coherent loads of values
// another CTA wrote, the arrival count that elects a split request's last CTA, and the seed word a
// launch reads (DeviceSeedStep).
#pragma once

#include <cstdint>

#include "gpu/base/device_types.hpp"
#include "gpu/base/simt.cuh"

namespace speclab::gpu::detail {

/// Four consecutive floats, loaded with one 16-byte instruction.
#if defined(SPECLAB_SIMT_EMULATION)
struct alignas(16) Float4 {
  float x, y, z, w;
};
#else
using Float4 = float4;
#endif

/// A value another CTA wrote during this launch, read past the (incoherent) L1.
template <class T>
__device__ inline T load_coherent(const T* p) {
  return *static_cast<const volatile T*>(p);
}

/// Counts this CTA in on the request's arrival counter once every thread's workspace writes are
/// fenced; thread 0 runs publish() (its own partial) just before. Returns (block-uniform) whether
/// this CTA is the last of `expected` to arrive: that one resets the counter, so the workspace is
/// ready for the next launch, and sees every other CTA's writes. `flag` is shared memory.
template <class Publish>
__device__ bool split_arrive(uint32_t* counter, uint32_t expected, int32_t* flag, Publish publish) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    publish();
    __threadfence();
    const bool last = atomicAdd(counter, 1u) == expected - 1;
    if (last) *counter = 0;
    *flag = last ? 1 : 0;
  }
  __syncthreads();
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

/// The seed and step of a launch: from device memory when the launcher was given a word there.
template <class Args>
__device__ inline void launch_seed_step(const Args& a, uint64_t* seed, uint32_t* step) {
  if (a.seed_step != nullptr) {
    *seed = a.seed_step->seed;
    *step = a.seed_step->step;
  } else {
    *seed = a.seed;
    *step = a.step;
  }
}

}  // namespace speclab::gpu::detail
