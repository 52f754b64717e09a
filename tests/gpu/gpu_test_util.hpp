// Real-device GPU tests skip cleanly where no device (or no driver) is present.
#pragma once

#include <gtest/gtest.h>

#include "gpu/base/cuda_check.hpp"

#define SPECLAB_SKIP_WITHOUT_GPU()                                                \
  do {                                                                            \
    if (::speclab::gpu::device_count() == 0) {                                    \
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount failed or returned 0)"; \
    }                                                                             \
  } while (0)
