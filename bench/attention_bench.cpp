// Causal scaled-dot-product attention, forward and backward, at one shape: through the fused
// causal kernel (tiles over keys up to the diagonal, online softmax) or the reference kernel
// (the whole score matrix), as lib/src/ops/attention.cpp chooses them.
//
//   attention_bench [--kernel fused|reference] [--B 8] [--H 8] [--T 128] [--D 32]
//                   [--iters 20] [--reps 5] [--threads 1] [--tile-q 64] [--tile-k 64]
//
// --tile-q/--tile-k set the fused kernel's tile (detail::set_attention_tiles).
// q, k, v are (B, H, T, D) contiguous. One iteration is forward, then backward with a fixed
// upstream gradient into q, k and v. Prints "key value" lines: kernel, shape, threads,
// blas_core, ms (best repetition, per iteration, wall), cpu_ms, gflops (the useful flops of
// the causal half: 6 products of B·H·T(T+1)/2·D multiply-adds, 2 forward and 4 backward; the
// scores the fused kernel recomputes are not counted) and peak_mib (live tensor bytes at the
// peak of one iteration, above the inputs). For callgrind: --iters 1 --reps 1.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <tapegrad/tapegrad.h>

#include "bench_clock.h"
#include "ops/attention.h"  // detail::ReferenceAttentionScope

int main(int argc, char** argv) {
  std::string kernel = "fused";
  int64_t B = 8, H = 8, T = 128, D = 32;
  int iters = 20, reps = 5, threads = 1;
  tg::detail::AttentionTiles tiles = tg::detail::attention_tiles();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--kernel") kernel = v;
    else if (k == "--B") B = std::atol(v.c_str());
    else if (k == "--H") H = std::atol(v.c_str());
    else if (k == "--T") T = std::atol(v.c_str());
    else if (k == "--D") D = std::atol(v.c_str());
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else if (k == "--tile-q") tiles.q = std::atol(v.c_str());
    else if (k == "--tile-k") tiles.k = std::atol(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (kernel != "fused" && kernel != "reference") {
    std::fprintf(stderr, "--kernel: fused or reference, got %s\n", kernel.c_str());
    return 2;
  }
  if (kernel == "fused") tiles.min_keys = 1;  // the fused kernel at every length
  tg::detail::set_attention_tiles(tiles);
  tg::set_device(tg::Device::CPU);
  if (threads > 0) tg::set_num_threads(threads);
  tg::manual_seed(0);
  const tg::Tensor q = tg::randn({B, H, T, D}, true), k = tg::randn({B, H, T, D}, true),
                   v = tg::randn({B, H, T, D}, true), g = tg::randn({B, H, T, D});
  std::unique_ptr<tg::detail::ReferenceAttentionScope> scope;
  if (kernel == "reference") scope = std::make_unique<tg::detail::ReferenceAttentionScope>();
  auto step = [&] {
    for (const tg::Tensor& t : {q, k, v}) t.set_grad(tg::Tensor());
    tg::Tensor y = tg::scaled_dot_product_attention(q, k, v, tg::AttnMask(), /*is_causal=*/true);
    y.backward(g);
  };
  step();  // warm-up, and the peak
  const int64_t before = tg::memory_stats().live_bytes;
  tg::reset_peak_memory_stats();
  step();
  const double peak_mib = static_cast<double>(tg::memory_stats().peak_bytes - before) / (1 << 20);
  const bench::Best t = bench::time_best(step, iters, reps);
  const double best = t.ms, cpu_best = t.cpu_ms;
  const double flops = 2.0 * 6 * B * H * (T * (T + 1) / 2.0) * D;
  std::printf("tiles %ldx%ld\n", static_cast<long>(tiles.q), static_cast<long>(tiles.k));
  std::printf("kernel %s\nshape B%ld H%ld T%ld D%ld\nthreads %d\nblas_core %s\n", kernel.c_str(),
              static_cast<long>(B), static_cast<long>(H), static_cast<long>(T), static_cast<long>(D),
              tg::get_num_threads(), tg::blas_kernel().c_str());
  std::printf("ms %.4f\ncpu_ms %.4f\ngflops %.1f\npeak_mib %.2f\n", best, cpu_best,
              flops / (best * 1e6), peak_mib);
  return 0;
}
