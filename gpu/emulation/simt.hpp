// SIMT emulation of the CUDA execution model on the CPU (docs/testing.md "GPU tests without a
// GPU"): the same kernel text compiled by the host compiler; a grid's blocks run one after another
// on the calling OS thread, each block's threads as fibers (Boost.Context) that switch only at
// block and warp barriers, atomics and volatile loads (__ldcv). Warp collectives (shuffles, votes)
// are barriers whose results the scheduler computes once every lane named in the mask has arrived.
// Test-only; gpu/README.md says what it proves and what it cannot.
#pragma once

#if !defined(SPECLAB_SIMT_EMULATION)
#error "gpu/emulation/simt.hpp is only for the emulation build (-DSPECLAB_SIMT_EMULATION)"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// `__shared__` is not defined here: kernels declare static shared variables with
// SPECLAB_STATIC_SHARED (gpu/base/simt.cuh), which the emulation allocates per launch and fills with
// poison (0xFF bytes) before every block, as it does dynamic shared memory.

namespace speclab::emulation {

/// The built-in variables of the thread that is running now.
struct ThreadBuiltins {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;
};

/// Device limits the launch checks, as on an H100/H200 (sm_90).
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;
inline constexpr size_t kMaxDynamicSharedBytes = 227 * 1024;  // opt-in maximum per block
inline constexpr unsigned char kSharedPoison = 0xFF;

/// The order in which the scheduler resumes a block's runnable threads in every round (between
/// barriers) and runs a grid's blocks. Thread order (kForward) is the default; kReverse and
/// kShuffled (a new seeded permutation every round and every grid) expose results that depend on
/// an order CUDA does not promise: a race that thread order happens to resolve, a block reading
/// what another block writes.
enum class Order { kForward, kReverse, kShuffled };
struct Schedule {
  Order threads = Order::kForward;
  Order blocks = Order::kForward;
  uint64_t seed = 0;  // of kShuffled
};
/// The schedule of later launches; returns the previous one. The initial schedule comes from the
/// environment variable SPECLAB_EMU_SCHEDULE: `forward` (default), `reverse` or `shuffle[:SEED]`
/// (threads and blocks alike).
Schedule set_schedule(const Schedule& schedule);
Schedule current_schedule();
/// Parses SPECLAB_EMU_SCHEDULE's syntax; throws std::invalid_argument naming the bad text.
Schedule parse_schedule(const std::string& text);

/// The message of the last emulated launch that failed while running (a SIMT rule broken, a
/// deadlock at a barrier or in a spin-wait, a host pointer among the arguments) or of a cuBLAS
/// call given host memory; it names the kernel, and the block and thread where there is one.
/// Empty if none.
std::string last_failure_message();
/// Such a failure is sticky, as a kernel fault is on a device: every later runtime call that
/// needs the context returns the error (cudaGetLastError does not clear it). A device needs a new
/// process to recover; this call stands in for it, for tests that fault on purpose.
void clear_sticky_error();

/// A spin-wait is reported as a deadlock once a block has run this many rounds in which its only
/// activity was threads reading, at an atomic or __ldcv, the value they read at the same address
/// the time before: no atomic changed memory, no thread reached a barrier or exited.
inline constexpr unsigned kSpinRounds = 1u << 14;

namespace detail {

extern const ThreadBuiltins* current;  // set by the scheduler before it resumes a thread

enum class WarpOp { kSync, kShfl, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll };
enum class BlockOp { kSync, kOr, kAnd, kCount };

/// Arrives at a warp barrier with `mask`; returns when every lane in the mask has arrived. The
/// exchange is computed at release: `value` (≤ 8 bytes) is this lane's contribution, `result`
/// receives the source lane's value (shuffles) or the vote.
void warp_exchange(WarpOp op, unsigned mask, const void* value, size_t bytes, int arg, int width,
                   void* result);
/// Arrives at the block barrier (__syncthreads and its reducing variants).
int block_barrier(BlockOp op, int predicate);
/// Start of this block's dynamic shared memory.
void* dynamic_shared();
/// This block's copy of the static shared variable identified by `key` (`bytes` long, poisoned
/// before every block); SPECLAB_STATIC_SHARED's storage.
void* static_shared(const void* key, size_t bytes);
/// Stream work (`call` names it in messages): when `stream` is being captured
/// (cudaStreamBeginCapture), `op` is recorded into the capture, to run at every cudaGraphLaunch
/// of its graph, and cudaSuccess returned; work for the legacy stream (0) while another stream is
/// being captured would synchronise with it, which a device refuses in every capture mode, so it
/// does not run, invalidates the capture and returns cudaErrorStreamCaptureImplicit; otherwise
/// `op` runs now and its status is returned.
cudaError_t enqueue(cudaStream_t stream, const char* call, const std::function<cudaError_t()>& op);
/// Runs `thread_body` once for every thread of every block of the grid.
cudaError_t run_grid(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes,
                     const std::function<void()>& thread_body);
/// A scheduling point (an atomic, a volatile load, __nanosleep): the thread yields to the others
/// of its block. `observed` is the value it read (the old value of an atomic), `modified` whether
/// it changed memory; they tell a spin-wait (the same value read again) from progress.
void scheduling_point(const void* address, uint64_t observed, bool modified);

template <typename T>
uint64_t value_bits(const T& value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value < sizeof bits ? sizeof value : sizeof bits);
  return bits;
}
template <typename T>
T after_atomic(T* address, T old) {
  scheduling_point(address, value_bits(old), value_bits(*address) != value_bits(old));
  return old;
}

/// One kernel argument as the launch check sees it: a pointer (checked exactly: null or device
/// memory), or the bytes of a struct (each 8-byte-aligned word that points into host memory is
/// reported). Arithmetic and enum arguments are not pointers and are skipped.
struct KernelArgument {
  const void* data = nullptr;
  size_t bytes = 0;
  bool pointer = false;
  const char* type = "";
};
template <typename T>
KernelArgument kernel_argument(const T& value) {
  if constexpr (std::is_pointer_v<T>) {
    return {&value, sizeof value, true, typeid(T).name()};
  } else if constexpr (std::is_class_v<T> && std::is_trivially_copyable_v<T>) {
    return {&value, sizeof value, false, typeid(T).name()};
  } else {
    return {};
  }
}
/// False (the failure recorded: cudaErrorIllegalAddress, sticky) when an argument is a host
/// pointer: on a device the kernel would fault on it.
bool check_kernel_arguments(const void* kernel, const KernelArgument* arguments, size_t n);

template <typename T>
T shuffle(WarpOp op, unsigned mask, T var, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "the emulation shuffles trivially copyable values of at most 8 bytes");
  T result;
  warp_exchange(op, mask, &var, sizeof(T), arg, width, &result);
  return result;
}

}  // namespace detail

