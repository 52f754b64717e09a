// One kernel text for two builds: nvcc for the device, or the host compiler with
// -DSPECLAB_SIMT_EMULATION for the CPU emulation in gpu/emulation/ (docs/testing.md "GPU tests
// without a GPU"). Kernels use SPECLAB_DYNAMIC_SHARED and SPECLAB_STATIC_SHARED, launchers use
// launch_kernel, nothing else differs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#if defined(SPECLAB_SIMT_EMULATION)
#include "gpu/emulation/simt.hpp"
/// The block's dynamic shared memory as `type name[]` (C++ cannot spell `extern __shared__` at
/// block scope, so both builds use this macro).
#define SPECLAB_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::speclab::emulation::detail::dynamic_shared())
/// A static shared variable `type name` (`type` may be an array type, e.g. `int[32]`). In the
/// emulation every block gets its own copy filled with poison, so a read of a value no thread of
/// the block wrote shows (a function-local static would keep the previous block's values).
#define SPECLAB_STATIC_SHARED(type, name)                                                    \
  static const char name##_speclab_static_shared_key = 0;                                    \
  std::type_identity_t<type>& name =                                                         \
      *static_cast<std::type_identity_t<type>*>(::speclab::emulation::detail::static_shared( \
          &name##_speclab_static_shared_key, sizeof(std::type_identity_t<type>)))
#else
#define SPECLAB_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define SPECLAB_STATIC_SHARED(type, name) __shared__ std::type_identity_t<type> name
#endif

namespace speclab::gpu {

/// kernel<<<grid, block, shared_bytes, stream>>>(args...) on the device, or the emulated launch;
/// returns the launch status (cudaGetLastError), never synchronises.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                          cudaStream_t stream, Args&&... args) {
#if defined(SPECLAB_SIMT_EMULATION)
  return ::speclab::emulation::launch(kernel, grid, block, shared_bytes, stream,
                                      std::forward<Args>(args)...);
#else
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  return cudaGetLastError();
#endif
}

}  // namespace speclab::gpu
