// The emulated CUDA runtime (gpu/emulation/include/cuda_runtime_api.h): one device whose memory
// is host memory from malloc, so AddressSanitizer sees every allocation's exact bounds. Calls are
// synchronous. A failure inside an emulated grid (or a host pointer a kernel or cuBLAS was given)
// is sticky, as a kernel fault is on a device: every later call that needs the context returns it
// (cudaGetLastError included, which does not clear it), until emulation::clear_sticky_error().
// cudaMalloc fills new memory with poison (0xFF bytes: CUDA leaves it undefined) and records it in
// a map of device allocations, against which cudaMemcpy checks its kind, cudaFree its pointer and
// a launch its pointer arguments. Streams are distinct handles over the one synchronous queue; a
// stream being captured records its work instead of running it (one capture at a time), and in
// global mode the calls a device forbids during a capture (cudaMalloc, cudaFree, synchronous
// copies, synchronising) fail and invalidate it, as on a device; so does work for the legacy
// stream during any capture (its implicit synchronisation with the capturing stream).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/emulation/runtime_state.hpp"
#include "gpu/emulation/simt.hpp"

namespace speclab::emulation {
namespace {

struct RuntimeState {
  std::mutex mutex;
  cudaError_t last_error = cudaSuccess;
  cudaError_t sticky = cudaSuccess;  // set by a fault while a kernel ran; never cleared by a call
  std::string failure_message;
  std::map<const void*, size_t> shared_limits;
  std::map<uintptr_t, size_t> allocations;  // device allocations: start address → bytes
  struct Capture {
    cudaStream_t stream = nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    bool invalidated = false;
    std::vector<std::function<cudaError_t()>> ops;
  };
  std::optional<Capture> capture;
};

RuntimeState& state() {
  static RuntimeState s;
  return s;
}

cudaError_t fail(cudaError_t error) {
  detail::set_last_error(error);
  return error;
}

// The sticky error of an earlier fault, which every call that needs the context returns.
cudaError_t sticky() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.sticky;
}

// A call a device forbids while a global-mode capture is active: the error, and the capture
// invalidated (its cudaStreamEndCapture fails); cudaSuccess when no such capture is active.
cudaError_t forbidden_while_capturing(const char* call) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.capture || s.capture->mode != cudaStreamCaptureModeGlobal) return cudaSuccess;
  s.capture->invalidated = true;
  std::fprintf(stderr, "speclab SIMT emulation: %s during a stream capture (global mode)\n", call);
  s.last_error = cudaErrorStreamCaptureUnsupported;
  return cudaErrorStreamCaptureUnsupported;
}

}  // namespace

std::string last_failure_message() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.failure_message;
}

void clear_sticky_error() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.sticky = cudaSuccess;
  s.last_error = cudaSuccess;
}

namespace detail {

cudaError_t enqueue(cudaStream_t stream, const char* call, const std::function<cudaError_t()>& op) {
  {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    if (s.capture && stream == nullptr) {
      s.capture->invalidated = true;
      std::fprintf(stderr,
                   "speclab SIMT emulation: %s on the legacy stream during a stream capture\n",
                   call);
      s.last_error = cudaErrorStreamCaptureImplicit;
      return cudaErrorStreamCaptureImplicit;
    }
    if (s.capture && s.capture->stream == stream) {
      s.capture->ops.push_back(op);
      return cudaSuccess;
    }
  }
  return op();
}

void set_last_error(cudaError_t error) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  s.last_error = error;
}

void record_execution_failure(const std::string& message, cudaError_t error) {
  auto& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (s.sticky == cudaSuccess) s.sticky = error;
    s.last_error = s.sticky;
    s.failure_message = message;
  }
  std::fprintf(stderr, "speclab SIMT emulation: %s (%s, sticky)\n", message.c_str(),
               cudaGetErrorName(error));
}

cudaError_t sticky_error() { return sticky(); }

bool is_device_range(const void* pointer, size_t bytes) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return false;
  --it;
  return address - it->first < it->second && bytes <= it->second - (address - it->first);
}

bool is_device_address(uintptr_t address) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return false;
  --it;
  return address - it->first <= it->second;
}

size_t dynamic_shared_limit(const void* kernel) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto it = s.shared_limits.find(kernel);
  return it == s.shared_limits.end() ? kDefaultDynamicSharedBytes : it->second;
}

}  // namespace detail
}  // namespace speclab::emulation

struct CUstream_st {};
struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> ops;
};

using speclab::emulation::fail;
using speclab::emulation::forbidden_while_capturing;
using speclab::emulation::sticky;

// Every call below that needs the device context starts with this: after a fault, the error.
#define SPECLAB_EMU_RETURN_IF_STICKY()                              \
  do {                                                              \
    if (const cudaError_t e = sticky(); e != cudaSuccess) return e; \
  } while (0)

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

