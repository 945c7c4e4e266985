#pragma once
// The two clocks the benchmarks time with, in milliseconds.
#include <time.h>

#include <chrono>

namespace bench {

/// Wall time (a monotonic clock).
inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

/// This process's CPU time (all threads): insensitive to other jobs on a busy machine; equal
/// to wall time when one thread works and the machine is idle.
inline double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

}  // namespace bench
