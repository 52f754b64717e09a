// Memory read bandwidth (see membw.hpp).
#include "core/probe/membw.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace speclab {

BandwidthMeasurement measure_read_bandwidth(int64_t bytes, int repeats, int threads) {
  if (threads <= 0) threads = omp_get_max_threads();
  const int64_t n = bytes / static_cast<int64_t>(sizeof(uint32_t));
  std::vector<uint32_t> buffer(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    buffer[i] = static_cast<uint32_t>(i);  // first touch, on the thread that reads it
  double best = 0.0;
  volatile uint32_t sink = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    uint32_t total = 0;  // integer sum: vectorises, so the loop is bound by memory
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += buffer[i];
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    sink = sink + total;
    best = std::max(best, static_cast<double>(n * sizeof(uint32_t)) / seconds / 1e9);
  }
  return {best, threads, n * static_cast<int64_t>(sizeof(uint32_t))};
}

}  // namespace speclab
