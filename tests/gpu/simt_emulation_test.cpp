// The SIMT emulation itself (gpu/emulation/, docs/testing.md "GPU tests without a GPU"): launch
// configuration errors as the CUDA runtime reports them, warp collectives with CUDA's semantics,
// poisoned shared memory, and SIMT rule violations reported instead of silently passing.
// Emulation only (label gpu-emu).
#if defined(SPECLAB_SIMT_EMULATION)

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpu/simt.cuh"

namespace speclab {
namespace {

__global__ void write_thread_ids(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<int>(blockIdx.x * 1000 + threadIdx.x);
}

__global__ void needs_shared(int* out) {
  SPECLAB_DYNAMIC_SHARED(int, scratch);
  scratch[threadIdx.x] = 1;
  out[0] = 0;
}

TEST(SimtEmulation, RejectsBadLaunchConfigurations) {
  std::vector<int> out(2048, -1);
  using gpu::launch_kernel;
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(1), dim3(1025), 0, nullptr, out.data()),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError clears the error";
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(0), dim3(32), 0, nullptr, out.data()),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(1), dim3(32, 32, 2), 0, nullptr, out.data()),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 228 * 1024, nullptr, out.data()),
            cudaErrorInvalidValue);
  // Above 48 KiB a kernel must opt in, up to the device's 227 KiB.
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 64 * 1024, nullptr, out.data()),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(needs_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
      cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(needs_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
      cudaSuccess);
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 64 * 1024, nullptr, out.data()),
            cudaSuccess);
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(2), dim3(1024), 0, nullptr, out.data()),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out[1024 + 5], 1005);
}

struct WarpResults {
  int shfl[32], up[32], down[32], xor_[32], width8[32];
  unsigned ballot[32];
  int any[32], all[32], half[32];
};

__global__ void warp_collectives(WarpResults* r) {
  const int lane = static_cast<int>(threadIdx.x);
  const unsigned full = 0xffffffffu;
  r->shfl[lane] = __shfl_sync(full, lane * 10, 3);
  r->up[lane] = __shfl_up_sync(full, lane, 2);
  r->down[lane] = __shfl_down_sync(full, lane, 5);
  r->xor_[lane] = __shfl_xor_sync(full, lane, 1);
  r->width8[lane] = __shfl_down_sync(full, lane, 3, 8);
  r->ballot[lane] = __ballot_sync(full, lane % 3 == 0);
  r->any[lane] = __any_sync(full, lane == 17);
  r->all[lane] = __all_sync(full, lane < 31);
  // Two half-warps with their own masks at the same time.
  const unsigned half_mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  r->half[lane] = __shfl_sync(half_mask, lane, lane < 16 ? 0 : 16);
}

TEST(SimtEmulation, WarpCollectivesFollowCuda) {
  WarpResults r{};
  ASSERT_EQ(gpu::launch_kernel(warp_collectives, dim3(1), dim3(32), 0, nullptr, &r), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    SCOPED_TRACE(lane);
    EXPECT_EQ(r.shfl[lane], 30);
    EXPECT_EQ(r.up[lane], lane >= 2 ? lane - 2 : lane);
    EXPECT_EQ(r.down[lane], lane + 5 < 32 ? lane + 5 : lane);
    EXPECT_EQ(r.xor_[lane], lane ^ 1);
    EXPECT_EQ(r.width8[lane], lane % 8 + 3 < 8 ? lane + 3 : lane);
    EXPECT_EQ(r.ballot[lane], ballot);
    EXPECT_EQ(r.any[lane], 1);
    EXPECT_EQ(r.all[lane], 0);
    EXPECT_EQ(r.half[lane], lane < 16 ? 0 : 16);
  }
}

__global__ void block_reduce(const int* in, int* out) {
  __shared__ int partial[32];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x) / 32 ? partial[lane] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) out[blockIdx.x] = v;
  }
  const int count = __syncthreads_count(in[blockIdx.x * blockDim.x + threadIdx.x] % 2);
  if (threadIdx.x == 0) atomicAdd(&out[gridDim.x], count);
}

TEST(SimtEmulation, BlockReductionsAcrossWarps) {
  const int blocks = 3, threads = 1024;
  std::vector<int> in(blocks * threads), out(blocks + 1, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 7);
  ASSERT_EQ(gpu::launch_kernel(block_reduce, dim3(blocks), dim3(threads), 0, nullptr, in.data(),
                               out.data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int odd = 0;
  for (int b = 0; b < blocks; ++b) {
    int sum = 0;
    for (int t = 0; t < threads; ++t) sum += in[b * threads + t];
    EXPECT_EQ(out[b], sum) << "block " << b;
    for (int t = 0; t < threads; ++t) odd += in[b * threads + t] % 2;
  }
  EXPECT_EQ(out[blocks], odd);
}

// Thread 0 reads what thread 63 writes, without a barrier in between: on a device a race, here
// a read of the poison pattern, because threads only switch at barriers.
__global__ void read_before_barrier(uint32_t* out) {
  SPECLAB_DYNAMIC_SHARED(uint32_t, shared);
  if (threadIdx.x == blockDim.x - 1) shared[0] = 42;
  if (threadIdx.x == 0) out[0] = shared[0];
  __syncthreads();
  if (threadIdx.x == 0) out[1] = shared[0];
}

TEST(SimtEmulation, MissingBarrierReadsPoison) {
  std::vector<uint32_t> out(2, 0);
  ASSERT_EQ(gpu::launch_kernel(read_before_barrier, dim3(1), dim3(64), sizeof(uint32_t), nullptr,
                               out.data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out[0], 0xFFFFFFFFu) << "the poison pattern, not thread 63's value";
  EXPECT_EQ(out[1], 42u);
}

__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 16) {
    __syncwarp(0xffffffffu);  // waits for lanes 16..31, which wait at __syncthreads: deadlock
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void caller_outside_mask(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 0);
}

TEST(SimtEmulation, ReportsSimtViolations) {
  std::vector<int> out(32, 0);
  ASSERT_EQ(gpu::launch_kernel(divergent_barrier, dim3(1), dim3(32), 0, nullptr, out.data()),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(emulation::last_failure_message().find("deadlock"), std::string::npos)
      << emulation::last_failure_message();
  ASSERT_EQ(gpu::launch_kernel(caller_outside_mask, dim3(1), dim3(32), 0, nullptr, out.data()),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(emulation::last_failure_message().find("mask 0x0000ffff"), std::string::npos)
      << emulation::last_failure_message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the emulation's failures are not sticky";
}

}  // namespace
}  // namespace speclab

#endif  // SPECLAB_SIMT_EMULATION
