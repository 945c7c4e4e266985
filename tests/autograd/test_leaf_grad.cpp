// Gradients added straight into a leaf's .grad() (BackwardContext::leaf_grad): linear's dW,
// dx and db, and matmul's leaf operands, go into an existing .grad() by a GEMM with beta = 1
// instead of through a fresh buffer. The result must be the old path's: bit for bit into
// zeros, to rounding into a nonzero gradient (a + (b + c) against (a + b) + c); and the old
// path must still be taken wherever the shortcut would be wrong. The reference gradients
// come from autograd::grad, which never takes the shortcut (it touches no .grad()).
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;

namespace {

using test_util::same_bits;

/// Every element within 1e-6 + 1e-6·|expected| (a few ulps of the sums here), same shape.
::testing::AssertionResult near(const Tensor& a, const Tensor& e, double tol = 1e-6) {
  if (!a.defined() || !e.defined()) return ::testing::AssertionFailure() << "undefined tensor";
  if (a.shape() != e.shape())
    return ::testing::AssertionFailure() << to_string(a.shape()) << " vs " << to_string(e.shape());
  const auto va = a.to_vector(), ve = e.to_vector();
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - ve[i]) <= tol + tol * std::abs(ve[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << ve[i];
  return ::testing::AssertionSuccess();
}

/// Every element within its own bound (a tensor of a's shape).
::testing::AssertionResult within(const Tensor& a, const Tensor& e, const Tensor& bound) {
  const auto va = a.to_vector(), ve = e.to_vector(), vb = bound.to_vector();
  if (va.size() != ve.size() || vb.size() != ve.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < va.size(); ++i)
    if (!(std::abs(va[i] - ve[i]) <= vb[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << va[i] << " vs " << ve[i]
                                           << " (bound " << vb[i] << ")";
  return ::testing::AssertionSuccess();
}

/// A two-layer model whose products are big enough to block (and to allocate tracked
/// buffers: 128x128 floats = 64 KiB): y = linear(gelu(linear(x, W1, b1)), W2, b2).
struct Model {
  Tensor x = randn({3, 40, 128}, true);
  Tensor w1 = randn({128, 128}, true), b1 = randn({128}, true);
  Tensor w2 = randn({128, 128}, true), b2 = randn({128}, true);
  std::vector<Tensor> params() const { return {x, w1, b1, w2, b2}; }
  Tensor loss(const Tensor& g) const {
    const Tensor y = linear(gelu(linear(x, w1 * 1.0f, b1)), w2, b2);  // w1 * 1: not a leaf
    return sum(y * g);
  }
};

/// The gradients of `loss` by autograd::grad (the old path), with the graph kept.
std::vector<Tensor> reference(const Tensor& loss, const std::vector<Tensor>& params) {
  return autograd::grad({loss}, params, {}, /*retain_graph=*/true);
}

class LeafGrad : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(3); }
};

}  // namespace

TEST_F(LeafGrad, IntoZerosIsBitForBit) {
  Model m;
  const Tensor g = randn({3, 40, 128});
  for (const Tensor& p : m.params()) p.set_grad(zeros(p.shape()));  // zero_grad() in place
  const Tensor loss = m.loss(g);
  const auto ref = reference(loss, m.params());
  loss.backward();
  const auto ps = m.params();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(same_bits(ps[i].grad(), ref[i])) << "param " << i;
}

TEST_F(LeafGrad, UndefinedGradIsTheOldPath) {
  Model m;
  const Tensor loss = m.loss(randn({3, 40, 128}));
  const auto ref = reference(loss, m.params());
  loss.backward();
  const auto ps = m.params();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(same_bits(ps[i].grad(), ref[i])) << "param " << i;
}

TEST_F(LeafGrad, AccumulatesOverTwoBackwards) {
  Model m;
  const Tensor g1 = randn({3, 40, 128}), g2 = randn({3, 40, 128});
  const Tensor l1 = m.loss(g1);
  const auto r1 = reference(l1, m.params());
  l1.backward();  // allocates every .grad()
  const Tensor l2 = m.loss(g2);
  const auto r2 = reference(l2, m.params());
  std::vector<uint32_t> versions;
  const auto ps = m.params();
  for (const Tensor& p : ps) versions.push_back(p.grad().version());
  const Tensor held = m.w2.grad();  // a user's handle on the gradient sees it change in place
  l2.backward();  // adds into them
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(near(ps[i].grad(), r1[i] + r2[i], 1e-5)) << "param " << i;
    EXPECT_GT(ps[i].grad().version(), versions[i]) << "param " << i << ": the write is versioned";
  }
  EXPECT_TRUE(same_bits(held, m.w2.grad()));
}

TEST_F(LeafGrad, TakesNoBufferForAnExistingGrad) {
  // The point of the shortcut: dW goes into .grad() with no 64 KiB buffer of its own. Counted
  // in bytes at the peak (memory_stats' allocation count stays 0 where the buffer cache is
  // off, as under AddressSanitizer).
  constexpr int64_t kWeightBytes = 128 * 128 * sizeof(float);
  const Tensor x = randn({4, 128}), w = randn({128, 128}, true);
  auto backward_peak = [](const Tensor& loss) {  // bytes above those alive before
    const int64_t before = memory_stats().live_bytes;
    reset_peak_memory_stats();
    loss.backward();
    return memory_stats().peak_bytes - before;
  };
  EXPECT_GE(backward_peak(sum(linear(x, w))), kWeightBytes) << "no .grad() yet: dW gets a buffer";
  EXPECT_LT(backward_peak(sum(linear(x, w))), kWeightBytes) << "added into .grad() in place";
  const Tensor a = randn({3, 128}), b = randn({128, 128}, true);  // matmul's leaf operand too
  b.set_grad(zeros({128, 128}));
  EXPECT_LT(backward_peak(sum(matmul(a, b))), kWeightBytes);
  EXPECT_TRUE(same_bits(b.grad(), matmul(a.t(), ones({3, 128}))));
}

TEST_F(LeafGrad, SharedWeightUsedTwice) {
  const Tensor x = randn({50, 64}), w = randn({64, 64}, true), b = randn({64}, true);
  auto loss_of = [&] { return sum(tanh(linear(relu(linear(x, w, b)), w, b))); };
  const Tensor l1 = loss_of();
  const auto r1 = reference(l1, {w, b});
  w.set_grad(zeros({64, 64}));
  b.set_grad(zeros({64}));
  l1.backward();  // both linears add into the same zeros
  EXPECT_TRUE(near(w.grad(), r1[0], 1e-5));
  EXPECT_TRUE(near(b.grad(), r1[1], 1e-5));
  const Tensor l2 = loss_of();
  l2.backward();  // and into a nonzero gradient
  EXPECT_TRUE(near(w.grad(), r1[0] * 2.0f, 1e-5));
  EXPECT_TRUE(near(b.grad(), r1[1] * 2.0f, 1e-5));
}

TEST_F(LeafGrad, AutogradGradLeavesGradUntouched) {
  Model m;
  for (const Tensor& p : m.params()) p.set_grad(ones(p.shape()));
  const Tensor loss = m.loss(randn({3, 40, 128}));
  const uint32_t v = m.w2.grad().version();
  autograd::grad({loss}, m.params(), {}, /*retain_graph=*/true);
  for (const Tensor& p : m.params()) EXPECT_TRUE(same_bits(p.grad(), ones(p.shape())));
  EXPECT_EQ(m.w2.grad().version(), v);
  // backward(inputs): only the inputs' .grad() changes (through the old path).
  const auto ref = reference(loss, {m.w2});
  autograd::backward({loss}, {}, /*retain_graph=*/true, false, {m.w2});
  EXPECT_TRUE(near(m.w2.grad(), ref[0] + 1.0f, 1e-5));
  EXPECT_TRUE(same_bits(m.b2.grad(), ones({128})));
  EXPECT_TRUE(same_bits(m.x.grad(), ones({3, 40, 128})));
}

TEST_F(LeafGrad, RetainGraphTwice) {
  Model m;
  for (const Tensor& p : m.params()) p.zero_grad();
  const Tensor loss = m.loss(randn({3, 40, 128}));
  const auto ref = reference(loss, m.params());
  for (const Tensor& p : m.params()) p.set_grad(zeros(p.shape()));
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  const auto ps = m.params();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(near(ps[i].grad(), ref[i] * 2.0f, 1e-5)) << i;
}

TEST_F(LeafGrad, AnomalyModeTakesTheOldPath) {
  Model m;
  const Tensor loss = m.loss(randn({3, 40, 128}));
  const auto ref = reference(loss, m.params());
  for (const Tensor& p : m.params()) p.set_grad(zeros(p.shape()));
  {
    DetectAnomalyGuard anomaly;
    loss.backward();
  }
  const auto ps = m.params();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(same_bits(ps[i].grad(), ref[i])) << i;
}

TEST_F(LeafGrad, GradAliasingAnInputIsNotWrittenWhileRead) {
  // w's .grad() shares x's buffer (set_grad keeps a whole tensor's storage): a GEMM adding
  // dW = Gᵀx into it would read x while writing it. The old path computes dW first.
  const Tensor x = randn({64, 64}), w = randn({64, 64}, true), c = randn({64, 64});
  const Tensor x0 = x.clone();
  w.set_grad(x);
  const Tensor loss = sum(linear(x, w) * c);
  const auto ref = reference(loss, {w});
  loss.backward();
  EXPECT_TRUE(near(w.grad(), x0 + ref[0], 1e-5));
  EXPECT_TRUE(same_bits(x, w.grad()));  // still one buffer
}

TEST_F(LeafGrad, TwoThreadsIntoOneParameter) {
  // Two backward passes at once into one shared weight: the leaf lock serializes the adds.
  const Tensor w = randn({96, 96}, true), b = randn({96}, true);
  const Tensor xa = randn({200, 96}), xb = randn({200, 96});
  auto loss_of = [&](const Tensor& x) { return sum(gelu(linear(x, w, b))); };
  const auto ra = reference(loss_of(xa), {w, b}), rb = reference(loss_of(xb), {w, b});
  w.set_grad(zeros({96, 96}));
  b.set_grad(zeros({96}));
  constexpr int kSteps = 40;
  auto worker = [&](const Tensor& x) {
    for (int i = 0; i < kSteps; ++i) loss_of(x).backward();
  };
  std::thread ta(worker, xa), tb(worker, xb);
  ta.join();
  tb.join();
  // The threads' adds interleave in any order: where ra and rb cancel, the running sum still
  // reaches up to kSteps·(|ra| + |rb|) (one thread ahead), and each of the 2·kSteps adds
  // rounds by at most 2^-24 of it. A lost or torn step is off by about |ra| or |rb|. (A bound
  // relative to the small total failed under load: 3.5e-4 off a total of 2.17.)
  auto bound = [&](const Tensor& a, const Tensor& b) {
    return (abs(a) + abs(b)) * (2.0f * kSteps * kSteps * std::ldexp(1.0f, -24)) + 1e-6f;
  };
  const float steps = static_cast<float>(kSteps);
  EXPECT_TRUE(within(w.grad(), (ra[0] + rb[0]) * steps, bound(ra[0], rb[0])));
  EXPECT_TRUE(within(b.grad(), (ra[1] + rb[1]) * steps, bound(ra[1], rb[1])));
}
