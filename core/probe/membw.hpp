// Memory read bandwidth of this machine, measured in the same run as a benchmark so that a
// kernel's time can be printed beside its floor (bytes it must read ÷ bandwidth).
#pragma once

#include <cstdint>

namespace speclab {

struct BandwidthMeasurement {
  double read_gbps = 0.0;  ///< best of the repeats, 1e9 bytes per second
  int threads = 1;
  int64_t bytes = 0;  ///< size of the buffer streamed per repeat
};

/// Streams a buffer of `bytes` (far larger than the last-level cache) `repeats` times with
/// `threads` threads (0 = all cores), summing it so the reads cannot be elided.
BandwidthMeasurement measure_read_bandwidth(int64_t bytes = int64_t{512} << 20, int repeats = 5,
                                            int threads = 0);

}  // namespace speclab
