// detail::linear_act, a Linear and its activation as one op (FeedForward's fc1): the same
// values and gradients as tg::linear then tg::relu / tg::gelu, bit for bit; a finite-difference
// check; PyTorch 1.13's values (tests/reference/make_linear_act.py -> tests/fixtures/linear_act);
// and FeedForward, which runs it, with and without dropout.
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/linear_act.h"
#include "reference.h"
#include "test_util.h"

using namespace tg;
using detail::Activation;
using Inputs = std::vector<Tensor>;

namespace {

using test_util::same_bits;

Tensor unfused(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  const Tensor z = linear(x, w, b);
  return act == Activation::Relu ? relu(z) : gelu(z);
}

/// Runs fn on fresh leaf copies of `in`, backward with g; returns {y, grads...}.
std::vector<Tensor> run(const std::function<Tensor(const Inputs&)>& fn, const Inputs& in,
                        const Tensor& g) {
  Inputs leaves;
  for (const Tensor& t : in) leaves.push_back(t.defined() ? t.detach().clone().requires_grad_() : t);
  Tensor y = fn(leaves);
  y.backward(g);
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& t : leaves) out.push_back(t.defined() ? t.grad() : Tensor());
  return out;
}

class LinearAct : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(7); }
};

}  // namespace

TEST_F(LinearAct, SameBitsAsLinearThenActivation) {
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(std::string(act == Activation::Relu ? "relu" : "gelu") +
                   (with_bias ? " with bias" : " without bias"));
      // (B, T, C) -> (B, T, F), big enough that the GEMMs block and the kernels vectorize
      const Inputs in = {randn({3, 37, 24}), randn({50, 24}) * 0.3f,
                         with_bias ? randn({50}) * 0.3f : Tensor()};
      const Tensor g = randn({3, 37, 50});
      const auto fused = run([&](const Inputs& v) { return detail::linear_act(v[0], v[1], v[2], act); }, in, g);
      const auto plain = run([&](const Inputs& v) { return unfused(v[0], v[1], v[2], act); }, in, g);
      EXPECT_TRUE(same_bits(fused[0], plain[0])) << "y";
      EXPECT_TRUE(same_bits(fused[1], plain[1])) << "dx";
      EXPECT_TRUE(same_bits(fused[2], plain[2])) << "dW";
      if (with_bias) EXPECT_TRUE(same_bits(fused[3], plain[3])) << "db";
    }
  }
}

TEST_F(LinearAct, TransposedWeightAndNoGrad) {
  // A weight read through the GEMM's transpose flag, and the op under no-grad.
  const Tensor x = randn({5, 6}), wt = randn({6, 4}), b = randn({4});
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    const Tensor expected = unfused(x, wt.t(), b, act);
    EXPECT_TRUE(same_bits(detail::linear_act(x, wt.t(), b, act), expected));
    NoGradGuard guard;
    const Tensor y = detail::linear_act(x, wt.t(), b, act);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(same_bits(y, expected));
  }
}

TEST_F(LinearAct, NanStaysNan) {
  // As tg::relu: where(z < 0, 0, z) keeps a NaN (max(z, 0) would give 0).
  const Tensor x = tensor(std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN()}, {2, 1});
  const Tensor w = ones({1, 1}, true);
  const Tensor y = detail::linear_act(x, w, Tensor(), Activation::Relu);
  EXPECT_TRUE(same_bits(y, relu(linear(x, w))));
  EXPECT_TRUE(std::isnan(y.to_vector()[1]));
}

