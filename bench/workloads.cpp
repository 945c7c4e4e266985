// The training workloads of the README's benchmark table, through tapegrad. bench/workloads.py
// is the PyTorch twin (the same models, shapes, optimizers and step counts);
// bench/run_benchmarks.sh runs both, interleaved, and prints the table.
//
//   workloads <w1|w2b1|w2b32|w3|w4|w5|info> [--threads N] [--steps S] [--warmup W] [--reps R]
//             [--attention fused|reference]
//
// --threads N calls tg::set_num_threads(N) (tapegrad's own threads, OpenBLAS single-threaded);
// --threads 0 leaves the products to OpenBLAS's own threads (OPENBLAS_NUM_THREADS).
// --attention reference runs causal attention (W3, W5) through the reference kernel instead of
// the fused causal one (lib/src/ops/attention.h): before/after in one binary.
//
//   w1     MLP 784-256-256-10, ReLU, batch 64, cross-entropy, SGD lr 0.01 momentum 0.9
//   w2b1   Elman char-RNN 57→128→18, T = 12 one-hot steps, h_t = tanh(i2h(x_t) + h2h(h_t-1)),
//   w2b32  log_softmax(h2o(h_T)) + NLL, Adam lr 1e-3; batch 1 and batch 32
//   w3     GPT-style LM: vocab 65, d_model 128, 4 heads, 2 pre-LN blocks, d_ff 512, GELU,
//          T = 64, batch 16, token + position embeddings, causal, final LayerNorm, Linear
//          head, cross-entropy over every position, AdamW lr 3e-4 (weight decay 0.01)
//   w5     the same GPT-style LM, larger: d_model 384, 6 heads, 4 pre-LN blocks, d_ff 1536,
//          T = 128, batch 8 (vocab 65, AdamW lr 3e-4 as W3)
//   w4     Linear 1024→1024 (bias) at batch 256, forward and backward (dx, dW, db) with an
//          upstream gradient of ones; no optimizer. Also times the three products through
//          raw sgemm calls (same shapes and transposes, straight into the OpenBLAS that
//          tapegrad loaded, so the same kernels) and prints both GFLOP/s.
//
// A step is zero_grad (in place), forward, loss, backward, optimizer step (w4: forward and
// backward, gradients set to none). The data is one fixed random batch. W warm-up steps are
// not timed; then R repetitions of S steps; the best repetition counts, by wall clock and by
// process CPU time.
//
// Output, one "key value" per line (bench/workloads_report.py reads it):
//   threads, blas_core (the OpenBLAS kernels that ran), blas (how they were chosen), ms_per_step (best, wall), ms_median, cpu_ms_per_step (best), loss (a checksum),
//   faults_per_step (minor page faults during the timed steps), peak_rss_kb (VmHWM), rss_kb
//   (VmRSS at exit),
//   hwm_growth_kb (VmHWM after the timed steps minus VmHWM after warm-up), live_heap_kb (bytes malloc has
//   handed out, between steps) and live_heap_growth_kb (its change since the warm-up: 0 when
//   each step frees everything it allocated, saved activations included),
//   w4 only: gflops, raw_ms, raw_cpu_ms, raw_gflops (GFLOP/s from wall times);
//   the GEMM floor (below): floor_ms, floor_cpu_ms (best of the replays, wall and CPU),
//   floor_gflop (the flops of one step's products, in GFLOP), floor_products, floor_concurrent
//   (how many of them were made inside parallel parts), floor_buffers_mib (the replay's operands), floor_replay (how the products were replayed), floor_x and floor_cpu_x (the step's time ÷ the floor's).
//
// The GEMM floor: after the timed steps, one more step runs with the gemm trace on
// (lib/src/backend/gemm_trace.h), which records every product it makes; those products are
// then replayed, alone, on buffers allocated once and laid out as the step's memory was (the
// address ranges its products touched, overlaps merged: an operand read twice in the step is
// one buffer in the replay), and timed like the steps (W warm-up replays, then R
// repetitions of S, the best counts). How they replay follows the step's threads:
//   --threads 1  each product is one raw OpenBLAS call on one thread (sgemm; sgemv for a
//                single row or column, as tapegrad's GEMM does);
//   --threads 0  the same calls, on OpenBLAS's own threads;
//   --threads N  (tapegrad's own N threads, OpenBLAS at 1) each product through tapegrad's
//                CPU GEMM with the trace off, i.e. split across the N threads exactly as in
//                the step (each part one raw single-threaded OpenBLAS call); products that the
//                step made concurrently, inside parallel parts (the fused attention's heads),
//                replay concurrently, each thread's products on one thread again.
// W4's floor is its raw column (with tapegrad's own N >= 2 threads, where the raw column runs
// on one thread, the replay above). peak_rss_kb and rss_kb are read before the floor's buffers
// exist. `workloads info` prints the OpenBLAS lines and exits.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

