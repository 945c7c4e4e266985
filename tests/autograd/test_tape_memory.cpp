// What the tape keeps alive: a node holds edges to its inputs' producers, never their values,
// and each op saves only what its backward reads; after a backward (without retain_graph)
// every saved value is freed, even while the loss handle lives. Observed through the storages
// themselves (weak references to them expire when nothing holds them), not through RSS.
#include <gtest/gtest.h>

#include <memory>

#include "core/storage.h"
#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {
std::weak_ptr<detail::Storage> storage_of(const Tensor& t) { return t.impl()->storage; }
}  // namespace

// 20 chained y = y + 1 keeping only the last handle: the intermediate values are all gone
// (add saves nothing), so what lives is the leaf and the output, as in PyTorch.
TEST(TapeMemory, AChainOfAddsKeepsOnlyTheLeafAndTheOutput) {
  const Tensor x = zeros({1000}, true);
  Tensor y = x;
  std::vector<std::weak_ptr<detail::Storage>> middle;
  for (int i = 0; i < 20; ++i) {
    y = y + 1.0f;
    middle.push_back(storage_of(y));
  }
  middle.pop_back();  // the last one is y itself
  for (const auto& w : middle) EXPECT_TRUE(w.expired());
  sum(y).backward();
  EXPECT_FLOAT_EQ(x.grad().to_vector()[0], 1.0f);
}

// gelu saves its derivative, not its input: the input (here w * 2) is freed with its handle.
TEST(TapeMemory, AnOpDoesNotKeepAnInputItsBackwardDoesNotRead) {
  const Tensor w = ones({256}, true);
  Tensor h = w * 2.0f;
  const auto wh = storage_of(h);
  const Tensor y = gelu(h);
  h = Tensor();
  EXPECT_TRUE(wh.expired());
  Tensor a = w * 3.0f;
  const auto wa = storage_of(a);
  const Tensor z = tanh(a);  // tanh reads its output, not its input
  a = Tensor();
  EXPECT_TRUE(wa.expired());
}

// mul saves each operand only for the other's gradient.
TEST(TapeMemory, MulSavesOnlyWhatTheOtherGradientReads) {
  const Tensor w = ones({8}, true);
  Tensor c = full({8}, 2.0f);  // a constant: its gradient is never needed
  Tensor prod = w * c;
  const auto wc = storage_of(c);
  c = Tensor();
  EXPECT_FALSE(wc.expired());  // dw = g * c reads it
  Tensor d = w * 1.0f;         // requires grad
  const auto wd = storage_of(d);
  const Tensor k = d * full({8}, 3.0f);  // dd = g * 3 reads the constant, not d
  d = Tensor();
  EXPECT_TRUE(wd.expired());
}

TEST(TapeMemory, BackwardFreesEverySavedValueWhileTheLossLives) {
  const Tensor w = ones({64, 64}, true);
  Tensor a = tanh(w * 0.5f);
  Tensor b = exp(a);
  const auto wa = storage_of(a), wb = storage_of(b);
  const Tensor loss = sum(b * a);
  a = Tensor();
  b = Tensor();
  EXPECT_FALSE(wa.expired());  // saved by tanh (its output) and mul
  EXPECT_FALSE(wb.expired());
  loss.backward();
  EXPECT_TRUE(wa.expired());
  EXPECT_TRUE(wb.expired());
  EXPECT_TRUE(loss.defined());
}

TEST(TapeMemory, RetainGraphKeepsThemForASecondBackward) {
  const Tensor w = ones({4}, true);
  Tensor a = tanh(w);
  const auto wa = storage_of(a);
  const Tensor loss = sum(a * a);
  a = Tensor();
  loss.backward(Tensor(), true);
  EXPECT_FALSE(wa.expired());
  loss.backward();
  EXPECT_TRUE(wa.expired());
  const float g = w.grad().to_vector()[0], t = std::tanh(1.0f);
  EXPECT_NEAR(g, 2 * (2 * t * (1 - t * t)), 1e-5);
}

// The memory benchmark's small case (bench/memory_bench.cpp, "chain"), in bytes: what lives
// is the leaf, the output and, after backward, the leaf's gradient; nothing in between.
TEST(TapeMemory, TheChainBenchmarkInBytes) {
  constexpr int64_t kMiB = 1 << 20;
  const Tensor x = zeros({kMiB / 4}, true);
  reset_peak_memory_stats();
  const int64_t before = memory_stats().live_bytes;
  Tensor y = x;
  for (int i = 0; i < 20; ++i) y = y + 1.0f;
  const Tensor loss = sum(y);
  EXPECT_EQ(memory_stats().live_bytes - before, kMiB + 4);  // y and the loss
  loss.backward();
  EXPECT_EQ(memory_stats().live_bytes - before, 2 * kMiB + 4);  // and x.grad
  EXPECT_LE(memory_stats().peak_bytes - before, 2 * kMiB + 64);
}
