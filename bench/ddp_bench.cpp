// Step time of data-parallel training on the W3 workload (bench/workloads.cpp): a GPT-style
// LM, vocab 65, d_model 128, 4 heads, 2 pre-LN blocks, d_ff 512, T = 64, AdamW lr 3e-4, a
// global batch of 16 sequences split over the ranks.
//
//   build/bench/ddp_bench                  # 1 process, batch 16
//   mpirun -np 2 build/bench/ddp_bench     # 2 ranks, batch 8 each
//   ddp_bench [--threads N] [--batch B] [--steps S] [--warmup W] [--reps R] [--bucket-mb M]
//
// --threads: OpenBLAS threads per process (tg::set_num_threads), 1 by default.
//
// A step: zero_grad, forward, loss, backward, a barrier (wait: time spent waiting for the
// slowest rank to finish its backward), sync_gradients (sync: the transfer; a no-op with one
// rank), AdamW step. W warm-up steps, then R repetitions of S steps, each started after a
// barrier. Printed: ms_per_step_best_rep, the best repetition's wall time per step (slowest
// rank); the minimum, median and mean over all timed steps of step, wait and sync (each step's
// slowest rank: a rank descheduled by the OS for a few ms shows in the mean, not the median;
// the minimum is the closest to an idle machine); compute_cpu, the CPU time of forward,
// backward and optimizer step (the work, whatever else the machine runs); the
// gradient bytes each sync moves; the mean loss over the ranks (a checksum, equal for any
// number of ranks); raw_allreduce, the same bytes allreduced back to back outside the steps
// (the transfer alone; best and median of 5 x 10 calls).
//
// Built without MPI (no tapegrad::distributed), it only says so.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#ifdef TAPEGRAD_HAS_DISTRIBUTED
#include <tapegrad/distributed.h>
#include <tapegrad/tapegrad.h>

#include "bench_clock.h"
#include "tiny_gpt.h"

namespace dist = tg::distributed;
namespace nn = tg::nn;
using tg::Tensor;

namespace {

using bench::now_ms;

/// CPU time of this thread: unlike wall time, not inflated while the OS runs other processes.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double max_over_ranks(double v) {
  std::vector<float> all(static_cast<size_t>(dist::world_size()), 0.0f);
  all[static_cast<size_t>(dist::rank())] = static_cast<float>(v);
  dist::allreduce(all.data(), static_cast<int64_t>(all.size()));
  return *std::max_element(all.begin(), all.end());
}

}  // namespace