#include "bench_clock.h"

// For W4's "raw" column the bench calls OpenBLAS itself, as a ceiling: the library tapegrad
// loaded at run time, with the kernels it chose (lib/src/backend/openblas.h). Linking
// OpenBLAS here would load it before tapegrad could choose.
#include "backend/gemm.h"
#include "backend/gemm_trace.h"
#include "backend/openblas.h"
#include "backend/thread_pool.h"
#include "ops/attention.h"  // detail::ReferenceAttentionScope

#include "tiny_gpt.h"

namespace nn = tg::nn;
using tg::Tensor;

namespace {

// ---- measurement ----------------------------------------------------------------------------

using bench::cpu_ms;
using bench::now_ms;

/// A field of /proc/self/status in kB (VmHWM = peak RSS, VmRSS = current).
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::atol(line.c_str() + n + 1);
  return -1;
}

/// Bytes malloc has handed out and not taken back (heap and mmapped blocks), in kB.
long live_heap_kb() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<long>((mi.uordblks + mi.hblkhd) / 1024);
}

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

bool g_own_threads = false;  // tg::set_num_threads was called (--threads N >= 1)

struct Args {
  std::string workload;
  int threads = 1;
  int steps = 0, warmup = -1, reps = 0;  // 0 / -1: the workload's default
  bool reference_attention = false;
};

/// The step's products replayed alone (see the top of the file).
struct Floor {
  double ms = 0, cpu_ms = 0, gflop = 0;
  size_t products = 0, concurrent = 0;
  double mib = 0;  // the replay's buffers
  std::string replay;
};

struct Timing {
  double best = 1e300, median = 0, cpu_best = 1e300;
  double faults_per_step = 0;
  long hwm_after_warmup = 0;
  long live_after_warmup = 0, live_at_end = 0;  // live heap between steps
  long peak_rss_kb = 0, rss_kb = 0;              // before the floor's buffers
  Floor floor;
};

Timing time_steps(const std::function<void()>& step, int steps, int warmup, int reps,
                  bool with_floor = true);

// ---- the GEMM floor --------------------------------------------------------------------------

