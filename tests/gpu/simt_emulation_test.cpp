// The SIMT emulation itself (gpu/emulation/, docs/testing.md "GPU tests without a GPU"): launch
// configuration errors as the CUDA runtime reports them, warp collectives with CUDA's semantics,
// poisoned shared memory (dynamic and static, per block) and cudaMalloc memory, SIMT rule
// violations reported instead of silently passing, thread and block orders other than thread order,
// and the map of device allocations behind cudaMemcpy's kind check. Each check has a broken kernel
// (or call) it must catch. Emulation only (label gpu-emu).
#if defined(SPECLAB_SIMT_EMULATION)

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "gpu/simt.cuh"

namespace speclab {
namespace {

// Sets the emulation's schedule for one scope.
struct ScopedSchedule {
  explicit ScopedSchedule(const emulation::Schedule& s) : previous(emulation::set_schedule(s)) {}
  ~ScopedSchedule() { emulation::set_schedule(previous); }
  ScopedSchedule(const ScopedSchedule&) = delete;
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;
  emulation::Schedule previous;
};

using emulation::Order;
const emulation::Schedule kSchedules[] = {{Order::kForward, Order::kForward, 0},
                                          {Order::kReverse, Order::kReverse, 0},
                                          {Order::kShuffled, Order::kShuffled, 1},
                                          {Order::kShuffled, Order::kShuffled, 2}};

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
  SPECLAB_STATIC_SHARED(int[32], partial);
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
  const ScopedSchedule forward({});  // thread 0 runs before thread 63
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

// Thread 0 zeroes a shared counter that every thread then increments. kMutant leaves out the
// barrier after the zeroing: in thread order thread 0 always runs first, so the race is resolved
// and the count is right; in any other order threads increment the poison before thread 0 zeroes.
template <bool kMutant>
__global__ void count_threads(int* out) {
  SPECLAB_STATIC_SHARED(int, total);
  if (threadIdx.x == 0) total = 0;
  if (!kMutant) __syncthreads();
  atomicAdd(&total, 1);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// kMutant: block b reads what block b - 1 wrote (no order between blocks on a device).
template <bool kMutant>
__global__ void number_blocks(int* out) {
  if (threadIdx.x != 0) return;
  out[blockIdx.x] =
      kMutant && blockIdx.x > 0 ? out[blockIdx.x - 1] + 1 : static_cast<int>(blockIdx.x) + 1;
}

template <typename Kernel>
std::vector<std::vector<int>> outputs_in_every_order(Kernel kernel, unsigned blocks,
                                                     unsigned threads) {
  std::vector<std::vector<int>> outputs;
  for (const emulation::Schedule& schedule : kSchedules) {
    const ScopedSchedule scoped(schedule);
    std::vector<int> out(blocks, 0);
    EXPECT_EQ(gpu::launch_kernel(kernel, dim3(blocks), dim3(threads), 0, nullptr, out.data()),
              cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outputs.push_back(out);
  }
  return outputs;
}

TEST(SimtEmulation, ThreadOrdersExposeARaceThreadOrderResolves) {
  const unsigned blocks = 3, threads = 96;
  const std::vector<int> right(blocks, static_cast<int>(threads));
  for (const auto& out : outputs_in_every_order(count_threads<false>, blocks, threads)) {
    EXPECT_EQ(out, right);
  }
  const auto mutant = outputs_in_every_order(count_threads<true>, blocks, threads);
  EXPECT_EQ(mutant[0], right) << "thread order hides the race";
  for (size_t i = 1; i < mutant.size(); ++i) {
    EXPECT_NE(mutant[i], mutant[0]) << "schedule " << i << " must expose the race";
  }
}

TEST(SimtEmulation, BlockOrdersExposeAnInterBlockDependency) {
  const unsigned blocks = 16;
  std::vector<int> right(blocks);
  for (unsigned b = 0; b < blocks; ++b) right[b] = static_cast<int>(b) + 1;
  for (const auto& out : outputs_in_every_order(number_blocks<false>, blocks, 32)) {
    EXPECT_EQ(out, right);
  }
  const auto mutant = outputs_in_every_order(number_blocks<true>, blocks, 32);
  EXPECT_EQ(mutant[0], right) << "grid order hides the dependency";
  for (size_t i = 1; i < mutant.size(); ++i) {
    EXPECT_NE(mutant[i], mutant[0]) << "schedule " << i << " must expose the dependency";
  }
}

TEST(SimtEmulation, ShuffledOrderIsSeeded) {
  const emulation::Schedule a = emulation::parse_schedule("shuffle:5");
  EXPECT_EQ(a.threads, Order::kShuffled);
  EXPECT_EQ(a.blocks, Order::kShuffled);
  EXPECT_EQ(a.seed, 5u);
  EXPECT_EQ(emulation::parse_schedule("reverse").threads, Order::kReverse);
  EXPECT_EQ(emulation::parse_schedule("forward").blocks, Order::kForward);
  EXPECT_THROW(emulation::parse_schedule("backwards"), std::invalid_argument);
  EXPECT_THROW(emulation::parse_schedule("shuffle:x"), std::invalid_argument);
}

// Every block reads its static shared word before any thread writes it (out[2b]), then thread 0
// writes it; a function-local static would show block b - 1's write to block b.
__global__ void read_unwritten_static_shared(uint32_t* out) {
  SPECLAB_STATIC_SHARED(uint32_t, word);
  if (threadIdx.x == 0) out[2 * blockIdx.x] = word;
  __syncthreads();
  if (threadIdx.x == 0) word = 7 + blockIdx.x;
  __syncthreads();
  if (threadIdx.x == 1) out[2 * blockIdx.x + 1] = word;
}

// A block sum in a static shared float; kMutant never zeroes it.
template <bool kMutant>
__global__ void sum_in_static_shared(const float* in, float* out) {
  SPECLAB_STATIC_SHARED(float, sum);
  if (!kMutant && threadIdx.x == 0) sum = 0.0f;
  __syncthreads();
  atomicAdd(&sum, in[threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) out[0] = sum;
}

TEST(SimtEmulation, StaticSharedIsPoisonedPerBlock) {
  const unsigned blocks = 3;
  std::vector<uint32_t> out(2 * blocks, 0);
  ASSERT_EQ(gpu::launch_kernel(read_unwritten_static_shared, dim3(blocks), dim3(64), 0, nullptr,
                               out.data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (unsigned b = 0; b < blocks; ++b) {
    EXPECT_EQ(out[2 * b], 0xFFFFFFFFu) << "block " << b << " must see poison, not a previous write";
    EXPECT_EQ(out[2 * b + 1], 7 + b) << "block " << b;
  }
  // One block, the kernel's first launch: zero-initialised storage would give the right sum.
  std::vector<float> in(32), sum(1, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);  // Σ = 496, exact
  ASSERT_EQ(gpu::launch_kernel(sum_in_static_shared<false>, dim3(1), dim3(32), 0, nullptr,
                               in.data(), sum.data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(sum[0], 496.0f);
  ASSERT_EQ(gpu::launch_kernel(sum_in_static_shared<true>, dim3(1), dim3(32), 0, nullptr, in.data(),
                               sum.data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(std::isnan(sum[0])) << "the unzeroed sum must read poison (a NaN), got " << sum[0];
}

__global__ void accumulate(const float* in, float* total) { atomicAdd(total, in[threadIdx.x]); }

TEST(SimtEmulation, CudaMallocMemoryIsPoisoned) {
  std::vector<float> in(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.5f * static_cast<float>(i);  // Σ = 1008
  float *d_in = nullptr, *d_total = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_in), in.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_total), sizeof(float)), cudaSuccess);
  uint32_t fresh = 0;
  ASSERT_EQ(cudaMemcpy(&fresh, d_total, sizeof fresh, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(fresh, 0xFFFFFFFFu);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  float total = 0.0f;
  // The mutant: the accumulator is never cleared (no cudaMemset).
  ASSERT_EQ(gpu::launch_kernel(accumulate, dim3(1), dim3(64), 0, nullptr, d_in, d_total),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&total, d_total, sizeof total, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(total)) << "an uncleared accumulator must read poison, got " << total;
  ASSERT_EQ(cudaMemset(d_total, 0, sizeof(float)), cudaSuccess);
  ASSERT_EQ(gpu::launch_kernel(accumulate, dim3(1), dim3(64), 0, nullptr, d_in, d_total),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&total, d_total, sizeof total, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(total, 1008.0f);
  EXPECT_EQ(cudaFree(d_in), cudaSuccess);
  EXPECT_EQ(cudaFree(d_total), cudaSuccess);
}

TEST(SimtEmulation, CudaMemcpyChecksItsKind) {
  int* device = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 4 * sizeof(int)), cudaSuccess);
  int host[4] = {1, 2, 3, 4}, back[4] = {};
  EXPECT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back, device, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[3], 4);
  EXPECT_EQ(cudaMemcpy(device + 2, device, 2 * sizeof(int), cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back, host, sizeof host, cudaMemcpyHostToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back, device, sizeof back, cudaMemcpyDefault), cudaSuccess);
  // Wrong kinds: the mutants of each direction, and a device range past its allocation.
  EXPECT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(back, device, sizeof back, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(back, host, sizeof host, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host, sizeof host, cudaMemcpyHostToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(back, device, sizeof back, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device + 1, host, sizeof host, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host), cudaErrorInvalidValue) << "not a device allocation";
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

}  // namespace
}  // namespace speclab

#endif  // SPECLAB_SIMT_EMULATION