int main(int argc, char** argv) {
  dist::Guard mpi(argc, argv);
  const int r = dist::rank(), w = dist::world_size();
  constexpr int64_t V = 65, C = 128, NH = 4, L = 2, F = 512, T = 64, GLOBAL_B = 16;
  int64_t B = GLOBAL_B / w;
  int steps = 10, warmup = 3, reps = 5, threads = 1;
  double bucket_mb = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--batch") B = std::atoll(v);
    else if (k == "--steps") steps = std::atoi(v);
    else if (k == "--warmup") warmup = std::atoi(v);
    else if (k == "--reps") reps = std::atoi(v);
    else if (k == "--bucket-mb") bucket_mb = std::atof(v);
    else if (k == "--threads") threads = std::atoi(v);
    else {
      if (r == 0) std::fprintf(stderr, "ddp_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }

  tg::set_num_threads(threads);
  tg::manual_seed(1);
  auto model = std::make_shared<bench::TinyGPT>(V, T, C, NH, L, F);
  dist::DistributedDataParallel ddp(
      model, dist::DDPOptions().bucket_bytes(static_cast<int64_t>(bucket_mb * (1 << 20))));
  tg::optim::AdamW opt(model->parameters(), tg::optim::AdamWOptions(3e-4));
  // One fixed global batch (the same on every rank); rank r trains on rows r*B .. r*B+B-1.
  tg::Generator gen(7);
  std::vector<int64_t> ids_all(GLOBAL_B * T), tgt_all(GLOBAL_B * T);
  for (auto& x : ids_all) x = static_cast<int64_t>(gen.below(V));
  for (auto& x : tgt_all) x = static_cast<int64_t>(gen.below(V));
  const int64_t first = (r * B) % GLOBAL_B;
  std::vector<int64_t> ids_v, tgt_v;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t row = (first + i) % GLOBAL_B;
    ids_v.insert(ids_v.end(), ids_all.begin() + row * T, ids_all.begin() + (row + 1) * T);
    tgt_v.insert(tgt_v.end(), tgt_all.begin() + row * T, tgt_all.begin() + (row + 1) * T);
  }
  const tg::Indices ids(ids_v, {B, T}), targets(tgt_v, {B * T});

  double wait_ms = 0, sync_ms = 0, compute_cpu = 0, loss = 0;  // of the last step
  auto step = [&] {
    const double c0 = cpu_ms();
    opt.zero_grad();
    Tensor logits = model->forward(ids);  // (B, T, V)
    Tensor l = tg::cross_entropy(tg::reshape(logits, {B * T, V}), targets);
    l.backward();
    const double c1 = cpu_ms();
    const double t0 = now_ms();
    if (w > 1) dist::barrier();  // waiting for the slowest rank, timed apart from the transfer
    const double t1 = now_ms();
    ddp.sync_gradients();
    wait_ms = t1 - t0;
    sync_ms = now_ms() - t1;
    const double c2 = cpu_ms();
    opt.step();
    loss = l.item();
    compute_cpu = (c1 - c0) + (cpu_ms() - c2);  // forward, backward, optimizer: no MPI
  };
  for (int i = 0; i < warmup; ++i) step();
  // Each timed step: its wall time, wait and sync on every rank (slots [rank][step]).
  const int n = reps * steps;
  std::vector<float> step_t(static_cast<size_t>(n) * w), wait_t(step_t.size()), sync_t(step_t.size()),
      cpu_t(step_t.size());
  std::vector<double> rep_ms;  // wall time per step of each repetition, slowest rank
  for (int rep = 0; rep < reps; ++rep) {
    dist::barrier();
    const double start = now_ms();
    for (int i = 0; i < steps; ++i) {
      const double t0 = now_ms();
      step();
      const size_t k = static_cast<size_t>(r) * n + rep * steps + i;
      step_t[k] = static_cast<float>(now_ms() - t0);
      wait_t[k] = static_cast<float>(wait_ms);
      sync_t[k] = static_cast<float>(sync_ms);
      cpu_t[k] = static_cast<float>(compute_cpu);
    }
    rep_ms.push_back(max_over_ranks((now_ms() - start) / steps));
  }
  // Per step, the slowest rank; then the median and mean over the steps.
  auto summarize = [&](std::vector<float>& t, double& least, double& median, double& mean) {
    dist::allreduce(t.data(), static_cast<int64_t>(t.size()));  // gathers: other slots are 0
    std::vector<double> worst(static_cast<size_t>(n), 0.0);
    for (int q = 0; q < w; ++q)
      for (int k = 0; k < n; ++k) worst[k] = std::max<double>(worst[k], t[static_cast<size_t>(q) * n + k]);
    mean = 0;
    for (double x : worst) mean += x / n;
    std::sort(worst.begin(), worst.end());
    least = worst.front();
    median = worst[worst.size() / 2];
  };
  double step_min, step_med, step_mean, wait_min, wait_med, wait_mean, sync_min, sync_med, sync_mean,
      cpu_min, cpu_med, cpu_mean;
  summarize(step_t, step_min, step_med, step_mean);
  summarize(wait_t, wait_min, wait_med, wait_mean);
  summarize(sync_t, sync_min, sync_med, sync_mean);
  summarize(cpu_t, cpu_min, cpu_med, cpu_mean);
  std::sort(rep_ms.begin(), rep_ms.end());

  // The same bytes allreduced back to back, outside any step: the transfer alone.
  int64_t grad_floats = 0;
  for (const auto& [name, p] : ddp.parameters()) grad_floats += p.numel();
  std::vector<float> raw(static_cast<size_t>(grad_floats), 0.0f);
  std::vector<double> raw_ms;
  for (int rep = 0; rep < 5; ++rep) {
    dist::barrier();
    const double t0 = now_ms();
    for (int i = 0; i < 10; ++i) dist::allreduce(raw.data(), grad_floats);
    raw_ms.push_back(max_over_ranks((now_ms() - t0) / 10));
  }
  std::sort(raw_ms.begin(), raw_ms.end());
  const double mean_loss = dist::allreduce(loss, dist::ReduceOp::Average);
  if (r == 0) {
    std::printf("blas_core %s\n", tg::blas_kernel().c_str());
    std::printf("ranks %d\nbatch_per_rank %lld\nglobal_batch %lld\nthreads_per_rank %d\n", w,
                static_cast<long long>(B), static_cast<long long>(B * w), tg::get_num_threads());
    std::printf("buckets %zu\nsync_bytes %lld\nloss %.5f\n", ddp.buckets().size(),
                static_cast<long long>(grad_floats * 4), mean_loss);
    std::printf("ms_per_step_best_rep %.2f\nstep_ms_min %.2f\nstep_ms_median %.2f\nstep_ms_mean %.2f\n",
                rep_ms.front(), step_min, step_med, step_mean);
    std::printf("wait_ms_min %.3f\nwait_ms_median %.3f\nwait_ms_mean %.3f\n", wait_min, wait_med, wait_mean);
    std::printf("sync_ms_min %.3f\nsync_ms_median %.3f\nsync_ms_mean %.3f\n", sync_min, sync_med, sync_mean);
    std::printf("compute_cpu_ms_min %.2f\ncompute_cpu_ms_median %.2f\n", cpu_min, cpu_med);
    std::printf("raw_allreduce_ms %.3f\nraw_allreduce_median_ms %.3f\n", raw_ms.front(),
                raw_ms[raw_ms.size() / 2]);
  }
  return 0;
}

#else
int main() {
  std::printf("ddp_bench: built without MPI (tapegrad::distributed was not found at configure "
              "time); install libopenmpi-dev and reconfigure\n");
  return 0;
}
#endif