/// The products of one trace, on buffers laid out as the step's memory was: the address
/// ranges the products touched in the step, overlapping ranges merged into one region (a
/// weight read by the forward and the backward, q, k and v inside one packed buffer, a block
/// the allocator handed out again), each region allocated once.
class Replay {
 public:
  explicit Replay(std::vector<tg::gemm::Call> calls) {
    for (const tg::gemm::Call& c : calls)  // an empty product has no flops and maybe no operands
      if (c.M > 0 && c.N > 0 && c.K > 0 && c.batch > 0) calls_.push_back(c);
    struct Range {
      uintptr_t lo, hi;  // bytes [lo, hi)
    };
    auto range = [](const void* p, int64_t rows, int64_t ld, int64_t stride, int64_t batch) {
      const int64_t span = std::max<int64_t>(0, batch - 1) * stride;  // elements
      const uintptr_t base = reinterpret_cast<uintptr_t>(p);
      return Range{base + static_cast<uintptr_t>(std::min<int64_t>(0, span) * 4),
                   base + static_cast<uintptr_t>((std::max<int64_t>(0, span) + rows * ld) * 4)};
    };
    std::vector<Range> ranges;
    for (const tg::gemm::Call& c : calls_) {
      ranges.push_back(range(c.a, c.trans_a ? c.K : c.M, c.lda, c.stride_a, c.batch));
      ranges.push_back(range(c.b, c.trans_b ? c.N : c.K, c.ldb, c.stride_b, c.batch));
      ranges.push_back(range(c.c, c.M, c.ldc, c.stride_c, c.batch));
    }
    std::sort(ranges.begin(), ranges.end(), [](Range x, Range y) { return x.lo < y.lo; });
    std::vector<size_t> region_at;  // offset (floats) of each merged region in memory_
    size_t used = 0;
    std::vector<Range> regions;
    for (const Range& r : ranges) {
      if (!regions.empty() && r.lo <= regions.back().hi) {
        regions.back().hi = std::max(regions.back().hi, r.hi);
        continue;
      }
      regions.push_back(r);
    }
    for (const Range& r : regions) {
      region_at.push_back(used);
      used += ((r.hi - r.lo) / 4 + 15) / 16 * 16;  // each region on 64 bytes
    }
    memory_.resize(used);
    auto where = [&](const void* p) {  // p's place in memory_
      const uintptr_t u = reinterpret_cast<uintptr_t>(p);
      const size_t i = static_cast<size_t>(
          std::upper_bound(regions.begin(), regions.end(), u,
                           [](uintptr_t v, const Range& r) { return v < r.lo; }) -
          regions.begin() - 1);
      return region_at[i] + (u - regions[i].lo) / 4;
    };
    for (const tg::gemm::Call& c : calls_) ops_.push_back({where(c.a), where(c.b), where(c.c)});
    uint32_t x = 12345;  // values in [-1, 1): no denormals, no growth to inf
    for (float& v : memory_) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
    }
  }

  double gflop() const {
    double f = 0;
    for (const tg::gemm::Call& c : calls_) f += c.flops();
    return f / 1e9;
  }
  size_t size() const { return calls_.size(); }
  /// How many were made inside parallel parts.
  size_t concurrent() const {
    return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(),
                                             [](const tg::gemm::Call& c) { return c.concurrent; }));
  }
  /// The buffers' size in MiB.
  double mib() const { return static_cast<double>(memory_.size()) * 4 / (1 << 20); }

  /// Every product once, in order. own_threads: through tapegrad's CPU GEMM (its split), and
  /// runs of concurrent products spread over the threads; else raw OpenBLAS calls.
  void run(bool own_threads) {
    for (size_t i = 0; i < calls_.size();) {
      if (!own_threads || !calls_[i].concurrent) {
        product(i, own_threads);
        ++i;
        continue;
      }
      // A run of products made in parallel parts: each thread's products, in order, on one
      // thread again (their scratch buffers were that thread's own).
      size_t end = i;
      std::vector<int> threads;  // the step's threads in this run
      for (; end < calls_.size() && calls_[end].concurrent; ++end)
        if (std::find(threads.begin(), threads.end(), calls_[end].thread) == threads.end())
          threads.push_back(calls_[end].thread);
      tg::detail::parallel_for(static_cast<int>(threads.size()), [&](int p) {
        for (size_t j = i; j < end; ++j)
          if (calls_[j].thread == threads[static_cast<size_t>(p)]) product(j, true);
      });
      i = end;
    }
  }

 private:
  struct Operands {
    size_t a = 0, b = 0, c = 0;  // the operands' offsets in memory_
  };

  void product(size_t i, bool own_threads) {
    const tg::gemm::Call& c = calls_[i];
    float* A = memory_.data() + ops_[i].a;
    float* B = memory_.data() + ops_[i].b;
    float* C = memory_.data() + ops_[i].c;
    if (own_threads) {
      tg::gemm::cpu_gemm_strided_batched(c.trans_a, c.trans_b, c.M, c.N, c.K, c.alpha, A,
                                         c.lda, c.stride_a, B, c.ldb, c.stride_b, c.beta, C,
                                         c.ldc, c.stride_c, c.batch);
      return;
    }
    const tg::blas::Library& blas = tg::blas::library();
    const int M = static_cast<int>(c.M), N = static_cast<int>(c.N), K = static_cast<int>(c.K);
    for (int64_t b = 0; b < c.batch; ++b) {
      const float* a = A + b * c.stride_a;
      const float* bb = B + b * c.stride_b;
      float* cc = C + b * c.stride_c;
      const int lda = static_cast<int>(c.lda), ldb = static_cast<int>(c.ldb);
      if (M == 1)  // cᵀ = op(B)ᵀ aᵀ: sgemv, as tapegrad's GEMM does
        blas.sgemv(!c.trans_b, c.trans_b ? N : K, c.trans_b ? K : N, c.alpha, bb, ldb, a,
                   c.trans_a ? lda : 1, c.beta, cc, 1);
      else if (N == 1)  // c = op(A) b
        blas.sgemv(c.trans_a, c.trans_a ? K : M, c.trans_a ? M : K, c.alpha, a, lda, bb,
                   c.trans_b ? 1 : ldb, c.beta, cc, static_cast<int>(c.ldc));
      else
        blas.sgemm(c.trans_a, c.trans_b, M, N, K, c.alpha, a, lda, bb, ldb, c.beta, cc,
                   static_cast<int>(c.ldc));
    }
  }

  std::vector<tg::gemm::Call> calls_;
  std::vector<Operands> ops_;
  std::vector<float> memory_;
};

