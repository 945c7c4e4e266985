// Causal self-attention through nn::MultiheadAttention, forward and backward, with q, k and v
// projected by one GEMM over the packed (3C, C) weights (what self-attention runs) or by three
// GEMMs (nn::impl::SeparateProjectionsScope): is the packed projection faster?
//
//   qkv_bench [--qkv packed|separate] [--B 16] [--T 64] [--C 128] [--H 4]
//             [--iters 20] [--reps 5] [--threads 1]
//
// W3's shape is the default (B·T = 1024 rows, C 128); W5's: --B 8 --T 128 --C 384 --H 6.
// Each iteration first writes every parameter in place (p *= 1, a version bump, as an
// optimizer step), so the packed path packs again as it does in training. Prints "key value"
// lines: qkv, shape, threads, blas_core, ms (best repetition, per iteration, wall), cpu_ms.
// For callgrind: --iters 1 --reps 1 (and the difference of two --iters).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <tapegrad/tapegrad.h>

#include "bench_clock.h"
#include "nn/packed_projection.h"  // nn::impl::SeparateProjectionsScope

int main(int argc, char** argv) {
  std::string qkv = "packed";
  int64_t B = 16, T = 64, C = 128, H = 4;
  int iters = 20, reps = 5, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--qkv") qkv = v;
    else if (k == "--B") B = std::atol(v.c_str());
    else if (k == "--T") T = std::atol(v.c_str());
    else if (k == "--C") C = std::atol(v.c_str());
    else if (k == "--H") H = std::atol(v.c_str());
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else if (k == "--threads") threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (qkv != "packed" && qkv != "separate") {
    std::fprintf(stderr, "--qkv: packed or separate, got %s\n", qkv.c_str());
    return 2;
  }
  tg::set_device(tg::Device::CPU);
  if (threads > 0) tg::set_num_threads(threads);
  tg::manual_seed(0);
  auto mha = std::make_shared<tg::nn::MultiheadAttention>(C, H);
  const tg::Tensor x = tg::randn({B, T, C}, true), g = tg::randn({B, T, C});
  const auto params = mha->parameters();
  std::unique_ptr<tg::nn::impl::SeparateProjectionsScope> scope;
  if (qkv == "separate") scope = std::make_unique<tg::nn::impl::SeparateProjectionsScope>();
  const auto causal = tg::nn::AttentionForwardOptions().causal(true);
  auto step = [&] {
    {
      tg::NoGradGuard no_grad;
      for (const tg::Tensor& p : params) p.mul_(1.0f);  // a version bump, as a step
    }
    mha->zero_grad(/*set_to_none=*/true);
    x.set_grad(tg::Tensor());
    tg::Tensor y = mha->forward(x, x, x, causal).output;
    y.backward(g);
  };
  step();  // warm-up
  const bench::Best t = bench::time_best(step, iters, reps);
  const double best = t.ms, cpu_best = t.cpu_ms;
  std::printf("qkv %s\nshape B%ld T%ld C%ld H%ld\nthreads %d\nblas_core %s\n", qkv.c_str(),
              static_cast<long>(B), static_cast<long>(T), static_cast<long>(C), static_cast<long>(H),
              tg::get_num_threads(), tg::blas_kernel().c_str());
  std::printf("ms %.4f\ncpu_ms %.4f\n", best, cpu_best);
  return 0;
}
