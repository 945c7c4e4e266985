// Finite-difference gradient checks of the fused recurrences (lib/src/ops/recurrent.h), the
// library-internal ops behind nn::RNN, LSTM and GRU, through a random projection of their
// output: every input (xp, h0, c0, W_hh, b_hh), several steps and a batch, with and without
// the bias. The modules built on them are compared with PyTorch in tests/nn/test_rnn.cpp.
#include <gtest/gtest.h>

#include "ops/recurrent.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {
constexpr int64_t T = 3, B = 2, H = 2;

/// Uniform in [lo, hi), requiring a gradient.
Tensor uniform(const Shape& s, float lo, float hi) {
  Tensor t = rand(s);
  for (float& v : t.data()) v = lo + (hi - lo) * v;
  return t.requires_grad_();
}

void expect_gradcheck(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

class Recurrent : public ::testing::TestWithParam<bool> {  // with b_hh?
 protected:
  void SetUp() override { manual_seed(7); }
  bool bias() const { return GetParam(); }
};
}  // namespace

TEST_P(Recurrent, ElmanTanh) {
  const Inputs x = {test_util::random_input({T, B, H}, -1, 1), test_util::random_input({B, H}, -1, 1),
                    test_util::random_input({H, H}, -1, 1), test_util::random_input({H}, -1, 1)};
  const bool b = bias();
  expect_gradcheck([b](const Inputs& v) {
    return detail::elman_recurrence(false, v[0], v[1], v[2], b ? v[3] : Tensor());
  }, x);
}

// relu's kink at 0: |xp| in [1, 2) and small recurrent weights keep every pre-activation
// at least 0.38 away from it (|h W_hhᵀ| <= 2 · 0.1 · 2.6, |b_hh| <= 0.1).
TEST_P(Recurrent, ElmanRelu) {
  Tensor xp = uniform({T, B, H}, 1, 2);
  {
    NoGradGuard no_grad;
    auto d = xp.data();
    for (int64_t i = 0; i < d.size(); i += 2) d[i] = -d[i];  // both signs
  }
  const Inputs x = {xp, uniform({B, H}, 0.1f, 1), uniform({H, H}, -0.1f, 0.1f),
                    uniform({H}, -0.1f, 0.1f)};
  const bool b = bias();
  expect_gradcheck([b](const Inputs& v) {
    return detail::elman_recurrence(true, v[0], v[1], v[2], b ? v[3] : Tensor());
  }, x);
}

TEST_P(Recurrent, Lstm) {
  const Inputs x = {test_util::random_input({T, B, 4 * H}, -1, 1), test_util::random_input({B, H}, -1, 1),
                    test_util::random_input({B, H}, -1, 1), test_util::random_input({4 * H, H}, -1, 1),
                    test_util::random_input({4 * H}, -1, 1)};
  const bool b = bias();
  expect_gradcheck([b](const Inputs& v) {  // (T + 1, B, H): every h, then the last c
    return detail::lstm_recurrence(v[0], v[1], v[2], v[3], b ? v[4] : Tensor());
  }, x);
}

TEST_P(Recurrent, Gru) {
  const Inputs x = {test_util::random_input({T, B, 3 * H}, -1, 1), test_util::random_input({B, H}, -1, 1),
                    test_util::random_input({3 * H, H}, -1, 1), test_util::random_input({3 * H}, -1, 1)};
  const bool b = bias();
  expect_gradcheck([b](const Inputs& v) {
    return detail::gru_recurrence(v[0], v[1], v[2], b ? v[3] : Tensor());
  }, x);
}

// A state given as (1, B, H), as the sequence modules pass one layer's slice, gets its
// gradient in that shape.
TEST_P(Recurrent, LayerStateKeepsItsShape) {
  const Tensor xp = test_util::random_input({T, B, 3 * H}, -1, 1);
  const Tensor h0 = test_util::random_input({1, B, H}, -1, 1);
  const Tensor w = test_util::random_input({3 * H, H}, -1, 1);
  sum(detail::gru_recurrence(xp, h0, w, Tensor())).backward();
  ASSERT_TRUE(h0.grad().defined());
  EXPECT_EQ(h0.grad().shape(), (Shape{1, B, H}));
}

INSTANTIATE_TEST_SUITE_P(Bias, Recurrent, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithBias" : "NoBias"; });
