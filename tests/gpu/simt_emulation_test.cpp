// The SIMT emulation itself (gpu/emulation/, docs/testing.md "GPU tests without a GPU"): launch
// configuration errors as the CUDA runtime reports them, warp collectives with CUDA's semantics,
// poisoned shared memory (dynamic and static, per block) and cudaMalloc memory, SIMT rule
// violations reported instead of silently passing, thread and block orders other than thread order,
// the map of device allocations behind cudaMemcpy's kind check and the launch's and cuBLAS's
// pointer checks, sticky errors after a fault, and spin-waits that cannot end. Each check has a
// broken kernel (or call) it must catch. Emulation only (label gpu-emu).
#if defined(SPECLAB_SIMT_EMULATION)

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/base/simt.cuh"
#include "tests/gpu/verify_chain_harness.hpp"

namespace speclab {
namespace {

using testing::DeviceBuffer;

template <typename T>
std::vector<T> read(const DeviceBuffer<T>& buffer) {
  std::vector<T> host;
  EXPECT_EQ(buffer.copy_to(host), cudaSuccess);
  return host;
}

// Whether the last failure's message contains every one of `parts`.
::testing::AssertionResult failure_mentions(std::initializer_list<const char*> parts) {
  const std::string message = emulation::last_failure_message();
  for (const char* part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << part << "' not in: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

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
  DeviceBuffer<int> device_out(std::vector<int>(2048, -1));
  int* const out = device_out.span().data();
  using gpu::launch_kernel;
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(1), dim3(1025), 0, nullptr, out),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError clears the error";
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(0), dim3(32), 0, nullptr, out),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(1), dim3(32, 32, 2), 0, nullptr, out),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 228 * 1024, nullptr, out),
            cudaErrorInvalidValue);
  // Above 48 KiB a kernel must opt in, up to the device's 227 KiB.
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 64 * 1024, nullptr, out),
            cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(needs_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
      cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(needs_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024),
      cudaSuccess);
  EXPECT_EQ(launch_kernel(needs_shared, dim3(1), dim3(32), 64 * 1024, nullptr, out), cudaSuccess);
  EXPECT_EQ(launch_kernel(write_thread_ids, dim3(2), dim3(1024), 0, nullptr, out), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read(device_out)[1024 + 5], 1005);
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
  DeviceBuffer<WarpResults> device(1);
  ASSERT_EQ(
      gpu::launch_kernel(warp_collectives, dim3(1), dim3(32), 0, nullptr, device.span().data()),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const WarpResults r = read(device)[0];
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
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 7);
  DeviceBuffer<int> d_in(in), d_out(std::vector<int>(blocks + 1, 0));
  ASSERT_EQ(gpu::launch_kernel(block_reduce, dim3(blocks), dim3(threads), 0, nullptr,
                               d_in.span().data(), d_out.span().data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int> out = read(d_out);
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
  DeviceBuffer<uint32_t> d_out(std::vector<uint32_t>(2, 0));
  ASSERT_EQ(gpu::launch_kernel(read_before_barrier, dim3(1), dim3(64), sizeof(uint32_t), nullptr,
                               d_out.span().data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint32_t> out = read(d_out);
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
  DeviceBuffer<int> out(std::vector<int>(32, 0));
  ASSERT_EQ(gpu::launch_kernel(divergent_barrier, dim3(1), dim3(32), 0, nullptr, out.span().data()),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_TRUE(failure_mentions({"deadlock", "divergent_barrier", "block (0,0,0) thread"}));
  emulation::clear_sticky_error();
  ASSERT_EQ(
      gpu::launch_kernel(caller_outside_mask, dim3(1), dim3(32), 0, nullptr, out.span().data()),
      cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_TRUE(failure_mentions({"mask 0x0000ffff", "caller_outside_mask"}));
  emulation::clear_sticky_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
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
    DeviceBuffer<int> out(std::vector<int>(blocks, 0));
    EXPECT_EQ(
        gpu::launch_kernel(kernel, dim3(blocks), dim3(threads), 0, nullptr, out.span().data()),
        cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outputs.push_back(read(out));
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
  DeviceBuffer<uint32_t> d_out(std::vector<uint32_t>(2 * blocks, 0));
  ASSERT_EQ(gpu::launch_kernel(read_unwritten_static_shared, dim3(blocks), dim3(64), 0, nullptr,
                               d_out.span().data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint32_t> out = read(d_out);
  for (unsigned b = 0; b < blocks; ++b) {
    EXPECT_EQ(out[2 * b], 0xFFFFFFFFu) << "block " << b << " must see poison, not a previous write";
    EXPECT_EQ(out[2 * b + 1], 7 + b) << "block " << b;
  }
  // One block, the kernel's first launch: zero-initialised storage would give the right sum.
  std::vector<float> in(32);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);  // Σ = 496, exact
  DeviceBuffer<float> d_in(in), d_sum(std::vector<float>(1, -1.0f));
  ASSERT_EQ(gpu::launch_kernel(sum_in_static_shared<false>, dim3(1), dim3(32), 0, nullptr,
                               d_in.span().data(), d_sum.span().data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read(d_sum)[0], 496.0f);
  ASSERT_EQ(gpu::launch_kernel(sum_in_static_shared<true>, dim3(1), dim3(32), 0, nullptr,
                               d_in.span().data(), d_sum.span().data()),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const float sum = read(d_sum)[0];
  EXPECT_TRUE(std::isnan(sum)) << "the unzeroed sum must read poison (a NaN), got " << sum;
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

__global__ void scale_by_two(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 2.0f * in[i];
}

// A struct argument, as the verifiers pass theirs: pointers among numbers (a 32-bit field with
// padding after it, a vocabulary size, a seed), so the check must tell addresses from numbers.
struct ScaleArgs {
  const float* in;
  float* out;
  int64_t n;
  uint32_t step;
  uint64_t seed;
};

__global__ void scale_struct(ScaleArgs a) {
  const auto i = static_cast<int64_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < a.n) a.out[i] = 2.0f * a.in[i];
}

float host_global[64];

// What the message calls each kind of host memory: AddressSanitizer's own description where it
// runs, the mapping's name otherwise.
#if defined(__SANITIZE_ADDRESS__)
constexpr const char* kHostHeap = "host heap";
constexpr const char* kHostStack = "host stack";
constexpr const char* kHostGlobal = "host global";
#else
constexpr const char* kHostHeap = "host memory";
constexpr const char* kHostStack = "host memory";
constexpr const char* kHostGlobal = "host memory";
#endif

TEST(SimtEmulation, HostPointerToAKernelIsAnIllegalAddress) {
  const int n = 64;
  std::vector<float> host(n, 1.5f);
  DeviceBuffer<float> in(host), out(std::vector<float>(n, -1.0f));
  ASSERT_EQ(gpu::launch_kernel(scale_by_two, dim3(1), dim3(n), 0, nullptr, in.span().data(),
                               out.span().data(), n),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read(out)[n - 1], 3.0f);
  const ScaleArgs right{in.span().data(), out.span().data(), 128256, 7, 0x9e3779b97f4a7c15ull};
  ASSERT_EQ(gpu::launch_kernel(scale_struct, dim3(1), dim3(n), 0, nullptr, right), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << emulation::last_failure_message();

  // The mutants: a host heap pointer as a pointer parameter; host heap, stack and global
  // pointers inside a struct. The launch succeeds (a device launch does too), the kernel does not
  // run, and the next call returns the device's illegal-address error, sticky.
  float stack_array[64] = {};
  struct Case {
    const char* what;
    cudaError_t (*launch)(const float*, float*, float*, float*);
    std::vector<const char*> mentions;
  };
  const Case cases[] = {
      {"host heap pointer parameter",
       [](const float* h, float*, float*, float* o) {
         return gpu::launch_kernel(scale_by_two, dim3(1), dim3(64), 0, nullptr, h, o, 64);
       },
       {"scale_by_two", "argument 0", kHostHeap}},
      {"host heap pointer in a struct",
       [](const float*, float* h, float*, float* o) {
         return gpu::launch_kernel(scale_struct, dim3(1), dim3(64), 0, nullptr,
                                   ScaleArgs{o, h, 64, 3, 11});
       },
       {"scale_struct", "ScaleArgs", "word at byte 8", kHostHeap}},
      {"host stack pointer in a struct",
       [](const float*, float*, float* stack, float* o) {
         return gpu::launch_kernel(scale_struct, dim3(1), dim3(64), 0, nullptr,
                                   ScaleArgs{stack, o, 64, 3, 11});
       },
       {"word at byte 0", kHostStack}},
      {"host global in a struct",
       [](const float*, float*, float*, float* o) {
         return gpu::launch_kernel(scale_struct, dim3(1), dim3(64), 0, nullptr,
                                   ScaleArgs{o, host_global, 64, 3, 11});
       },
       {"word at byte 8", kHostGlobal}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_EQ(cudaMemcpy(out.span().data(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(c.launch(host.data(), host.data(), stack_array, out.span().data()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    for (const char* part : c.mentions) EXPECT_TRUE(failure_mentions({part}));
    emulation::clear_sticky_error();
    EXPECT_EQ(read(out)[0], 1.5f) << "the kernel must not have run";
  }
}

TEST(SimtEmulation, HostPointerToCublasIsAnIllegalAddress) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  // C = A·B for 2×2 column-major matrices: A = [1 3; 2 4], B = identity.
  const std::vector<float> a = {1, 2, 3, 4}, b = {1, 0, 0, 1};
  DeviceBuffer<float> d_a(a), d_b(b), d_c(std::vector<float>(4, 0.0f));
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d_a.span().data(), 2,
                        d_b.span().data(), 2, &zero, d_c.span().data(), 2),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read(d_c), a);
  // The mutant: B is host memory. The call returns (the device's GEMM is asynchronous); the next
  // runtime call reports the illegal address, C is untouched, and cuBLAS fails from then on.
  DeviceBuffer<float> d_c2(std::vector<float>(4, -1.0f));
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d_a.span().data(), 2,
                        b.data(), 2, &zero, d_c2.span().data(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_TRUE(failure_mentions({"cublasSgemm: B", kHostHeap}));
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d_a.span().data(), 2,
                        d_b.span().data(), 2, &zero, d_c2.span().data(), 2),
            CUBLAS_STATUS_EXECUTION_FAILED);
  emulation::clear_sticky_error();
  EXPECT_EQ(read(d_c2), std::vector<float>(4, -1.0f));
  // A host C (written, not read, at beta = 0) is the same fault.
  std::vector<float> host_c(4, 0.0f);
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &one, d_a.span().data(), 2,
                        d_b.span().data(), 2, &zero, host_c.data(), 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_TRUE(failure_mentions({"cublasSgemm: C"}));
  emulation::clear_sticky_error();
  // alpha in device memory while the pointer mode is host: the host would dereference it.
  DeviceBuffer<float> d_one(std::vector<float>{1.0f});
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, d_one.span().data(),
                        d_a.span().data(), 2, d_b.span().data(), 2, &zero, d_c.span().data(), 2),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

// kMutant: the kernel faults (lanes 0..15 wait at a warp barrier for lanes stuck at __syncthreads).
__global__ void fault_then_nothing(int* out) {
  if (threadIdx.x < 16) {
    __syncwarp(0xffffffffu);
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

TEST(SimtEmulation, ErrorsAreStickyAfterAFault) {
  DeviceBuffer<int> out(std::vector<int>(32, 0));
  ASSERT_EQ(
      gpu::launch_kernel(fault_then_nothing, dim3(1), dim3(32), 0, nullptr, out.span().data()),
      cudaSuccess);
  // A caller that clears the last error and carries on must still see the fault: the error is
  // sticky, returned by every later call that needs the context, and never cleared by one.
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << "cudaGetLastError must not clear it";
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorLaunchFailure);
  EXPECT_EQ(gpu::launch_kernel(write_thread_ids, dim3(1), dim3(32), 0, nullptr, out.span().data()),
            cudaErrorLaunchFailure)
      << "a launch after a fault fails and does not run";
  int* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 16), cudaErrorLaunchFailure);
  std::vector<int> host(32, 5);
  EXPECT_EQ(cudaMemcpy(out.span().data(), host.data(), 32 * sizeof(int), cudaMemcpyHostToDevice),
            cudaErrorLaunchFailure);
  EXPECT_EQ(cudaMemset(out.span().data(), 0, 32 * sizeof(int)), cudaErrorLaunchFailure);
  emulation::clear_sticky_error();  // a device needs a new process here
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(read(out), std::vector<int>(32, 0)) << "nothing ran or was copied after the fault";
  // A non-sticky error (a bad configuration) is returned once and cleared.
  EXPECT_EQ(
      gpu::launch_kernel(write_thread_ids, dim3(1), dim3(2048), 0, nullptr, out.span().data()),
      cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Thread 0 spins until thread 32 raises a flag. kMutant raises it only after a __syncthreads
// that thread 0, spinning, never reaches: a deadlock on a device. kVolatile spins on __ldcv, else
// on an atomic.
template <bool kMutant, bool kVolatile>
__global__ void wait_for_flag(int* flag, int* out) {
  if (threadIdx.x == 0) {
    if constexpr (kVolatile) {
      while (__ldcv(flag) == 0) {
      }
    } else {
      while (atomicAdd(flag, 0) == 0) {
      }
    }
    out[0] = 1;
  }
  if (!kMutant && threadIdx.x == 32) atomicExch(flag, 1);
  __syncthreads();
  if (kMutant && threadIdx.x == 32) atomicExch(flag, 1);
}

// Block 1 spins on a flag block 0 raises: right only if block 0 runs first (blocks need not be
// co-resident on a device, so this can hang there).
__global__ void wait_for_block_zero(int* flag, int* out) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    atomicExch(flag, 1);
  } else {
    while (atomicCAS(flag, 1, 1) == 0) {
    }
    out[0] = 1;
  }
}

template <typename Kernel>
cudaError_t run_flag_kernel(Kernel kernel, unsigned blocks, unsigned threads) {
  DeviceBuffer<int> flag(std::vector<int>{0}), out(std::vector<int>{0});
  const cudaError_t launch = gpu::launch_kernel(kernel, dim3(blocks), dim3(threads), 0, nullptr,
                                                flag.span().data(), out.span().data());
  EXPECT_EQ(launch, cudaSuccess);
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync == cudaSuccess) {
    EXPECT_EQ(read(out)[0], 1);
  }
  return sync;
}

TEST(SimtEmulation, SpinWaitDeadlockIsReported) {
  for (const emulation::Schedule& schedule : kSchedules) {
    const ScopedSchedule scoped(schedule);
    EXPECT_EQ(run_flag_kernel(wait_for_flag<false, false>, 1, 64), cudaSuccess);
    EXPECT_EQ(run_flag_kernel(wait_for_flag<false, true>, 1, 64), cudaSuccess);
    // The mutants: reported as an error naming kernel, block and thread, not hung.
    EXPECT_EQ(run_flag_kernel(wait_for_flag<true, false>, 1, 64), cudaErrorLaunchFailure);
    EXPECT_TRUE(
        failure_mentions({"spin-wait deadlock", "wait_for_flag<true, false>", "thread (0,0,0)"}));
    emulation::clear_sticky_error();
    EXPECT_EQ(run_flag_kernel(wait_for_flag<true, true>, 1, 64), cudaErrorLaunchFailure);
    EXPECT_TRUE(failure_mentions({"spin-wait deadlock", "63 threads wait at __syncthreads"}));
    emulation::clear_sticky_error();
  }
  {
    const ScopedSchedule forward({});
    EXPECT_EQ(run_flag_kernel(wait_for_block_zero, 2, 32), cudaSuccess) << "grid order hides it";
  }
  const ScopedSchedule reverse({Order::kReverse, Order::kReverse, 0});
  EXPECT_EQ(run_flag_kernel(wait_for_block_zero, 2, 32), cudaErrorLaunchFailure);
  EXPECT_TRUE(failure_mentions({"spin-wait deadlock", "block (1,0,0) thread (0,0,0)"}));
  emulation::clear_sticky_error();
}

__global__ void add_one(int* value) { *value += 1; }

// Stream capture as a device does it: captured launches and copies do not run at capture time, the
// graph runs them in order at every launch with the values they were captured with, the legacy
// stream cannot be captured, and a synchronising call during a global-mode capture fails and
// invalidates it.
TEST(SimtEmulation, StreamCaptureRecordsAndReplays) {
  DeviceBuffer<int> value(std::vector<int>{10});
  int* const v = value.span().data();
  const int seven = 7;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_NE(stream, nullptr) << "a created stream is not the legacy stream";
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaMemcpyAsync(v, &seven, sizeof seven, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(gpu::launch_kernel(add_one, dim3(1), dim3(1), 0, stream, v), cudaSuccess);
  ASSERT_EQ(gpu::launch_kernel(add_one, dim3(1), dim3(1), 0, stream, v), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(read(value)[0], 10) << "captured work must not run at capture time";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(read(value)[0], 9) << "copy 7, then two increments, in order";
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(read(value)[0], 9) << "a replay runs the same nodes again";
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  // Synchronising inside a global-mode capture: refused, and the capture is invalidated.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState) << "no capture is active";
  (void)cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Work for the legacy stream while another stream is being captured (in any mode): refused with
// cudaErrorStreamCaptureImplicit (the legacy stream would synchronise with the capture), not run,
// and the capture is invalidated, as on a device; a cuBLAS call on the legacy stream fails to
// launch its kernel. Once the capture has ended the legacy stream runs work again.
TEST(SimtEmulation, StreamCaptureRefusesLegacyStreamWork) {
  DeviceBuffer<int> value(std::vector<int>{10});
  int* const v = value.span().data();
  DeviceBuffer<float> matrix(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);  // on the legacy stream
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (const cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed}) {
    ASSERT_EQ(cudaStreamBeginCapture(stream, mode), cudaSuccess);
    ASSERT_EQ(gpu::launch_kernel(add_one, dim3(1), dim3(1), 0, stream, v), cudaSuccess);
    EXPECT_EQ(gpu::launch_kernel(add_one, dim3(1), dim3(1), 0, nullptr, v),
              cudaErrorStreamCaptureImplicit);
    EXPECT_EQ(cudaMemsetAsync(v, 0, sizeof(int), nullptr), cudaErrorStreamCaptureImplicit);
    const int seven = 7;
    EXPECT_EQ(cudaMemcpyAsync(v, &seven, sizeof seven, cudaMemcpyHostToDevice, nullptr),
              cudaErrorStreamCaptureImplicit);
    const float one = 1.0f, zero = 0.0f;
    float* m = matrix.span().data();
    EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, m, 2, m, 2, &zero, m, 2),
              CUBLAS_STATUS_EXECUTION_FAILED);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    (void)cudaGetLastError();
    EXPECT_EQ(read(value)[0], 10) << "refused work must not run (nor the captured launch)";
  }
  EXPECT_EQ(read(matrix), (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}));
  ASSERT_EQ(gpu::launch_kernel(add_one, dim3(1), dim3(1), 0, nullptr, v), cudaSuccess);
  EXPECT_EQ(read(value)[0], 11) << "no capture: the legacy stream runs work";
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace speclab

#endif  // SPECLAB_SIMT_EMULATION
