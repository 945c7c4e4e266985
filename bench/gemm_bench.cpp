// GEMM throughput: OpenBLAS against the cuBLAS plugin, through tapegrad's one GEMM interface
// (so the CUDA numbers include the host<->device copies, as in real use). Two CUDA columns:
// every operand uploaded for each product, and B named to the device cache (a weight that
// stays on the GPU between products, as linear's weight does: only A and C cross the bus).
//   gemm_bench [--max-size N] [--threads T] [--count C]
// Square products 64..max (default 4096), then the three products of Linear 1024->1024 at
// batch 256. Prints GFLOP/s of each backend and the crossover: the smallest square size
// from which CUDA wins at every larger size, and a TAPEGRAD_CUDA_MIN_FLOPS to match.
// The crossover is printed for both CUDA columns. Without a GPU it prints the CPU column and
// says why CUDA is missing. --count C times each
// product exactly C times (after one warm-up), so that the whole process does fixed work and
// can be timed from outside.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/gemm.h"
#include "tapegrad/device.h"

namespace {

int g_count = 0;  // --count: runs per product (0: until 0.3 s or 50 runs)

struct Shape {
  const char* name;
  bool ta, tb;
  int64_t M, N, K;
};

/// Seconds per product: one warm-up, then repeat until 0.3 s or 50 runs have passed.
/// `b_id`: how B is named to the device cache (storage 0: not at all).
double time_gemm(const Shape& s, const std::vector<float>& A, const std::vector<float>& B,
                 std::vector<float>& C, tg::gemm::OperandId b_id = {}) {
  const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
  auto run = [&] {
    tg::gemm::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f,
                   C.data(), s.N, {}, b_id);
  };
  run();
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  int n = 0;
  double elapsed = 0;
  do {
    run();
    ++n;
    elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  } while (g_count > 0 ? n < g_count : elapsed < 0.3 && n < 50);
  return elapsed / n;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_size = 4096;
  int threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-size")) max_size = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--count")) g_count = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--max-size N] [--threads T] [--count C]\n", argv[0]);
      return 2;
    }
  }
  if (threads > 0) tg::set_num_threads(threads);
  const bool cuda = tg::cuda_available();
  std::printf("OpenBLAS threads: %d\ndevice: %s\n\n", tg::get_num_threads(),
              tg::device_status().c_str());

  std::vector<Shape> shapes;
  for (int64_t n = 64; n <= max_size; n *= 2) shapes.push_back({"square", false, false, n, n, n});
  shapes.push_back({"linear fwd  x·Wᵀ", false, true, 256, 1024, 1024});
  shapes.push_back({"linear dx   g·W", false, false, 256, 1024, 1024});
  shapes.push_back({"linear dW   gᵀ·x", true, false, 1024, 1024, 256});

  std::printf("%-18s %5s %5s %5s %12s %12s %8s %12s %8s\n", "product", "M", "N", "K",
              "CPU GFLOP/s", "CUDA GFLOP/s", "CUDA/CPU", "cached B", "/CPU");
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::pair<int64_t, bool>> square_wins, cached_wins;  // (size, CUDA faster)
  uint64_t next_id = uint64_t(1) << 62;  // storage ids far from tapegrad's own (none here)
  for (const Shape& s : shapes) {
    std::vector<float> A(s.M * s.K), B(s.K * s.N), C(s.M * s.N);
    for (float& x : A) x = u(rng);
    for (float& x : B) x = u(rng);
    const double flops = 2.0 * s.M * s.N * s.K;
    tg::set_device(tg::Device::CPU);
    const double cpu = flops / time_gemm(s, A, B, C) / 1e9;
    double gpu = 0, gpu_cached = 0;
    if (cuda) {
      tg::set_device(tg::Device::CUDA);  // every product on the GPU, copies included
      gpu = flops / time_gemm(s, A, B, C) / 1e9;
      gpu_cached = flops / time_gemm(s, A, B, C, {next_id++, 1}) / 1e9;  // B uploaded once
    }
    std::printf("%-18s %5ld %5ld %5ld %12.1f ", s.name, static_cast<long>(s.M),
                static_cast<long>(s.N), static_cast<long>(s.K), cpu);
    if (cuda)
      std::printf("%12.1f %8.2f %12.1f %8.2f\n", gpu, gpu / cpu, gpu_cached, gpu_cached / cpu);
    else
      std::printf("%12s %8s %12s %8s\n", "-", "-", "-", "-");
    if (!std::strcmp(s.name, "square")) {
      square_wins.push_back({s.M, cuda && gpu > cpu});
      cached_wins.push_back({s.M, cuda && gpu_cached > cpu});
    }
  }
  if (!cuda) return 0;
  // The crossover: the smallest size from which CUDA wins at every larger size.
  auto report = [&](const char* what, const std::vector<std::pair<int64_t, bool>>& wins) {
    int64_t cross = -1;
    for (size_t i = wins.size(); i-- > 0 && wins[i].second;) cross = wins[i].first;
    if (cross < 0)
      std::printf("crossover (%s): CUDA never wins up to %ld (keep a high "
                  "TAPEGRAD_CUDA_MIN_FLOPS)\n",
                  what, static_cast<long>(max_size));
    else
      std::printf("crossover (%s): CUDA wins from square size %ld on, including transfers: "
                  "TAPEGRAD_CUDA_MIN_FLOPS=%.3g\n",
                  what, static_cast<long>(cross), 2.0 * cross * cross * cross);
  };
  std::printf("\n");
  report("every operand uploaded", square_wins);
  report("B cached on the device", cached_wins);
  const tg::DeviceCacheStats st = tg::device_cache_stats();
  std::printf("device cache: %ld hits, %ld misses, %ld evictions, budget %ld MiB\n",
              static_cast<long>(st.hits), static_cast<long>(st.misses),
              static_cast<long>(st.evictions), static_cast<long>(st.budget >> 20));
  return 0;
}
