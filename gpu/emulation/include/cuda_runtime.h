// The emulation shim of the CUDA runtime (see cuda_runtime_api.h) plus the execution model.
#pragma once

#include <cuda_runtime_api.h>

#include "gpu/emulation/simt.hpp"