TEST_F(LinearAct, Gradcheck) {
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    const auto fn = [act](const Inputs& v) { return detail::linear_act(v[0], v[1], v[2], act); };
    // Inputs away from relu's kink: z = x Wᵀ + b with |x| >= 0.1 can still be near 0, so a
    // small step.
    const auto r = gradcheck(fn, {test_util::random_input({2, 3, 4}, -1, 1),
                                  test_util::random_input({5, 4}, -1, 1),
                                  test_util::random_input({5}, -1, 1)},
                             GradcheckOptions().eps(1e-4).atol(2e-3));
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST_F(LinearAct, PyTorchReference) {
  for (const std::string act : {"relu", "gelu"}) {
    for (const std::string shape : {"3d", "2d_nobias", "wide"}) {
      const std::string name = act + "_" + shape;
      SCOPED_TRACE("case " + name);
      auto file = [&](const std::string& key) { return "linear_act/" + name + "." + key + ".npy"; };
      const bool has_bias = shape != "2d_nobias";
      const Tensor x = ref::load(file("x"), true), w = ref::load(file("w"), true);
      const Tensor b = has_bias ? ref::load(file("b"), true) : Tensor();
      Tensor y = detail::linear_act(x, w, b, act == "relu" ? Activation::Relu : Activation::Gelu);
      EXPECT_TRUE(ref::close(y, ref::load(file("y")))) << "forward";
      y.backward(ref::load(file("g")));
      EXPECT_TRUE(ref::close(x.grad(), ref::load(file("dx")))) << "dx";
      EXPECT_TRUE(ref::close(w.grad(), ref::load(file("dw")))) << "dw";
      if (has_bias) EXPECT_TRUE(ref::close(b.grad(), ref::load(file("db")))) << "db";
    }
  }
}

TEST_F(LinearAct, BadShapesNameTheOp) {
  test_util::expect_error<ShapeError>(
      [] { detail::linear_act(randn({2, 3}), randn({4, 5}), Tensor(), Activation::Gelu); },
      {"linear_gelu", "input last dim 3", "expected 5"});
  test_util::expect_error<ShapeError>(
      [] { detail::linear_act(randn({2, 5}), randn({4, 5}), randn({3}), Activation::Relu); },
      {"linear_relu", "bias shape [3]", "expected [4]"});
  test_util::expect_error<ShapeError>(
      [] { detail::linear_act(randn({2, 5}), randn({5}), Tensor(), Activation::Relu); },
      {"linear_relu", "weight must be 2-D"});
}

// FeedForward runs fc1 and its activation as linear_act: the same values and gradients as
// the modules one after the other, with dropout in training too (the same random draws).
TEST_F(LinearAct, FeedForwardEqualsItsModules) {
  for (const std::string act : {"gelu", "relu"}) {
    for (float p : {0.0f, 0.3f}) {
      SCOPED_TRACE(act + ", dropout " + std::to_string(p));
      auto ffn = std::make_shared<nn::FeedForward>(nn::FeedForwardOptions(12, 40).activation(act).dropout(p));
      const Tensor x0 = randn({2, 9, 12});
      const Tensor g = randn({2, 9, 12});
      auto step = [&](bool fused) {
        ffn->zero_grad(/*set_to_none=*/true);
        const Tensor x = x0.detach().clone().requires_grad_();
        manual_seed(99);  // the same dropout mask both ways
        Tensor y;
        if (fused) {
          y = ffn->forward(x);
        } else {
          const Tensor h = ffn->fc1->forward(x);
          y = ffn->fc2->forward(dropout(act == "gelu" ? gelu(h) : relu(h), p, true));
        }
        y.backward(g);
        std::vector<Tensor> out{y.detach(), x.grad()};
        for (const Tensor& q : ffn->parameters()) out.push_back(q.grad().clone());
        return out;
      };
      const auto fused = step(true), plain = step(false);
      ASSERT_EQ(fused.size(), plain.size());
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(same_bits(fused[i], plain[i])) << i;
      if (p > 0) {  // dropout really dropped something: not what eval mode gives
        ffn->eval();
        EXPECT_FALSE(same_bits(fused[0], ffn->forward(x0)));
        ffn->train();
      }
    }
  }
}

TEST_F(LinearAct, FeedForwardBadInputNamesFc1) {
  auto ffn = std::make_shared<nn::FeedForward>(8, 16);
  test_util::expect_error<ShapeError>([&] { ffn->forward(randn({2, 7})); },
                                      {"fc1", "input last dim 7", "expected 8"});
}
