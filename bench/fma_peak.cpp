// The machine's floating-point peak, measured: independent chains of fused multiply-adds on
// the widest vectors this CPU runs, chosen at run time (AVX-512, else AVX2 + FMA, else SSE,
// which has no FMA: a multiply and an add per step), on 1 thread and on N threads at once.
// bench/run_benchmarks.sh runs it once per run and prints it in the table's header, as the
// ceiling that the GEMM floors and the steps compare with.
//
//   fma_peak [--threads N] [--ms T]      N: default the number of online CPUs; T: ms per try
//
// Output, one "key value" per line: fma_isa (avx512, avx2 or sse), fma_lanes (floats per
// vector), fma_peak_gflops_1 (1 thread), fma_peak_threads N, fma_peak_gflops_n (N threads
// together), all in GFLOP/s (an FMA is 2 flops), the best of 5 tries each.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TG_X86 1
#endif

namespace {

/// One kernel: `steps` steps of `chains` independent accumulators; returns a value that
/// depends on all of them (so that nothing is optimized away).
struct Kernel {
  const char* isa;
  int lanes;
  int chains;
  int flops_per_lane;  // per chain per step: 2 (an FMA, or a multiply and an add)
  float (*run)(int64_t steps);
};

// a = a·m + c on every chain: m slightly below 1 and c small keep the values finite and
// normal however long it runs. 12 chains hide an FMA latency of 4 cycles on 2 ports (8 needed)
// with room to spare; each chain is a named variable so that all of them stay in registers.
#define TG_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#ifdef TG_X86
__attribute__((target("avx512f"))) float run_avx512(int64_t steps) {
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + 0.01f * i);
  TG_CHAINS(DECL)
#undef DECL
  for (int64_t s = 0; s < steps; ++s) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
    TG_CHAINS(STEP)
#undef STEP
  }
  __m512 sum = _mm512_setzero_ps();
#define ADD(i) sum = _mm512_add_ps(sum, a##i);
  TG_CHAINS(ADD)
#undef ADD
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float run_avx2(int64_t steps) {
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + 0.01f * i);
  TG_CHAINS(DECL)
#undef DECL
  for (int64_t s = 0; s < steps; ++s) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
    TG_CHAINS(STEP)
#undef STEP
  }
  __m256 sum = _mm256_setzero_ps();
#define ADD(i) sum = _mm256_add_ps(sum, a##i);
  TG_CHAINS(ADD)
#undef ADD
  alignas(32) float out[8];
  _mm256_store_ps(out, sum);
  float r = 0;
  for (float v : out) r += v;
  return r;
}

float run_sse(int64_t steps) {  // SSE2 is part of x86-64: a multiply and an add
  const __m128 m = _mm_set1_ps(0.9999999f), c = _mm_set1_ps(1e-7f);
#define DECL(i) __m128 a##i = _mm_set1_ps(1.0f + 0.01f * i);
  TG_CHAINS(DECL)
#undef DECL
  for (int64_t s = 0; s < steps; ++s) {
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
    TG_CHAINS(STEP)
#undef STEP
  }
  __m128 sum = _mm_setzero_ps();
#define ADD(i) sum = _mm_add_ps(sum, a##i);
  TG_CHAINS(ADD)
#undef ADD
  alignas(16) float out[4];
  _mm_store_ps(out, sum);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

float run_scalar(int64_t steps) {  // other architectures: what the compiler makes of it
#define DECL(i) float a##i = 1.0f + 0.01f * i;
  TG_CHAINS(DECL)
#undef DECL
  for (int64_t s = 0; s < steps; ++s) {
#define STEP(i) a##i = a##i * 0.9999999f + 1e-7f;
    TG_CHAINS(STEP)
#undef STEP
  }
  float sum = 0;
#define ADD(i) sum += a##i;
  TG_CHAINS(ADD)
#undef ADD
  return sum;
}

constexpr int kChains = 12;

Kernel widest() {
#ifdef TG_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512", 16, kChains, 2, run_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2", 8, kChains, 2, run_avx2};
  return {"sse", 4, kChains, 2, run_sse};
#else
  return {"scalar", 1, kChains, 2, run_scalar};
#endif
}

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::atomic<float> g_sink{0};

/// GFLOP/s of `threads` threads each running `steps` steps at once (wall time of the slowest).
double try_once(const Kernel& k, int threads, int64_t steps) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      g_sink.store(g_sink.load(std::memory_order_relaxed) + k.run(steps),
                   std::memory_order_relaxed);
    });
  while (ready.load() < threads) std::this_thread::yield();
  const double t0 = seconds();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  const double dt = seconds() - t0;
  const double flops = static_cast<double>(steps) * k.chains * k.lanes * k.flops_per_lane * threads;
  return flops / dt / 1e9;
}

/// Best of 5 tries of about `ms` milliseconds each.
double peak(const Kernel& k, int threads, double ms) {
  int64_t steps = 1 << 16;  // calibrate on one thread: about ms per try
  for (;;) {
    const double t0 = seconds();
    g_sink.store(g_sink.load() + k.run(steps));
    const double dt = seconds() - t0;
    if (dt > ms / 4e3) {
      steps = static_cast<int64_t>(static_cast<double>(steps) * (ms / 1e3) / dt);
      break;
    }
    steps *= 4;
  }
  double best = 0;
  for (int r = 0; r < 5; ++r) best = std::max(best, try_once(k, threads, steps));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  double ms = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0 && std::atoi(argv[i + 1]) >= 1) {
      threads = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--ms") == 0 && std::atof(argv[i + 1]) > 0) {
      ms = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N >= 1] [--ms T > 0]\n", argv[0]);
      return 2;
    }
  }
  const Kernel k = widest();
  std::printf("fma_isa %s\nfma_lanes %d\n", k.isa, k.lanes);
  std::printf("fma_peak_gflops_1 %.1f\n", peak(k, 1, ms));
  std::printf("fma_peak_threads %d\nfma_peak_gflops_n %.1f\n", threads, peak(k, threads, ms));
  return g_sink.load() == 12345.0f ? 1 : 0;  // (never): keeps the sums alive
}