/// Records the products of one `step`, then times their replay as time_steps times steps.
Floor gemm_floor(const std::function<void()>& step, int steps, int warmup, int reps) {
  tg::gemm::trace_start();
  step();
  Replay replay(tg::gemm::trace_stop());
  // tapegrad's own threads: tg::set_num_threads(n >= 2) was called (OpenBLAS then runs at 1).
  const int threads = tg::get_num_threads();
  const bool own = g_own_threads && threads >= 2;
  Floor f;
  f.gflop = replay.gflop();
  f.products = replay.size();
  f.concurrent = replay.concurrent();
  f.mib = replay.mib();
  if (own)
    f.replay = "tapegrad's split over its " + std::to_string(threads) +
               " threads (parts: raw 1-thread OpenBLAS calls), concurrent products concurrently";
  else
    f.replay = "raw OpenBLAS calls (sgemm; sgemv for one row/column) on " +
               std::to_string(threads) + (g_own_threads ? " thread" : " OpenBLAS thread(s)");
  const Timing t = time_steps([&] { replay.run(own); }, steps, std::max(1, warmup), reps,
                              /*with_floor=*/false);
  f.ms = t.best;
  f.cpu_ms = t.cpu_best;
  return f;
}

/// W warm-up calls, then R repetitions of S calls of `step`; wall time per call. Then, with
/// with_floor, the GEMM floor of one more call.
Timing time_steps(const std::function<void()>& step, int steps, int warmup, int reps,
                  bool with_floor) {
  for (int i = 0; i < warmup; ++i) step();
  Timing t;
  t.hwm_after_warmup = status_kb("VmHWM");
  t.live_after_warmup = live_heap_kb();
  std::vector<double> per_rep;
  const long f0 = minor_faults();
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms(), c0 = cpu_ms();
    for (int i = 0; i < steps; ++i) step();
    per_rep.push_back((now_ms() - t0) / steps);
    t.cpu_best = std::min(t.cpu_best, (cpu_ms() - c0) / steps);
  }
  t.faults_per_step = static_cast<double>(minor_faults() - f0) / (static_cast<double>(steps) * reps);
  t.live_at_end = live_heap_kb();
  std::sort(per_rep.begin(), per_rep.end());
  t.best = per_rep.front();
  t.median = per_rep[per_rep.size() / 2];
  t.peak_rss_kb = status_kb("VmHWM");
  t.rss_kb = status_kb("VmRSS");
  if (with_floor) t.floor = gemm_floor(step, steps, warmup, reps);
  return t;
}