/// Launches `kernel` on the emulated device: the arguments are converted to the kernel's
/// parameter types once and every thread receives its own copy, as CUDA passes them by value.
/// Returns the configuration error a real launch would report (block size above 1024, a zero
/// grid dimension, too much dynamic shared memory), or the sticky error of an earlier fault.
/// Faults while running (and a host pointer among the arguments, which a device kernel would
/// fault on) leave a sticky error that the next call returns (cudaDeviceSynchronize, cudaMemcpy…).
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  std::tuple<std::decay_t<Params>...> params(
      static_cast<std::decay_t<Params>>(std::forward<Args>(args))...);
  const void* const address = reinterpret_cast<const void*>(kernel);
  if constexpr (sizeof...(Params) > 0) {
    const bool device_arguments = std::apply(
        [address](const auto&... p) {
          const detail::KernelArgument arguments[] = {detail::kernel_argument(p)...};
          return detail::check_kernel_arguments(address, arguments, sizeof...(Params));
        },
        params);
    if (!device_arguments) return cudaSuccess;  // as a device launch: the fault comes later
  }
  // Captured: the graph keeps the argument values, as a device graph keeps the kernel node's.
  return detail::enqueue(stream, "a kernel launch",
                         [address, grid, block, shared_bytes, kernel, params] {
                           return detail::run_grid(address, grid, block, shared_bytes,
                                                   [&] { std::apply(kernel, params); });
                         });
}

}  // namespace speclab::emulation

#define threadIdx (::speclab::emulation::detail::current->thread_idx)
#define blockIdx (::speclab::emulation::detail::current->block_idx)
#define blockDim (::speclab::emulation::detail::current->block_dim)
#define gridDim (::speclab::emulation::detail::current->grid_dim)
#define warpSize 32

