// The ops that run on the vector kernels (lib/src/ops/vec_ops.h, lib/src/backend/vec.h), in
// the shapes that take each of the kernels' paths: the same shape, an operand that repeats
// whole (a bias row, a leading-1 row, a scalar tensor, on either side), a broadcast the
// kernels leave to xtensor, lengths that end in a partial batch, and gradient sums down to a
// bias. Values against a plain loop; gradients by finite differences (tg::gradcheck). ctest
// runs this file at every level the CPU runs in a portable build (TAPEGRAD_CPU_LEVEL).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {

Tensor input(const Shape& s, float lo = -1.0f, float hi = 1.0f) {
  return test_util::random_input(s, lo, hi);
}

void check(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

/// Element i of a broadcast operand of shape s, seen through the output shape out.
float at(const Tensor& t, const Shape& out, int64_t i) {
  const Shape s = t.shape();
  int64_t offset = 0, stride = 1;
  for (size_t d = 0; d < out.size(); ++d) {  // from the last dim
    const size_t od = out.size() - 1 - d;
    const int64_t idx = i % out[od];
    i /= out[od];
    if (d < s.size()) {
      const size_t sd = s.size() - 1 - d;
      if (s[sd] != 1) offset += idx * stride;
      stride *= s[sd];
    }
  }
  return t.data_ptr()[offset];
}

struct Case {
  Shape a, b;
};
// (19 and 33 end in a partial batch at every width; (2, 1, 5) * (3, 5) goes to xtensor.)
const std::vector<Case> kCases = {{{3, 19}, {3, 19}}, {{3, 19}, {19}},   {{19}, {3, 19}},
                                  {{2, 3, 5}, {1, 5}}, {{4, 33}, {1}},    {{1}, {4, 33}},
                                  {{2, 1, 5}, {3, 5}}, {{2, 3, 5}, {3, 5}}, {{1, 1}, {2, 17}}};

class VecOps : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(7); }
};

}  // namespace

TEST_F(VecOps, BinaryValuesMatchALoop) {
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<Fn, std::function<float(float, float)>>> ops = {
      {[](const Tensor& a, const Tensor& b) { return add(a, b); }, [](float x, float y) { return x + y; }},
      {[](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](float x, float y) { return x - y; }},
      {[](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](float x, float y) { return x * y; }},
      {[](const Tensor& a, const Tensor& b) { return div(a, b); }, [](float x, float y) { return x / y; }}};
  for (const Case& c : kCases) {
    const Tensor a = input(c.a), b = input(c.b, 0.5f, 2.0f);
    for (const auto& [op, ref] : ops) {
      const Tensor y = op(a, b);
      const Shape out = y.shape();
      for (int64_t i = 0; i < y.numel(); ++i)
        ASSERT_EQ(y.data_ptr()[i], ref(at(a, out, i), at(b, out, i)))
            << to_string(c.a) << " op " << to_string(c.b) << " at " << i;
    }
    const Tensor s = add(a, 0.25f), m = mul(a, -3.0f);
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_EQ(s.data_ptr()[i], a.data_ptr()[i] + 0.25f);
      ASSERT_EQ(m.data_ptr()[i], a.data_ptr()[i] * -3.0f);
    }
  }
}

TEST_F(VecOps, BinaryGradientsInEveryBroadcastForm) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(to_string(c.a) + " op " + to_string(c.b));
    const Inputs x = {input(c.a), input(c.b)};
    check([](const Inputs& v) { return add(v[0], v[1]); }, x);
    check([](const Inputs& v) { return sub(v[0], v[1]); }, x);
    check([](const Inputs& v) { return mul(v[0], v[1]); }, x);
    check([](const Inputs& v) { return mul(v[0], v[0]); }, {input(c.a)});  // one input twice
    check([](const Inputs& v) { return div(v[0], v[1]); }, {input(c.a), input(c.b, 0.5f, 2.0f)});
  }
}

TEST_F(VecOps, ActivationsOverPartialBatches) {
  for (int64_t n : {1, 3, 17, 33}) {
    const Inputs x = {input({2, n}, -3.0f, 3.0f)};
    check([](const Inputs& v) { return exp(v[0]); }, x);
    check([](const Inputs& v) { return tanh(v[0]); }, x);
    check([](const Inputs& v) { return sigmoid(v[0]); }, x);
    check([](const Inputs& v) { return gelu(v[0]); }, x);
    const Tensor y = gelu(x[0]);
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double xi = x[0].data_ptr()[i];
      EXPECT_NEAR(y.data_ptr()[i], xi * 0.5 * (1 + std::erf(xi / std::sqrt(2.0))), 1e-6);
    }
  }
}

TEST_F(VecOps, GradientsAccumulateAndSumDownToABias) {
  // A (5, 3, 24) gradient summed down to a (24) bias (the kernels' row sum), to a (3, 1)
  // (xtensor), and a leaf used twice (its .grad() accumulated).
  const Tensor x = input({5, 3, 24}), bias = input({24}), col = input({3, 1});
  Tensor loss = sum(mul(add(add(x, bias), col), add(bias, 1.0f)));
  loss.backward();
  for (int64_t j = 0; j < 24; ++j) {
    double want = 0;  // d/dbias_j of Σ (x + b_j + c_r)(b_j + 1) = Σ_(i, r) (b_j + 1) + (x + b_j + c_r)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t r = 0; r < 3; ++r)
        want += (bias.data_ptr()[j] + 1.0) +
                (x.data_ptr()[(i * 3 + r) * 24 + j] + bias.data_ptr()[j] + col.data_ptr()[r]);
    EXPECT_NEAR(bias.grad().data_ptr()[j], want, 1e-4) << j;
  }
  for (int64_t r = 0; r < 3; ++r) {
    double want = 0;
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 24; ++j) want += bias.data_ptr()[j] + 1.0;
    EXPECT_NEAR(col.grad().data_ptr()[r], want, 1e-4) << r;
  }
  check([](const Inputs& v) { return mul(add(v[0], v[1]), v[1]); }, {input({5, 3, 24}), input({24})});
}
