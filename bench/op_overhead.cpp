// The fixed cost of one op: recording it on the tape and replaying it in backward, on a tensor
// so tiny (4 floats) that the arithmetic is free. bench/op_overhead.py runs the same chain in
// PyTorch eager; bench/run_overhead.sh runs both and prints the ratio.
//
// The chain: y ← tanh(y * w + b), N times (3 ops per step), then loss = sum(y).
// Workloads, each reported in ns per op (best of R repetitions):
//   forward       recording the chain (grad mode on, x requires grad)
//   backward      loss.backward() through it
//   step          forward + backward + freeing the graph: what a training step pays
//   forward_nograd  the same chain under NoGradGuard (no tape)
//
// Times are the process's CPU time (CLOCK_PROCESS_CPUTIME_ID, as Python's process_time_ns),
// so that other jobs on a shared machine do not count; on an idle machine it equals wall time.
//
// Usage: op_overhead [N = 10000] [R = 15]. Output: one "name ns_per_op" line per workload.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <tapegrad/tapegrad.h>

namespace {
double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e9 * static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 10000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  const double ops = 3.0 * static_cast<double>(n);
  tg::manual_seed(0);
  const tg::Tensor x = tg::randn({4}, true);
  const tg::Tensor w = tg::full({4}, 0.9f, true);
  const tg::Tensor b = tg::full({4}, 0.1f, true);

  double best_fwd = 1e300, best_bwd = 1e300, best_step = 1e300, best_nograd = 1e300;
  float checksum = 0;
  for (int r = 0; r < reps; ++r) {
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
    const double t0 = now_ns();
    tg::Tensor y = x;
    for (long i = 0; i < n; ++i) y = tg::tanh(y * w + b);
    tg::Tensor loss = tg::sum(y);
    const double t1 = now_ns();
    loss.backward();
    const double t2 = now_ns();
    checksum += x.grad().data()[0];
    y = loss = tg::Tensor();  // frees the graph
    const double t3 = now_ns();
    best_fwd = std::min(best_fwd, t1 - t0);
    best_bwd = std::min(best_bwd, t2 - t1);
    best_step = std::min(best_step, t3 - t0);

    tg::NoGradGuard no_grad;
    const double t4 = now_ns();
    tg::Tensor z = x;
    for (long i = 0; i < n; ++i) z = tg::tanh(z * w + b);
    best_nograd = std::min(best_nograd, now_ns() - t4);
    checksum += z.data()[0];
  }
  std::printf("forward %.1f\n", best_fwd / ops);
  std::printf("backward %.1f\n", best_bwd / ops);
  std::printf("step %.1f\n", best_step / ops);
  std::printf("forward_nograd %.1f\n", best_nograd / ops);
  std::fprintf(stderr, "op_overhead: N=%ld R=%d checksum %g; %s\n", n, reps, checksum,
               tg::device_status().c_str());
  return 0;
}