/// A fixed random batch: standard normal values, or uniform class ids in [0, k).
Tensor normal_batch(const tg::Shape& shape) { return tg::randn(shape); }
tg::Indices class_ids(int64_t n, int64_t k, tg::Shape shape) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& c : v) c = static_cast<int64_t>(tg::default_generator().below(static_cast<uint64_t>(k)));
  return tg::Indices(std::move(v), std::move(shape));
}

void print_timing(const Timing& t, float loss) {
  std::printf("ms_per_step %.4f\nms_median %.4f\ncpu_ms_per_step %.4f\nloss %.6g\n", t.best,
              t.median, t.cpu_best, loss);
  std::printf("faults_per_step %.1f\n", t.faults_per_step);
  // Both ends before the floor's replay, whose buffers (a step's operands) would count too.
  std::printf("hwm_growth_kb %ld\n", t.peak_rss_kb - t.hwm_after_warmup);
  std::printf("live_heap_kb %ld\nlive_heap_growth_kb %ld\n", t.live_at_end,
              t.live_at_end - t.live_after_warmup);
  std::printf("peak_rss_kb %ld\nrss_kb %ld\n", t.peak_rss_kb, t.rss_kb);
  const Floor& f = t.floor;
  std::printf("floor_ms %.4f\nfloor_cpu_ms %.4f\nfloor_gflop %.6f\nfloor_products %zu\n", f.ms,
              f.cpu_ms, f.gflop, f.products);
  std::printf("floor_concurrent %zu\nfloor_buffers_mib %.1f\nfloor_replay %s\n", f.concurrent,
              f.mib, f.replay.c_str());
  std::printf("floor_x %.3f\nfloor_cpu_x %.3f\n", t.best / f.ms, t.cpu_best / f.cpu_ms);
}

// ---- W1: MLP ---------------------------------------------------------------------------------

Timing w1(const Args& a, float& loss_out) {
  auto model = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 10));
  tg::optim::SGD opt(model->parameters(), tg::optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = normal_batch({64, 784});       // (B, 784)
  const tg::Indices y = class_ids(64, 10, {64});  // (B)
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = tg::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    loss_out = loss.item();
  };
  return time_steps(step, a.steps ? a.steps : 200, a.warmup >= 0 ? a.warmup : 20,
                    a.reps ? a.reps : 7);
}

// ---- W2: Elman char-RNN ----------------------------------------------------------------------

Timing w2(const Args& a, int64_t B, float& loss_out) {
  constexpr int64_t V = 57, H = 128, K = 18, T = 12;
  auto cell = std::make_shared<nn::RNNCell>(V, H);  // i2h (H, V), h2h (H, H)
  auto h2o = std::make_shared<nn::Linear>(H, K);
  std::vector<Tensor> params = cell->parameters();
  for (const Tensor& p : h2o->parameters()) params.push_back(p);
  tg::optim::Adam opt(params, tg::optim::AdamOptions(1e-3));
  // x_t: one-hot characters (B, V), prepared once (as the notes' lineToTensor does).
  std::vector<Tensor> xs;
  for (int64_t t = 0; t < T; ++t) {
    const tg::Indices chars = class_ids(B, V, {B});
    Tensor x = tg::zeros({B, V});
    for (int64_t b = 0; b < B; ++b) x.data()(b, chars.values[static_cast<size_t>(b)]) = 1.0f;
    xs.push_back(x);
  }
  const tg::Indices y = class_ids(B, K, {B});
  auto step = [&] {
    opt.zero_grad();
    Tensor h;  // undefined: zeros
    for (int64_t t = 0; t < T; ++t) h = cell->forward(xs[static_cast<size_t>(t)], h);
    Tensor loss = tg::nll_loss(tg::log_softmax(h2o->forward(h), -1), y);
    loss.backward();
    opt.step();
    loss_out = loss.item();
  };
  return time_steps(step, a.steps ? a.steps : (B == 1 ? 300 : 200),
                    a.warmup >= 0 ? a.warmup : 20, a.reps ? a.reps : 7);
}

