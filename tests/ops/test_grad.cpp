// Finite-difference gradient checks for every differentiable op, through a random projection
// of the output (tg::gradcheck), plus a check that gradcheck catches a wrong backward.
#include <gtest/gtest.h>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {
// Random input away from kinks (|x| >= 0.1) so abs/relu/max are differentiable there.
Tensor input(const Shape& s, float lo = -1.0f, float hi = 1.0f) { return test_util::random_input(s, lo, hi); }

void check(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs,
           GradcheckOptions opt = GradcheckOptions()) {
  const auto r = gradcheck(fn, xs, opt);
  EXPECT_TRUE(r.ok) << r.message;
}

class OpsGrad : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(42); }
};
}  // namespace

TEST_F(OpsGrad, BinaryBroadcast) {
  const Inputs x = {input({3, 1, 4}), input({2, 4})};
  check([](const Inputs& v) { return add(v[0], v[1]); }, x);
  check([](const Inputs& v) { return sub(v[0], v[1]); }, x);
  check([](const Inputs& v) { return mul(v[0], v[1]); }, x);
  const Inputs y = {input({3, 1, 4}), input({2, 4}, 0.5f, 2.0f)};
  check([](const Inputs& v) { return div(v[0], v[1]); }, y);
}

TEST_F(OpsGrad, ScalarArithmetic) {
  const Inputs x = {input({2, 3}, 0.5f, 2.0f)};
  check([](const Inputs& v) { return v[0] * 3.0f + 1.5f; }, x);
  check([](const Inputs& v) { return 2.0f - v[0]; }, x);
  check([](const Inputs& v) { return 2.0f / v[0]; }, x);
  check([](const Inputs& v) { return v[0] / 4.0f; }, x);
}

TEST_F(OpsGrad, Unary) {
  const Inputs x = {input({2, 5})};
  const Inputs pos = {input({2, 5}, 0.2f, 2.0f)};
  check([](const Inputs& v) { return neg(v[0]); }, x);
  check([](const Inputs& v) { return exp(v[0]); }, x);
  check([](const Inputs& v) { return log(v[0]); }, pos);
  check([](const Inputs& v) { return sqrt(v[0]); }, pos);
  check([](const Inputs& v) { return pow(v[0], 3.0f); }, x);
  check([](const Inputs& v) { return pow(v[0], 0.5f); }, pos);
  check([](const Inputs& v) { return abs(v[0]); }, x);
  check([](const Inputs& v) { return tanh(v[0]); }, x);
  check([](const Inputs& v) { return sigmoid(v[0]); }, x);
  check([](const Inputs& v) { return relu(v[0]); }, x);
  check([](const Inputs& v) { return gelu(v[0]); }, x);
  check([](const Inputs& v) { return gelu(v[0], true); }, x);
}

TEST_F(OpsGrad, Reductions) {
  const Inputs x = {input({2, 3, 4})};
  check([](const Inputs& v) { return sum(v[0]); }, x);
  check([](const Inputs& v) { return sum(v[0], {1}); }, x);
  check([](const Inputs& v) { return sum(v[0], {0, 2}, true); }, x);
  check([](const Inputs& v) { return mean(v[0], {-1}); }, x);
  check([](const Inputs& v) { return mean(v[0]); }, x);
  check([](const Inputs& v) { return std::get<0>(max(v[0], 1)); }, x);
  check([](const Inputs& v) { return std::get<0>(max(v[0], -1, true)); }, x);
  check([](const Inputs& v) { return std::get<0>(min(v[0], 1)); }, x);
  check([](const Inputs& v) { return std::get<0>(min(v[0], 0, true)); }, x);
  check([](const Inputs& v) { return std::get<0>(v[0].max(-2)) * 2.0f; }, x);  // the method
}

TEST_F(OpsGrad, Softmax) {
  const Inputs x = {input({3, 5}, -3.0f, 3.0f)};
  check([](const Inputs& v) { return softmax(v[0], -1); }, x);
  check([](const Inputs& v) { return softmax(v[0], 0); }, x);
  check([](const Inputs& v) { return log_softmax(v[0], 1); }, x);
  const Inputs y = {input({2, 3, 4})};
  check([](const Inputs& v) { return log_softmax(v[0], 1); }, y);
}

TEST_F(OpsGrad, Matmul) {
  check([](const Inputs& v) { return matmul(v[0], v[1]); }, {input({3, 4}), input({4, 5})});
  check([](const Inputs& v) { return matmul(v[0], v[1]); }, {input({4}), input({4})});
  check([](const Inputs& v) { return matmul(v[0], v[1]); }, {input({4}), input({2, 4, 3})});
  check([](const Inputs& v) { return matmul(v[0], v[1]); }, {input({2, 3, 4}), input({4})});
  // batched with broadcast batch dims: (2,1,3,4) @ (3,4,2) -> (2,3,3,2)
  check([](const Inputs& v) { return matmul(v[0], v[1]); }, {input({2, 1, 3, 4}), input({3, 4, 2})});
}