inline void __syncthreads() {
  ::speclab::emulation::detail::block_barrier(::speclab::emulation::detail::BlockOp::kSync, 0);
}
inline int __syncthreads_or(int predicate) {
  return ::speclab::emulation::detail::block_barrier(::speclab::emulation::detail::BlockOp::kOr,
                                                     predicate);
}
inline int __syncthreads_and(int predicate) {
  return ::speclab::emulation::detail::block_barrier(::speclab::emulation::detail::BlockOp::kAnd,
                                                     predicate);
}
inline int __syncthreads_count(int predicate) {
  return ::speclab::emulation::detail::block_barrier(::speclab::emulation::detail::BlockOp::kCount,
                                                     predicate);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::speclab::emulation::detail::warp_exchange(::speclab::emulation::detail::WarpOp::kSync, mask,
                                              nullptr, 0, 0, 32, nullptr);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  return ::speclab::emulation::detail::shuffle(::speclab::emulation::detail::WarpOp::kShfl, mask,
                                               var, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::speclab::emulation::detail::shuffle(::speclab::emulation::detail::WarpOp::kShflUp, mask,
                                               var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::speclab::emulation::detail::shuffle(::speclab::emulation::detail::WarpOp::kShflDown,
                                               mask, var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return ::speclab::emulation::detail::shuffle(::speclab::emulation::detail::WarpOp::kShflXor, mask,
                                               var, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const int value = predicate != 0;
  unsigned result = 0;
  ::speclab::emulation::detail::warp_exchange(::speclab::emulation::detail::WarpOp::kBallot, mask,
                                              &value, sizeof value, 0, 32, &result);
  return result;
}
inline int __any_sync(unsigned mask, int predicate) {
  const int value = predicate != 0;
  int result = 0;
  ::speclab::emulation::detail::warp_exchange(::speclab::emulation::detail::WarpOp::kAny, mask,
                                              &value, sizeof value, 0, 32, &result);
  return result;
}
inline int __all_sync(unsigned mask, int predicate) {
  const int value = predicate != 0;
  int result = 0;
  ::speclab::emulation::detail::warp_exchange(::speclab::emulation::detail::WarpOp::kAll, mask,
                                              &value, sizeof value, 0, 32, &result);
  return result;
}

// Integer intrinsics.
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline long long __mul64hi(long long a, long long b) {
  return static_cast<long long>((static_cast<__int128>(a) * b) >> 64);
}

// Atomics: fibers never switch inside one, so a plain read-modify-write is atomic here. Each is a
// scheduling point after the operation: the thread yields, so a spin on an atomic lets the others
// run and, if nothing can change what it reads, is reported as a deadlock instead of hanging.
#define SPECLAB_EMU_ATOMIC(name, update)                             \
  template <typename T>                                              \
  T name(T* address, T value) {                                      \
    const T old = *address;                                          \
    *address = (update);                                             \
    return ::speclab::emulation::detail::after_atomic(address, old); \
  }
SPECLAB_EMU_ATOMIC(atomicAdd, old + value)
SPECLAB_EMU_ATOMIC(atomicSub, old - value)
SPECLAB_EMU_ATOMIC(atomicMin, value < old ? value : old)
SPECLAB_EMU_ATOMIC(atomicMax, value > old ? value : old)
SPECLAB_EMU_ATOMIC(atomicOr, old | value)
SPECLAB_EMU_ATOMIC(atomicAnd, old& value)
SPECLAB_EMU_ATOMIC(atomicXor, old ^ value)
SPECLAB_EMU_ATOMIC(atomicExch, value)
#undef SPECLAB_EMU_ATOMIC
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  const T old = *address;
  if (old == compare) *address = value;
  return ::speclab::emulation::detail::after_atomic(address, old);
}

/// A volatile load (ld.volatile: read from memory every time), the spelling kernels use for a
/// flag another thread sets. A scheduling point, as the atomics. A plain `volatile` dereference
/// cannot be seen by the emulation (C++ offers no hook), so kernels that spin use these.
template <typename T>
T __ldcv(const T* address) {
  const T value = *const_cast<const volatile T*>(address);
  ::speclab::emulation::detail::scheduling_point(
      address, ::speclab::emulation::detail::value_bits(value), false);
  return value;
}
/// A scheduling point that reads nothing (spin loops back off with it).
inline void __nanosleep(unsigned /*ns*/) {
  ::speclab::emulation::detail::scheduling_point(nullptr, 0, false);
}
