// Tensor handles, factories, and the tape's bookkeeping: accumulation, retain_grad,
// no-grad, freed graphs, deep chains and memory.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {
long rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}
}  // namespace

TEST(Tensor, FactoriesAndAccessors) {
  const Tensor t = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_FLOAT_EQ(t.data()(1, 2), 6.0f);
  t.data()(0, 0) = 9.0f;  // data() is mutable
  EXPECT_FLOAT_EQ(t.to_vector()[0], 9.0f);
  EXPECT_FLOAT_EQ(full({2}, 3.5f).to_vector()[1], 3.5f);
  EXPECT_EQ(arange(5).dtype(), kInt64);  // integer bounds: int64, as in PyTorch
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0.0f, 5.0f).to_vector(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1.0f, 2.0f, 0.5f).to_vector(), (std::vector<float>{1.0f, 1.5f}));
  EXPECT_FLOAT_EQ(scalar(2.5f).item(), 2.5f);
  EXPECT_THROW(t.item(), ShapeError);
  EXPECT_THROW(t.data()(2, 0), IndexError);
  EXPECT_THROW(tensor({1, 2, 3}, Shape{2, 2}), ShapeError);
  EXPECT_THROW(zeros({2, -1}), ShapeError);
}

TEST(Tensor, ManualSeedReproducible) {
  manual_seed(3);
  const auto a = randn({100}).to_vector();
  const auto u = rand({10}).to_vector();
  manual_seed(3);
  EXPECT_EQ(randn({100}).to_vector(), a);
  EXPECT_EQ(rand({10}).to_vector(), u);
  for (float v : u) EXPECT_TRUE(v >= 0.0f && v < 1.0f);
}

TEST(Tape, GradientsOfASimpleExpression) {
  const Tensor x = tensor({2.0f}, true), y = tensor({3.0f}, true);
  const Tensor z = sum(x * y + x);  // dz/dx = y + 1 = 4, dz/dy = x = 2
  z.backward();
  EXPECT_FLOAT_EQ(x.grad().item(), 4.0f);
  EXPECT_FLOAT_EQ(y.grad().item(), 2.0f);
  EXPECT_EQ(z.op_name(), "sum");
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(z.is_leaf());
}

TEST(Tape, LeafGradientsAccumulateUntilZeroed) {
  const Tensor x = tensor({1.0f, 2.0f}, true);
  sum(x * 3.0f).backward();
  sum(x * 3.0f).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{6.0f, 6.0f}));
  x.zero_grad();
  sum(x * 3.0f).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{3.0f, 3.0f}));
}

TEST(Tape, TensorUsedTwiceGetsTheSumOfBothGradients) {
  const Tensor x = tensor({3.0f}, true);
  const Tensor y = tanh(x);
  const Tensor z = sum(y * 2.0f + exp(y));  // two paths through y
  z.backward();
  const float t = std::tanh(3.0f);
  EXPECT_NEAR(x.grad().item(), (2.0f + std::exp(t)) * (1 - t * t), 1e-5);
}

TEST(Tape, NonLeafGradientsAreNotKeptUnlessRetained) {
  const Tensor x = tensor({1.0f, 2.0f}, true);
  const Tensor h = x * 2.0f;
  const Tensor k = x * 3.0f;
  k.retain_grad();
  sum(h * k).backward();
  EXPECT_FALSE(h.grad().defined());
  ASSERT_TRUE(k.grad().defined());
  EXPECT_EQ(k.grad().to_vector(), (std::vector<float>{2.0f, 4.0f}));  // dL/dk = h
}

TEST(Tape, NoGradGuardStopsRecording) {
  const Tensor x = tensor({1.0f}, true);
  {
    NoGradGuard guard;
    const Tensor y = x * 2.0f;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(is_grad_enabled());
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2.0f).requires_grad());
}

TEST(Tape, BackwardOnNonScalarNeedsAGradient) {
  const Tensor x = tensor({1.0f, 2.0f}, true);
  const Tensor y = x * 2.0f;
  try {
    y.backward();
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
  }
  y.backward(tensor({1.0f, 10.0f}));
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{2.0f, 20.0f}));
  EXPECT_THROW(y.backward(tensor({1.0f})), ShapeError);
  EXPECT_THROW(tensor({1.0f}).backward(), AutogradError);  // no grad at all
}

TEST(Tape, SecondBackwardThroughAFreedGraphIsAnError) {
  const Tensor x = tensor({1.0f, 2.0f}, true);
  const Tensor z = sum(tanh(x));
  z.backward();
  EXPECT_THROW(z.backward(), AutogradError);

  const Tensor w = sum(tanh(x));
  x.zero_grad();
  w.backward(Tensor(), /*retain_graph=*/true);
  const auto first = x.grad().to_vector();
  w.backward();  // allowed: the graph was retained
  const auto twice = x.grad().to_vector();
  EXPECT_FLOAT_EQ(twice[0], 2 * first[0]);
}

TEST(Tape, DeepChainDoesNotOverflowTheStack) {
  // An RNN unrolled 100,000 steps: backward and destruction must both be iterative.
  const Tensor x = tensor({0.5f}, true);
  Tensor h = x;
  for (int i = 0; i < 100000; ++i) h = h * 0.99999f + 0.0f;
  sum(h).backward();
  EXPECT_NEAR(x.grad().item(), std::pow(0.99999, 100000), 1e-3);
  // Without backward, dropping the graph must also not recurse.
  Tensor g = x;
  for (int i = 0; i < 100000; ++i) g = tanh(g);
  g = Tensor();
  SUCCEED();
}

TEST(Tape, ShapeErrorsNameTheOpAndBothShapes) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 3});
  try {
    add(a, b);
    FAIL();
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 3]"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({2, 3})), ShapeError);
  EXPECT_THROW(index_select(zeros({2, 3}), 0, Indices{5}), IndexError);
  EXPECT_THROW(sum(zeros({2, 3}), {3}), IndexError);
  EXPECT_THROW(cross_entropy(zeros({2, 3}), Indices{0, 3}), IndexError);
  EXPECT_THROW(dropout(zeros({2}), 1.5f, true), ValueError);
  EXPECT_THROW(reshape(zeros({2, 3}), {4, 2}), ShapeError);
  EXPECT_THROW(linear(zeros({2, 3}), zeros({4, 5})), ShapeError);
}

TEST(Tape, MemoryStaysFlat) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's quarantine keeps freed memory mapped, so RSS says nothing "
                  "here; LeakSanitizer checks this build for leaks";
#endif
  const Tensor w = randn({64, 64}, true), x = randn({8, 64});
  auto step = [&](bool with_backward) {
    const Tensor loss = mean(tanh(linear(x, w)));
    if (with_backward) {
      w.zero_grad();
      loss.backward();
    }
  };
  for (int i = 0; i < 200; ++i) step(true);  // warm up the allocator
  const long before = rss_kb();
  for (int i = 0; i < 10000; ++i) step(false);
  for (int i = 0; i < 10000; ++i) step(true);
  const long after = rss_kb();
  EXPECT_LT(after - before, 2048) << "RSS grew from " << before << " kB to " << after << " kB";
}

TEST(Tape, DetachCutsTheTapeAndSharesValues) {
  const Tensor x = tensor({1.0f, 2.0f}, true);
  const Tensor y = x * 2.0f;
  const Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  d.data()[0] = 7.0f;
  EXPECT_FLOAT_EQ(y.to_vector()[0], 7.0f);
  EXPECT_THROW(y.requires_grad_(false), AutogradError);
}