TEST_F(OpsGrad, Linear) {
  check([](const Inputs& v) { return linear(v[0], v[1], v[2]); },
        {input({2, 3, 4}), input({5, 4}), input({5})});
  check([](const Inputs& v) { return linear(v[0], v[1]); }, {input({3, 4}), input({2, 4})});
}

TEST_F(OpsGrad, ShapeOps) {
  const Inputs x = {input({2, 3, 4})};
  check([](const Inputs& v) { return transpose(v[0], 0, 2); }, x);
  check([](const Inputs& v) { return permute(v[0], {1, 2, 0}); }, x);
  check([](const Inputs& v) { return reshape(v[0], {4, -1}); }, x);
  check([](const Inputs& v) { return flatten(v[0], 1); }, x);
  check([](const Inputs& v) { return unsqueeze(squeeze(unsqueeze(v[0], 1), 1), -1); }, x);
  check([](const Inputs& v) { return narrow(v[0], 2, 1, 2); }, x);
  check([](const Inputs& v) { return slice(v[0], 1, -2, 3); }, x);
  check([](const Inputs& v) { return cat({v[0], v[1], v[0]}, 1); }, {input({2, 3, 4}), input({2, 1, 4})});
}

TEST_F(OpsGrad, Indexing) {
  const Inputs x = {input({5, 3})};
  check([](const Inputs& v) { return index_select(v[0], 0, Indices{4, 1, 1, 0}); }, x);
  check([](const Inputs& v) { return index_select(v[0], 1, Indices{2, 2}); }, x);
  check([](const Inputs& v) { return embedding(v[0], Indices({1, 3, 1, 1, 0, 4}, {2, 3})); }, x);
  const Tensor mask = tensor({1, 0, 0, 1}, Shape{1, 4});
  check([mask](const Inputs& v) { return masked_fill(v[0], mask, -5.0f); }, {input({3, 4})});
  const Tensor cond = tensor({1, 0, 1}, Shape{3, 1});
  check([cond](const Inputs& v) { return where(cond, v[0], v[1]); }, {input({3, 2}), input({2})});
}

TEST_F(OpsGrad, Dropout) {
  // The same seed before each evaluation gives the same mask, so the op is deterministic.
  check([](const Inputs& v) { manual_seed(7); return dropout(v[0], 0.3f, true); }, {input({4, 5})});
}

TEST_F(OpsGrad, LayerNorm) {
  check([](const Inputs& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
        {input({2, 3, 4}), input({4}), input({4})});
  check([](const Inputs& v) { return layer_norm(v[0], {3, 4}); }, {input({2, 3, 4})});
}

TEST_F(OpsGrad, Losses) {
  const Indices t{2, 0, 4};
  check([t](const Inputs& v) { return cross_entropy(v[0], t); }, {input({3, 5}, -2.0f, 2.0f)});
  check([](const Inputs& v) {
          return cross_entropy(v[0], Indices{1, -100, 3},
                               CrossEntropyOptions().label_smoothing(0.1f));
        },
        {input({3, 5})});
  check([](const Inputs& v) {
          return cross_entropy(v[0], Indices({1, 0, 2, 2}, {2, 2}),
                               CrossEntropyOptions().reduction(Reduction::None));
        },
        {input({2, 3, 2})});
  check([t](const Inputs& v) { return nll_loss(log_softmax(v[0], 1), t); }, {input({3, 5})});
  check([t](const Inputs& v) {
          return nll_loss(v[0], t, CrossEntropyOptions().reduction(Reduction::Sum));
        },
        {input({3, 5})});
  check([](const Inputs& v) { return mse_loss(v[0], v[1]); }, {input({2, 3}), input({2, 3})});
}

// gradcheck must catch a backward that is wrong: here d/dx x² reported as x instead of 2x.
TEST_F(OpsGrad, GradcheckCatchesAWrongBackward) {
  auto wrong_square = [](const Inputs& v) {
    const Tensor x = v[0];
    // y = x * x, but with the gradient flowing only through one factor.
    return mul(x, x.detach());
  };
  const auto r = gradcheck(wrong_square, {input({3, 2})});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("numeric"), std::string::npos);
  // and the correct one passes
  EXPECT_TRUE(gradcheck([](const Inputs& v) { return mul(v[0], v[0]); }, {input({3, 2})}).ok);
}
