// Fused ops against the ops they fuse: add_layer_norm equals add then layer_norm (values and
// the gradients of both outputs flowing together), passes gradcheck, and keeps layer_norm's
// errors and saved-value checks. Its PyTorch reference case is in test_reference.cpp.
#include <gtest/gtest.h>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {

Tensor input(const Shape& s) { return test_util::random_input(s, -2.0f, 2.0f); }

/// A fresh leaf with t's values (its own gradient).
Tensor twin(const Tensor& t) { return t.detach().clone().requires_grad_(t.requires_grad()); }

float max_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

class FusedAddLayerNorm : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(3); }
};

/// The fused op and add-then-layer_norm on the same values and the same upstream gradients
/// gs (for the sum) and gn (for the norm; either undefined: that output is not used).
void expect_matches_unfused(const Shape& shape, const Shape& normalized, bool affine,
                            bool use_sum, bool use_norm) {
  SCOPED_TRACE("shape " + to_string(shape) + (affine ? " affine" : "") +
               (use_sum ? " sum" : "") + (use_norm ? " norm" : ""));
  const Tensor a = input(shape), b = input(shape);
  const Tensor w = affine ? input(normalized) : Tensor(), bias = affine ? input(normalized) : Tensor();
  const Tensor gs = randn(shape), gn = randn(shape);
  const Tensor a2 = twin(a), b2 = twin(b), w2 = affine ? twin(w) : Tensor(),
               bias2 = affine ? twin(bias) : Tensor();

  const auto [s, n] = add_layer_norm(a, b, normalized, w, bias);
  const Tensor s2 = a2 + b2;
  const Tensor n2 = layer_norm(s2, normalized, w2, bias2);
  EXPECT_TRUE(equal(s, s2));
  EXPECT_LE(max_diff(n, n2), 1e-6f);

  Tensor loss = zeros({}), loss2 = zeros({});
  if (use_sum) {
    loss = loss + sum(s * gs);
    loss2 = loss2 + sum(s2 * gs);
  }
  if (use_norm) {
    loss = loss + sum(n * gn);
    loss2 = loss2 + sum(n2 * gn);
  }
  loss.backward();
  loss2.backward();
  EXPECT_LE(max_diff(a.grad(), a2.grad()), 1e-5f);
  EXPECT_LE(max_diff(b.grad(), b2.grad()), 1e-5f);
  if (affine) {
    EXPECT_EQ(w.grad().defined(), w2.grad().defined());
    if (use_norm) {
      EXPECT_LE(max_diff(w.grad(), w2.grad()), 1e-5f);
      EXPECT_LE(max_diff(bias.grad(), bias2.grad()), 1e-5f);
    }
  }
}

}  // namespace

TEST_F(FusedAddLayerNorm, EqualsAddThenLayerNorm) {
  expect_matches_unfused({2, 5, 16}, {16}, true, true, true);
  expect_matches_unfused({3, 37}, {37}, true, true, true);  // a row length off the vector width
  expect_matches_unfused({2, 3, 4}, {3, 4}, true, true, true);
  expect_matches_unfused({4, 24}, {24}, false, true, true);
}

TEST_F(FusedAddLayerNorm, OneOutputUsed) {
  expect_matches_unfused({2, 5, 16}, {16}, true, false, true);  // s unused: dx = LN's backward
  expect_matches_unfused({2, 5, 16}, {16}, true, true, false);  // n unused: no dw, no dbias
  expect_matches_unfused({4, 24}, {24}, false, false, true);
}