// ---- W3: GPT-style LM ------------------------------------------------------------------------
// The model is bench::TinyGPT (bench/tiny_gpt.h), shared with the data-parallel benchmark.

/// One AdamW training step of bench::TinyGPT on a fixed random batch, timed.
Timing gpt(const Args& a, float& loss_out, int64_t V, int64_t C, int64_t NH, int64_t L, int64_t F,
           int64_t T, int64_t B, int steps, int warmup, int reps) {
  auto model = std::make_shared<bench::TinyGPT>(V, T, C, NH, L, F);
  tg::optim::AdamW opt(model->parameters(), tg::optim::AdamWOptions(3e-4));
  const tg::Indices ids = class_ids(B * T, V, {B, T});
  const tg::Indices targets = class_ids(B * T, V, {B * T});
  auto step = [&] {
    opt.zero_grad();
    Tensor logits = model->forward(ids);  // (B, T, V)
    Tensor loss = tg::cross_entropy(tg::reshape(logits, {B * T, V}), targets);
    loss.backward();
    opt.step();
    loss_out = loss.item();
  };
  return time_steps(step, a.steps ? a.steps : steps, a.warmup >= 0 ? a.warmup : warmup,
                    a.reps ? a.reps : reps);
}

Timing w3(const Args& a, float& loss_out) {
  return gpt(a, loss_out, /*V=*/65, /*C=*/128, /*NH=*/4, /*L=*/2, /*F=*/512, /*T=*/64, /*B=*/16,
             /*steps=*/10, /*warmup=*/3, /*reps=*/5);
}

// ---- W5: a larger GPT-style LM ---------------------------------------------------------------

Timing w5(const Args& a, float& loss_out) {
  return gpt(a, loss_out, /*V=*/65, /*C=*/384, /*NH=*/6, /*L=*/4, /*F=*/1536, /*T=*/128, /*B=*/8,
             /*steps=*/3, /*warmup=*/1, /*reps=*/5);
}

// ---- W4: one big Linear, and raw sgemm -------------------------------------------------------

