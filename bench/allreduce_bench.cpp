// Allreduce bandwidth of tg::distributed::allreduce (MPI_Allreduce, sum, in place) for float
// buffers from 1 KiB to 16 MiB. Run under mpirun:
//
//   mpirun -np 2 build/bench/allreduce_bench [--min-ms 100]
//   mpirun -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo build/bench/allreduce_bench
//
// For each size: 5 warm-up calls, then calls for about 5 x --min-ms, each timed on its own;
// printed are the minimum, median and mean time per call (each the slowest rank's). The
// minimum is the transport with both ranks running; median and mean include the time a rank
// waits while the OS runs something else. Bandwidths (GB/s) as NCCL's tests define them:
//   algbw = bytes / time            busbw = algbw * 2 (W - 1) / W
// busbw is what each link carries in a ring allreduce, comparable across world sizes.
//
// Built without MPI (no tapegrad::distributed), it only says so.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef TAPEGRAD_HAS_DISTRIBUTED
#include <tapegrad/distributed.h>

#include "bench_clock.h"

namespace dist = tg::distributed;

namespace {

using bench::now_ms;

/// The slowest rank's value.
double max_over_ranks(double v) {
  // allreduce is a sum: gather by placing each rank's value in its own slot.
  std::vector<float> all(static_cast<size_t>(dist::world_size()), 0.0f);
  all[static_cast<size_t>(dist::rank())] = static_cast<float>(v);
  dist::allreduce(all.data(), static_cast<int64_t>(all.size()));
  return *std::max_element(all.begin(), all.end());
}

}  // namespace

int main(int argc, char** argv) {
  dist::Guard mpi(argc, argv);
  double min_ms = 100;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--min-ms") && i + 1 < argc) min_ms = std::atof(argv[++i]);
  const int w = dist::world_size();
  if (dist::rank() == 0) {
    std::printf("allreduce_bench: %d ranks on %s%s\n", w, dist::processor_name().c_str(),
                w == 1 ? " (one rank: nothing crosses a process boundary)" : "");
    std::printf("%10s %8s %10s %10s %10s %10s %10s\n", "bytes", "calls", "min_us", "median_us",
                "mean_us", "busbw_min", "busbw_med");
  }
  for (int64_t bytes = 1024; bytes <= (16 << 20); bytes *= 4) {
    const int64_t n = bytes / 4;
    std::vector<float> buf(static_cast<size_t>(n), 1.0f);
    for (int i = 0; i < 5; ++i) dist::allreduce(buf.data(), n);
    // Calls per batch: enough for min_ms, from the slowest rank's rate over ~20 ms of calls.
    dist::barrier();
    double t0 = now_ms();
    int probe = 0;
    float stop = 0;
    while (stop == 0) {  // every rank makes the same number of calls: rank 0 decides when to stop
      dist::allreduce(buf.data(), n);
      ++probe;
      stop = dist::rank() == 0 && now_ms() - t0 > 20 ? 1.0f : 0.0f;
      dist::broadcast(&stop, 1);
    }
    const double one = max_over_ranks((now_ms() - t0) / probe);
    float calls_f = static_cast<float>(std::clamp(min_ms / std::max(one, 1e-3), 3.0, 1e5));
    dist::broadcast(&calls_f, 1);
    const int calls = static_cast<int>(calls_f) * 5;
    // Each call timed on its own, after one barrier; per rank the minimum, median and mean.
    std::fill(buf.begin(), buf.end(), 0.0f);  // sums stay finite
    std::vector<double> per_call(static_cast<size_t>(calls));
    dist::barrier();
    for (int c = 0; c < calls; ++c) {
      t0 = now_ms();
      dist::allreduce(buf.data(), n);
      per_call[static_cast<size_t>(c)] = now_ms() - t0;
    }
    double mean = 0;
    for (double t : per_call) mean += t / calls;
    std::sort(per_call.begin(), per_call.end());
    // The slowest rank's figure of each kind.
    const double least = max_over_ranks(per_call.front()), median = max_over_ranks(per_call[per_call.size() / 2]);
    mean = max_over_ranks(mean);
    auto busbw = [&](double ms) { return bytes / (ms * 1e-3) * 2.0 * (w - 1) / w / 1e9; };
    if (dist::rank() == 0)
      std::printf("%10lld %8d %10.1f %10.1f %10.1f %10.2f %10.2f\n", static_cast<long long>(bytes),
                  calls, least * 1e3, median * 1e3, mean * 1e3, busbw(least), busbw(median));
  }
  return 0;
}

#else
int main() {
  std::printf("allreduce_bench: built without MPI (tapegrad::distributed was not found at "
              "configure time); install libopenmpi-dev and reconfigure\n");
  return 0;
}
#endif
