// Which machine a figure was measured on: the CPU, the instruction set the build targets and the
// one the CPU offers, the threads and how idle OpenMP threads wait. Every `speclab bench` prints it
// in its header and its JSON, and every run file carries it as attributes (docs/hdf5.md), because
// a speed is only comparable with another taken on the same kind of machine.
#pragma once

#include <string>

#include "core/io/json.hpp"

namespace speclab {

struct MachineIdentity {
  std::string cpu_model;  ///< /proc/cpuinfo "model name", or "unknown"
  /// The widest instruction set this build's fast paths were compiled for: "avx512-vnni",
  /// "avx512", "avx2" or "x86-64" (SPECLAB_NATIVE=ON builds for the CPU that built it).
  std::string build_isa;
  /// The same scale for the CPU it runs on, e.g. "avx512-vnni" on a build made for "avx2".
  std::string cpu_isa;
  int threads = 1;  ///< OpenMP threads a parallel region uses (omp_get_max_threads)
  /// OMP_WAIT_POLICY as the OpenMP runtime read it at start-up ("passive" unless the user set
  /// it; speclab's executable sets it, see cli/main.cpp), with GOMP_SPINCOUNT if set.
  std::string omp_wait_policy;
};

/// Computed once per process.
const MachineIdentity& machine_identity();

/// {"cpu": ..., "build_isa": ..., "cpu_isa": ..., "threads": ..., "omp_wait_policy": ...}: the
/// members every bench's JSON object starts with.
Json machine_json(const MachineIdentity& m);

/// One line for a bench header: "AMD EPYC 9R14 · build avx512-vnni, CPU avx512-vnni · 2 threads
/// · OpenMP wait passive".
std::string machine_line(const MachineIdentity& m);

}  // namespace speclab