TEST_F(FusedAddLayerNorm, Gradcheck) {
  // Both outputs side by side, so the random projection weighs each.
  const auto both = [](const Inputs& v) {
    const auto [s, n] = add_layer_norm(v[0], v[1], {6}, v[2], v[3]);
    return cat({s, n}, -1);
  };
  EXPECT_TRUE(gradcheck(both, {input({2, 3, 6}), input({2, 3, 6}), input({6}), input({6})}).ok);
  const auto plain = [](const Inputs& v) {
    const auto [s, n] = add_layer_norm(v[0], v[1], {3, 4});
    return cat({s, n}, 0);
  };
  const auto r = gradcheck(plain, {input({2, 3, 4}), input({2, 3, 4})});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(FusedAddLayerNorm, SameInputTwiceAndViews) {
  // a and b the same tensor (each gets the gradient), and a transposed view as b.
  const Tensor x = input({4, 8});
  const Tensor x2 = twin(x);
  const auto [s, n] = add_layer_norm(x, x, {8});
  sum(n * n + s).backward();
  const Tensor s2 = x2 + x2;
  sum(layer_norm(s2, {8}) * layer_norm(s2, {8}) + s2).backward();
  EXPECT_LE(max_diff(x.grad(), x2.grad()), 1e-5f);

  const Tensor a = input({8, 8}), bt = input({8, 8});
  const auto [s3, n3] = add_layer_norm(a, bt.transpose(0, 1), {8});
  EXPECT_LE(max_diff(n3, layer_norm(a + bt.transpose(0, 1), {8})), 1e-6f);
  sum(n3 * s3).backward();
  EXPECT_TRUE(bt.grad().defined());
}

TEST_F(FusedAddLayerNorm, RetainedGraphTwice) {
  const Tensor a = input({3, 8}), b = input({3, 8}), w = input({8});
  const auto [s, n] = add_layer_norm(a, b, {8}, w);
  const Tensor loss = sum(s * s) + sum(n * exp(n));
  loss.backward(Tensor(), true);
  const Tensor ga = a.grad().clone(), gw = w.grad().clone();
  loss.backward();
  EXPECT_LE(max_diff(a.grad(), ga * 2.0f), 1e-5f);
  EXPECT_LE(max_diff(w.grad(), gw * 2.0f), 1e-5f);
}

TEST_F(FusedAddLayerNorm, AutogradGradOfOneInput) {
  const Tensor a = input({3, 8}), b = input({3, 8});
  const auto [s, n] = add_layer_norm(a, b, {8});
  const auto g = autograd::grad({sum(n * n) + sum(s)}, {b});
  const Tensor b2 = twin(b);
  const Tensor s2 = a.detach() + b2;
  const Tensor n2 = layer_norm(s2, {8});
  (sum(n2 * n2) + sum(s2)).backward();
  EXPECT_LE(max_diff(g[0], b2.grad()), 1e-5f);
  EXPECT_FALSE(a.grad().defined());
}

TEST_F(FusedAddLayerNorm, NoGrad) {
  const Tensor a = input({3, 8}), b = input({3, 8});
  NoGradGuard guard;
  const auto [s, n] = add_layer_norm(a, b, {8});
  EXPECT_FALSE(s.requires_grad());
  EXPECT_FALSE(n.requires_grad());
  EXPECT_TRUE(equal(s, a + b));
  EXPECT_LE(max_diff(n, layer_norm(a + b, {8})), 1e-6f);
}

TEST_F(FusedAddLayerNorm, Errors) {
  const Tensor a = input({3, 8});
  EXPECT_THROW(add_layer_norm(a, input({1, 8}), {8}), ShapeError);  // no broadcasting
  EXPECT_THROW(add_layer_norm(a, input({3, 8}), {4}), ShapeError);
  EXPECT_THROW(add_layer_norm(a, input({3, 8}), {8}, input({4})), ShapeError);
  EXPECT_THROW(add_layer_norm(a, input({3, 8}), {8}, Tensor(), input({3})), ShapeError);
  EXPECT_THROW(add_layer_norm(a, Tensor(), {8}), ValueError);
  EXPECT_THROW(add_layer_norm(a, a, {8}, Tensor(), Tensor(), -1.0f), ValueError);
  try {
    add_layer_norm(a, input({3, 7}), {8});
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("add_layer_norm"), std::string::npos) << e.what();
  }
}

TEST_F(FusedAddLayerNorm, InPlaceWriteToSumBeforeBackwardIsAnError) {
  // The backward reads s (as PyTorch's layer_norm reads its input).
  const Tensor a = input({3, 8}), b = input({3, 8});
  auto [s, n] = add_layer_norm(a, b, {8});
  const Tensor loss = sum(n * n);
  s.mul_(2.0f);
  EXPECT_THROW(loss.backward(), AutogradError);
}
