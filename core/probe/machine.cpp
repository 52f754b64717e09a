// This machine's identity (see machine.hpp).
#include "core/probe/machine.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <fstream>
#include <string_view>

#include "core/io/json.hpp"

namespace speclab {
namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

// The macros the compiler defines for the -march this translation unit is built with; core is
// built with one -march throughout, so this is the build's.
constexpr std::string_view build_isa_name() {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  return "avx512-vnni";
#elif defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__)
  return "avx2";
#else
  return "x86-64";
#endif
}

std::string cpu_isa_name() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    return __builtin_cpu_supports("avx512vnni") ? "avx512-vnni" : "avx512";
  }
  if (__builtin_cpu_supports("avx2")) return "avx2";
  return "x86-64";
#else
  return "unknown";
#endif
}

std::string wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::string text = policy != nullptr ? policy : "default";
  if (spin != nullptr) text += fmt::format(" (GOMP_SPINCOUNT={})", spin);
  return text;
}

}  // namespace

const MachineIdentity& machine_identity() {
  static const MachineIdentity identity{.cpu_model = read_cpu_model(),
                                        .build_isa = std::string(build_isa_name()),
                                        .cpu_isa = cpu_isa_name(),
                                        .threads = omp_get_max_threads(),
                                        .omp_wait_policy = wait_policy()};
  return identity;
}

Json machine_json(const MachineIdentity& m) {
  return {{"cpu", m.cpu_model},
          {"build_isa", m.build_isa},
          {"cpu_isa", m.cpu_isa},
          {"threads", m.threads},
          {"omp_wait_policy", m.omp_wait_policy}};
}

std::string machine_line(const MachineIdentity& m) {
  return fmt::format("{} · build {}, CPU {} · {} thread{} · OpenMP wait {}", m.cpu_model,
                     m.build_isa, m.cpu_isa, m.threads, m.threads == 1 ? "" : "s",
                     m.omp_wait_policy);
}

}  // namespace speclab