Timing w4(const Args& a, float& loss_out, double& raw_ms, double& raw_cpu_ms) {
  constexpr int64_t B = 256, IN = 1024, OUT = 1024;
  auto lin = std::make_shared<nn::Linear>(IN, OUT);
  const Tensor x = tg::randn({B, IN}, /*requires_grad=*/true);
  const Tensor g = tg::ones({B, OUT});
  const int steps = a.steps ? a.steps : 20, warmup = a.warmup >= 0 ? a.warmup : 3,
            reps = a.reps ? a.reps : 5;
  auto step = [&] {
    x.set_grad(Tensor());
    lin->zero_grad(/*set_to_none=*/true);
    Tensor y = lin->forward(x);  // (B, OUT)
    y.backward(g);
    loss_out = lin->weight.grad().data()[0];
  };
  // Raw: y = x Wᵀ, dx = g W, dW = gᵀ x, with buffers allocated once.
  std::vector<float> X(B * IN), W(OUT * IN), G(B * OUT, 1.0f), Y(B * OUT), DX(B * IN), DW(OUT * IN);
  std::copy(x.data().begin(), x.data().end(), X.begin());
  std::copy(lin->weight.data().begin(), lin->weight.data().end(), W.begin());
  const tg::blas::Library& blas = tg::blas::library();
  auto raw = [&] {
    blas.sgemm(false, true, B, OUT, IN, 1.0f, X.data(), IN, W.data(), IN, 0.0f, Y.data(), OUT);
    blas.sgemm(false, false, B, IN, OUT, 1.0f, G.data(), OUT, W.data(), IN, 0.0f, DX.data(), IN);
    blas.sgemm(true, false, OUT, IN, B, 1.0f, G.data(), OUT, X.data(), IN, 0.0f, DW.data(), IN);
  };
  // Interleave the two so that load from other processes hits both alike.
  Timing best;
  raw_ms = raw_cpu_ms = 1e300;
  for (int r = 0; r < reps; ++r) {
    const Timing t = time_steps(step, steps, r == 0 ? warmup : 0, 1, /*with_floor=*/false);
    if (r == 0) {
      best.hwm_after_warmup = t.hwm_after_warmup;
      best.live_after_warmup = t.live_after_warmup;
    }
    best.best = std::min(best.best, t.best);
    best.cpu_best = std::min(best.cpu_best, t.cpu_best);
    best.faults_per_step += t.faults_per_step / reps;
    best.live_at_end = t.live_at_end;
    const Timing tr = time_steps(raw, steps, r == 0 ? warmup : 0, 1, /*with_floor=*/false);
    raw_ms = std::min(raw_ms, tr.best);
    raw_cpu_ms = std::min(raw_cpu_ms, tr.cpu_best);
  }
  best.median = best.best;
  best.peak_rss_kb = status_kb("VmHWM");
  best.rss_kb = status_kb("VmRSS");
  if (g_own_threads && tg::get_num_threads() >= 2) {
    // The raw column runs on OpenBLAS's one thread here, the step on tapegrad's split: the
    // floor replays the step's products as it runs them, like the other workloads'.
    best.floor = gemm_floor(step, steps, warmup, reps);
    return best;
  }
  best.floor.ms = raw_ms;  // the floor is the raw column: the same three products
  best.floor.cpu_ms = raw_cpu_ms;
  best.floor.gflop = 3 * 2.0 * B * IN * OUT / 1e9;
  best.floor.products = 3;
  best.floor.replay = "W4's raw column (3 raw sgemm calls, OpenBLAS's threads as set)";
  return best;
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s <w1|w2b1|w2b32|w3|w4|w5|info> [--threads N] [--steps S] [--warmup W] "
                 "[--reps R] [--attention fused|reference]\n",
                 argv[0]);
    std::exit(2);
  }
  a.workload = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--attention" && (std::string(argv[i + 1]) == "fused" || std::string(argv[i + 1]) == "reference"))
      a.reference_attention = std::string(argv[i + 1]) == "reference";
    else if (k == "--threads") a.threads = v;
    else if (k == "--steps") a.steps = v;
    else if (k == "--warmup") a.warmup = v;
    else if (k == "--reps") a.reps = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  tg::set_device(tg::Device::CPU);
  if (a.threads > 0) tg::set_num_threads(a.threads);  // 0: OpenBLAS's own threads
  g_own_threads = a.threads > 0;
  tg::manual_seed(0);
  std::unique_ptr<tg::detail::ReferenceAttentionScope> reference;
  if (a.reference_attention) reference = std::make_unique<tg::detail::ReferenceAttentionScope>();
  std::printf("attention %s\n", a.reference_attention ? "reference" : "fused");
  std::printf("threads %d\nblas_core %s\nblas %s\n", tg::get_num_threads(),
              tg::blas_kernel().c_str(),
              tg::blas::summary(tg::blas::library().status()).c_str());
  if (a.workload == "info") return 0;
  float loss = 0;
  Timing t;
  if (a.workload == "w1") {
    t = w1(a, loss);
  } else if (a.workload == "w2b1") {
    t = w2(a, 1, loss);
  } else if (a.workload == "w2b32") {
    t = w2(a, 32, loss);
  } else if (a.workload == "w3") {
    t = w3(a, loss);
  } else if (a.workload == "w5") {
    t = w5(a, loss);
  } else if (a.workload == "w4") {
    double raw_ms = 0, raw_cpu_ms = 0;
    t = w4(a, loss, raw_ms, raw_cpu_ms);
    const double gflop = 3 * 2.0 * 256 * 1024 * 1024 / 1e9;
    std::printf("gflops %.1f\nraw_ms %.4f\nraw_cpu_ms %.4f\nraw_gflops %.1f\n",
                gflop / (t.best / 1e3), raw_ms, raw_cpu_ms, gflop / (raw_ms / 1e3));
  } else {
    std::fprintf(stderr, "unknown workload '%s'\n", a.workload.c_str());
    return 2;
  }
  print_timing(t, loss);
  return 0;
}
