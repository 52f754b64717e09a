// This host as the planner's hardware: its read bandwidth, fp32 FLOP rate, sampling cost and
// model-call overhead, measured with speclab's own kernels, for `speclab plan --gpu this-machine`
// and the planner's validation against measured decoding runs.
#pragma once

#include <string_view>

#include "core/plan/hardware.hpp"

namespace speclab {

/// Measures this host: read bandwidth (measure_read_bandwidth), fp32 FLOP rate (the
/// LinearSoftmax skinny GEMM, 64 columns, on a matrix that stays in the last-level cache), the
/// sampling pipeline's time per logit (one thread, as the decode engine runs it) and the fixed
/// cost of a model call (the 16-token LinearSoftmax model). Memory is the host's RAM.
/// threads = 0: all cores (the GEMM on a 16 MiB matrix, the smallest it splits over threads);
/// threads = 1: one core (a 4 MiB matrix, which the GEMM runs on one thread).
HardwareSpec measure_this_machine(int threads = 0);

/// A GPU preset by name (find_gpu), or this host measured for kThisMachine (a second or two,
/// once per process).
HardwareSpec find_hardware(std::string_view name);

}  // namespace speclab