// A non-sticky error (a bad launch configuration, a wrong copy kind) is returned once and
// cleared; a sticky one is returned by every call.
cudaError_t cudaGetLastError() {
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  if (s.sticky != cudaSuccess) return s.sticky;
  const cudaError_t error = s.last_error;
  s.last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  return s.sticky != cudaSuccess ? s.sticky : s.last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError:
      return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources:
      return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered (SIMT emulation: see stderr)";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (SIMT emulation: see stderr)";
    default:
      return cudaGetErrorName(error);
  }
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (const cudaError_t e = forbidden_while_capturing("cudaMalloc"); e != cudaSuccess) return e;
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  *pointer = std::malloc(bytes);
  if (*pointer == nullptr) return fail(cudaErrorMemoryAllocation);
  std::memset(*pointer, speclab::emulation::kSharedPoison, bytes);
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  s.allocations[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  return cudaSuccess;
}

// After a fault the memory is still released (so that LeakSanitizer stays quiet about a test that
// faults on purpose), and the sticky error returned.
cudaError_t cudaFree(void* pointer) {
  if (const cudaError_t e = forbidden_while_capturing("cudaFree"); e != cudaSuccess) return e;
  if (pointer == nullptr) return sticky();
  {
    auto& s = speclab::emulation::state();
    std::lock_guard lock(s.mutex);
    if (s.allocations.erase(reinterpret_cast<uintptr_t>(pointer)) == 0) {
      std::fprintf(stderr, "speclab SIMT emulation: cudaFree(%p): not a device allocation\n",
                   pointer);
      s.last_error = cudaErrorInvalidValue;
      return cudaErrorInvalidValue;
    }
  }
  std::free(pointer);
  return sticky();
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = forbidden_while_capturing("cudaMemcpy"); e != cudaSuccess) return e;
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
    return fail(cudaErrorInvalidMemcpyDirection);
  }
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return fail(cudaErrorInvalidValue);
  if (kind != cudaMemcpyDefault) {
    // The kind names where each side lives; the device side must lie inside one allocation.
    using speclab::emulation::detail::is_device_range;
    const bool dst_device = is_device_range(dst, bytes), src_device = is_device_range(src, bytes);
    const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_device != want_dst || src_device != want_src) {
      std::fprintf(stderr,
                   "speclab SIMT emulation: cudaMemcpy kind %d with %s destination %p and %s "
                   "source %p (%zu bytes)\n",
                   static_cast<int>(kind), dst_device ? "device" : "host", dst,
                   src_device ? "device" : "host", src, bytes);
      return fail(cudaErrorInvalidValue);
    }
  }
  return speclab::emulation::detail::enqueue(stream, "cudaMemcpyAsync", [dst, src, bytes] {
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  if (const cudaError_t e = forbidden_while_capturing("cudaMemset"); e != cudaSuccess) return e;
  return cudaMemsetAsync(pointer, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (bytes == 0) return cudaSuccess;
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  if (!speclab::emulation::detail::is_device_range(pointer, bytes)) {
    std::fprintf(stderr, "speclab SIMT emulation: cudaMemset(%p, %zu bytes): not device memory\n",
                 pointer, bytes);
    return fail(cudaErrorInvalidValue);
  }
  return speclab::emulation::detail::enqueue(stream, "cudaMemsetAsync", [pointer, value, bytes] {
    std::memset(pointer, value, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = forbidden_while_capturing("cudaDeviceSynchronize"); e != cudaSuccess) {
    return e;
  }
  return sticky();
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  *stream = new CUstream_st;  // a handle of its own (captures tell streams apart); work runs now
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return sticky();
}

cudaError_t cudaStreamSynchronize(cudaStream_t /*stream*/) {
  if (const cudaError_t e = forbidden_while_capturing("cudaStreamSynchronize"); e != cudaSuccess) {
    return e;
  }
  return sticky();
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy stream
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  if (s.capture) {
    s.last_error = cudaErrorIllegalState;
    return cudaErrorIllegalState;
  }
  s.capture.emplace();
  s.capture->stream = stream;
  s.capture->mode = mode;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  *graph = nullptr;
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  if (!s.capture || s.capture->stream != stream) {
    s.last_error = cudaErrorIllegalState;
    return cudaErrorIllegalState;
  }
  const bool invalidated = s.capture->invalidated;
  std::vector<std::function<cudaError_t()>> ops = std::move(s.capture->ops);
  s.capture.reset();
  if (invalidated) {
    s.last_error = cudaErrorStreamCaptureInvalidated;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = new CUgraph_st{std::move(ops)};
  return s.sticky;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t /*stream*/) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  for (const auto& op : exec->ops) {
    if (const cudaError_t e = op(); e != cudaSuccess) return e;
  }
  return sticky();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value) {
  SPECLAB_EMU_RETURN_IF_STICKY();
  if (function == nullptr || attribute != cudaFuncAttributeMaxDynamicSharedMemorySize ||
      value < 0 || static_cast<size_t>(value) > speclab::emulation::kMaxDynamicSharedBytes) {
    return fail(cudaErrorInvalidValue);
  }
  auto& s = speclab::emulation::state();
  std::lock_guard lock(s.mutex);
  s.shared_limits[function] = static_cast<size_t>(value);
  return cudaSuccess;
}
