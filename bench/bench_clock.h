#pragma once
// The two clocks the benchmarks time with, in milliseconds, and the best of repeated runs.
#include <time.h>

#include <algorithm>
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

/// The best of `reps` repetitions of `iters` calls of step, per call: wall and CPU time (ms).
struct Best {
  double ms = 1e300, cpu_ms = 1e300;
};
template <class F>
Best time_best(F&& step, int iters, int reps) {
  Best b;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms(), c0 = cpu_ms();
    for (int i = 0; i < iters; ++i) step();
    b.ms = std::min(b.ms, (now_ms() - t0) / iters);
    b.cpu_ms = std::min(b.cpu_ms, (cpu_ms() - c0) / iters);
  }
  return b;
}

}  // namespace bench
