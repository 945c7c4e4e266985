// Live tensor memory through tapegrad, counted by its own allocator (tg::memory_stats: the
// bytes of every live buffer, values, gradients, saved intermediates and optimizer state
// alike). bench/memory_bench.py measures the same workloads in PyTorch from torch.profiler's
// memory events; bench/run_memory.sh runs both and prints the table.
//
//   memory_bench <chain|w3|lm>
//
//   chain  20 chained y = y + 1 on a 4 MiB leaf that requires grad, keeping only the last
//          handle, then sum(y).backward()
//   w3     bench/workloads.cpp's W3: TinyGPT vocab 65, T 64, d_model 128, 4 heads, 2 blocks,
//          d_ff 512, batch 16, AdamW; one training step after a warm-up step
//   lm     transformer_lm's transformer (vocab 64, T 16, d_model 96, 4 heads, 3 blocks,
//          d_ff 384, batch 64, AdamW; dropout off): one training step after a warm-up step
//
// Output, one "key bytes" per line: before (live when the measured part starts: the leaf, or
// parameters, gradients, optimizer state and the batch), peak (the most live during it),
// after_forward (live once the forward is done, the graph alive) and after (live at its end,
// the loss handle still alive).
#include <cstdio>
#include <cstring>
#include <string>

#include "tapegrad/tapegrad.h"
#include "tiny_gpt.h"

namespace {

struct Figures {
  int64_t before = 0, peak = 0, after_forward = 0, after = 0;
};

int64_t live() { return tg::memory_stats().live_bytes; }

Figures chain() {
  Figures f;
  const tg::Tensor x = tg::zeros({1 << 20}, true);  // 4 MiB
  tg::reset_peak_memory_stats();
  f.before = live();
  tg::Tensor y = x;
  for (int i = 0; i < 20; ++i) y = y + 1.0f;
  const tg::Tensor loss = tg::sum(y);
  f.after_forward = live();
  loss.backward();
  f.after = live();
  f.peak = tg::memory_stats().peak_bytes;
  return f;
}

Figures gpt(int64_t V, int64_t T, int64_t C, int64_t heads, int64_t layers, int64_t d_ff, int64_t B) {
  tg::manual_seed(0);
  bench::TinyGPT model(V, T, C, heads, layers, d_ff);
  tg::optim::AdamW opt(model.parameters(), tg::optim::AdamWOptions(3e-4));
  std::vector<int64_t> ids(static_cast<size_t>(B * T)), targets(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>((i * 7 + 3) % static_cast<size_t>(V));
    targets[i] = static_cast<int64_t>((i * 11 + 5) % static_cast<size_t>(V));
  }
  const tg::Indices x(ids, {B, T}), y(targets, {B * T});
  Figures f;
  for (int step = 0; step < 2; ++step) {  // the second step is measured
    if (step == 1) {
      tg::reset_peak_memory_stats();
      f.before = live();
    }
    opt.zero_grad();
    tg::Tensor loss = tg::cross_entropy(tg::reshape(model.forward(x), {B * T, V}), y);
    if (step == 1) f.after_forward = live();
    loss.backward();
    opt.step();
    if (step == 1) f.after = live();
  }
  f.peak = tg::memory_stats().peak_bytes;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string w = argc > 1 ? argv[1] : "";
  Figures f;
  if (w == "chain") f = chain();
  else if (w == "w3") f = gpt(65, 64, 128, 4, 2, 512, 16);
  else if (w == "lm") f = gpt(64, 16, 96, 4, 3, 384, 64);
  else {
    std::fprintf(stderr, "usage: memory_bench <chain|w3|lm>\n");
    return 2;
  }
  std::printf("blas_core %s\n", tg::blas_kernel().c_str());
  std::printf("before %lld\npeak %lld\nafter_forward %lld\nafter %lld\n",
              static_cast<long long>(f.before), static_cast<long long>(f.peak),
              static_cast<long long>(f.after_forward), static_cast<long long>(f.after));
  return 0;
}
