// The ops of issue 16 that tapegrad/ops/{reduce,combine,create}.h declare: reductions
// (max/min, amax/amin, cumsum, logsumexp, var, std, norm, prod), combining and splitting
// (stack, chunk, split, unbind, repeat, flip, roll), creation (eye, linspace, tril, triu,
// empty, *_like) and checks (allclose, equal). Each differentiable op: a finite-difference
// gradient check and PyTorch 1.13's values and gradients, written by
// tests/reference/make_reduce_combine.py into tests/fixtures/reduce_combine/.
#include <cmath>
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/storage.h"
#include "reference.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor input(const Shape& s, float lo = -1.0f, float hi = 1.0f) { return test_util::random_input(s, lo, hi); }

void check_grad(const Fn& fn, const Inputs& xs, GradcheckOptions opt = GradcheckOptions()) {
  const auto r = gradcheck(fn, xs, opt);
  EXPECT_TRUE(r.ok) << r.message;
}

/// ref::close, where also equal infinities match (logsumexp of a row of -inf is -inf).
::testing::AssertionResult close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (!actual.defined() || actual.shape() != expected.shape()) return ref::close(actual, expected, atol, rtol);
  std::vector<float> a = actual.to_vector(), e = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::isinf(e[i]) && a[i] == e[i]) a[i] = e[i] = 0.0f;
  return ref::close(tensor(a, actual.shape()), tensor(e, expected.shape()), atol, rtol);
}

/// Runs fn on the fixture's inputs, compares y, backpropagates the fixture's g and compares
/// every input's gradient.
void check_case(const std::string& name, const std::vector<std::string>& keys, const Fn& fn,
                double atol = 1e-5, double rtol = 1e-5) {
  SCOPED_TRACE("case " + name);
  auto file = [&](const std::string& key) { return "reduce_combine/" + name + "." + key + ".npy"; };
  Inputs in;
  for (const auto& k : keys) in.push_back(ref::load(file(k), true));
  Tensor y = fn(in);
  EXPECT_TRUE(close(y, ref::load(file("y")), atol, rtol)) << "forward";
  y.backward(ref::load(file("g")));
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_TRUE(close(in[i].grad(), ref::load(file("d" + keys[i])), atol, rtol)) << "gradient of " << keys[i];
}
void check_case(const std::string& name, const std::function<Tensor(const Tensor&)>& fn) {
  check_case(name, {"x"}, [fn](const Inputs& v) { return fn(v[0]); });
}

/// Each piece times its position + 1, joined again (make_reduce_combine.py's weighted_cat).
Tensor weighted_cat(const std::vector<Tensor>& pieces, int64_t dim) {
  std::vector<Tensor> scaled;
  for (size_t i = 0; i < pieces.size(); ++i) scaled.push_back(pieces[i] * static_cast<float>(i + 1));
  return cat(scaled, dim);
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

/// The error `fn` throws is E, and its message contains `part`.
template <class E>
void expect_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one saying \"" << part << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

class Ops16b : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(16); }
};

}  // namespace

// ---- reductions ---------------------------------------------------------------------------

TEST_F(Ops16b, ExtremesMatchPyTorchWithTiesAndNaN) {
  check_case("max_all_ties", [](const Tensor& x) { return max(x); });
  check_case("min_all_ties", [](const Tensor& x) { return min(x); });
  check_case("max_all_nan", [](const Tensor& x) { return max(x); });
  check_case("amax_dims02", [](const Tensor& x) { return amax(x, {0, 2}); });
  check_case("amin_dim1_keepdim", [](const Tensor& x) { return amin(x, {1}, true); });
  check_case("amax_all", [](const Tensor& x) { return amax(x); });
}

TEST_F(Ops16b, TiesShareTheGradientEvenly) {
  Tensor x = tensor({2.0f, 5.0f, 5.0f, 1.0f, 5.0f}, true);
  max(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0, 1.0f / 3, 1.0f / 3, 0, 1.0f / 3}));
  EXPECT_EQ(max(x).dim(), 0);
}

TEST_F(Ops16b, CumsumLogsumexpMatchPyTorch) {
  check_case("cumsum_dim1", [](const Tensor& x) { return cumsum(x, 1); });
  check_case("cumsum_dim0", [](const Tensor& x) { return cumsum(x, 0); });
  check_case("cumsum_last", [](const Tensor& x) { return cumsum(x, -1); });
  // A row of -inf gives -inf and NaN gradients, as PyTorch; ±1000 stays finite.
  check_case("logsumexp_big", [](const Tensor& x) { return logsumexp(x, {1}); });
  check_case("logsumexp_dims02_keepdim", [](const Tensor& x) { return logsumexp(x, {0, 2}, true); });
}

TEST_F(Ops16b, VarStdMatchPyTorch) {
  check_case("var_dim1", [](const Tensor& x) { return var(x, {1}); });
  check_case("var_all_biased", [](const Tensor& x) { return var(x, {}, false); });
  check_case("var_dims01_keepdim", [](const Tensor& x) { return var(x, {0, 2}, true, true); });
  check_case("std_dim0_biased", [](const Tensor& x) { return tg::std(x, {0}, false); });
}

TEST_F(Ops16b, VarOfOneElementIsNaNAndStdAtZeroHasZeroGradient) {
  check_case("var_one_element", [](const Tensor& x) { return var(x, {1}); });
  check_case("std_one_element", [](const Tensor& x) { return tg::std(x, {0}); });
  check_case("std_dim1_zero_row", [](const Tensor& x) { return tg::std(x, {1}); });
  Tensor c = full({4}, 2.5f).requires_grad_();
  Tensor s = tg::std(c);
  EXPECT_EQ(s.item(), 0.0f);
  s.backward();
  EXPECT_EQ(c.grad().to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_TRUE(std::isnan(var(tensor({3.0f})).item()));
  EXPECT_FLOAT_EQ(var(tensor({3.0f}), {}, false).item(), 0.0f);
  Tensor one = tensor({3.0f}, true);  // PyTorch 1.13's backward throws here; ours gives NaN
  var(one).backward();
  EXPECT_TRUE(std::isnan(one.grad().item()));
}

TEST_F(Ops16b, NormMatchesPyTorchForEveryP) {
  for (const char* p : {"2", "1", "3", "1p5", "0p5", "0"}) {
    std::string label = p;
    double pv = label == "1p5" ? 1.5 : label == "0p5" ? 0.5 : std::stod(label);
    check_case(std::string("norm_p") + p + "_dim1", [pv](const Tensor& x) { return norm(x, pv, {1}); });
  }
  check_case("norm_pinf_dim1", [](const Tensor& x) { return norm(x, INFINITY, {1}); });
  check_case("norm_pneginf_dim1", [](const Tensor& x) { return norm(x, -INFINITY, {1}); });
  check_case("norm_all", [](const Tensor& x) { return norm(x); });
  check_case("norm_p3_dims02_keepdim", [](const Tensor& x) { return norm(x, 3.0, {0, 2}, true); });
  check_case("norm_zero_all", [](const Tensor& x) { return norm(x); });  // gradient 0 at 0
}

TEST_F(Ops16b, ProdWithZerosMatchesPyTorch) {
  check_case("prod_dim1_zeros", [](const Tensor& x) { return prod(x, 1); });
  check_case("prod_dim0_keepdim", [](const Tensor& x) { return prod(x, 0, true); });
  check_case("prod_all", [](const Tensor& x) { return prod(x); });
  check_case("prod_all_one_zero", [](const Tensor& x) { return prod(x); });
  check_case("prod_all_two_zeros", [](const Tensor& x) { return prod(x); });
  // One zero: only it gets a gradient, the product of the others.
  Tensor x = tensor({2.0f, 0.0f, 3.0f}, true);
  prod(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<float>{0.0f, 6.0f, 0.0f}));
}

TEST_F(Ops16b, ReductionsOfEmptyAndZeroDimTensors) {
  EXPECT_EQ(prod(zeros({0, 3})).item(), 1.0f);
  EXPECT_EQ(norm(zeros({0})).item(), 0.0f);
  EXPECT_EQ(logsumexp(zeros({0}), {0}).item(), -kInf);
  EXPECT_TRUE(std::isnan(var(zeros({0})).item()));
  EXPECT_EQ(amax(zeros({0, 3}), {1}).shape(), (Shape{0}));
  EXPECT_EQ(cumsum(scalar(2.0f), 0).item(), 2.0f);
  EXPECT_EQ(logsumexp(scalar(3.0f), {0}).item(), 3.0f);
  EXPECT_EQ(max(scalar(-1.5f)).item(), -1.5f);
  EXPECT_EQ(prod(scalar(4.0f), 0).item(), 4.0f);
}

TEST_F(Ops16b, ReductionGradcheck) {
  const Inputs x = {input({2, 3, 4})};
  const Inputs pos = {input({2, 3, 4}, 0.3f, 1.5f)};
  check_grad([](const Inputs& v) { return max(v[0]); }, x);
  check_grad([](const Inputs& v) { return min(v[0]); }, x);
  check_grad([](const Inputs& v) { return amax(v[0], {0, 2}); }, x);
  check_grad([](const Inputs& v) { return amin(v[0], {-1}, true); }, x);
  check_grad([](const Inputs& v) { return cumsum(v[0], 1); }, x);
  check_grad([](const Inputs& v) { return cumsum(v[0], -1); }, x);
  check_grad([](const Inputs& v) { return logsumexp(v[0], {1}); }, x);
  check_grad([](const Inputs& v) { return logsumexp(v[0], {0, 2}, true); }, x);
  check_grad([](const Inputs& v) { return var(v[0], {1}); }, x);
  check_grad([](const Inputs& v) { return var(v[0], {}, false); }, x);
  check_grad([](const Inputs& v) { return tg::std(v[0], {0, 2}, true, true); }, x);
  for (double p : {1.0, 2.0, 3.0, 1.5, 0.5, double(INFINITY), -double(INFINITY)})
    check_grad([p](const Inputs& v) { return norm(v[0], p, {2}); }, x);
  check_grad([](const Inputs& v) { return norm(v[0]); }, x);
  check_grad([](const Inputs& v) { return prod(v[0], 1); }, pos);
  check_grad([](const Inputs& v) { return prod(v[0], -1, true); }, x);
  check_grad([](const Inputs& v) { return prod(narrow(v[0], 2, 0, 2)); }, pos);
  // Through a strided view (a transpose): the ops read a contiguous copy.
  check_grad([](const Inputs& v) { return var(transpose(v[0], 0, 2), {1}); }, x);
  check_grad([](const Inputs& v) { return amax(transpose(v[0], 1, 2), {1}); }, x);
}

TEST_F(Ops16b, ProdGradcheckWithOneAndTwoZeros) {
  // The finite difference at an exact zero is exact too: the product is linear in each entry.
  Tensor one = tensor({0.5f, 0.0f, 1.5f, -0.7f}, true);
  check_grad([](const Inputs& v) { return prod(v[0]); }, {one});
  Tensor two = tensor({{0.5f, 0.0f, 1.5f}, {0.0f, 0.9f, 0.0f}}, true);
  check_grad([](const Inputs& v) { return prod(v[0], 1); }, {two});
  check_grad([](const Inputs& v) { return prod(v[0]); }, {two});
}

// ---- combining and splitting ----------------------------------------------------------------

TEST_F(Ops16b, CombineSplitMatchPyTorch) {
  const std::vector<std::string> abc = {"a", "b", "c"};
  check_case("stack_dim0", abc, [](const Inputs& v) { return stack(v, 0); });
  check_case("stack_dim1", abc, [](const Inputs& v) { return stack(v, 1); });
  check_case("stack_dim_last", abc, [](const Inputs& v) { return stack(v, -1); });
  check_case("chunk_dim1", [](const Tensor& x) { return weighted_cat(chunk(x, 3, 1), 1); });
  check_case("split_size_dim0", [](const Tensor& x) { return weighted_cat(split(x, 2, 0), 0); });
  check_case("split_sizes_dim1", [](const Tensor& x) { return weighted_cat(split(x, {1, 3, 2}, 1), 1); });
  check_case("unbind_dim1", [](const Tensor& x) {
    std::vector<Tensor> parts = unbind(x, 1);
    for (size_t i = 0; i < parts.size(); ++i) parts[i] = parts[i] * static_cast<float>(i + 1);
    return stack(parts, 0);
  });
  check_case("repeat_new_dim", [](const Tensor& x) { return repeat(x, {2, 1, 3}); });
  check_case("repeat_same_rank", [](const Tensor& x) { return repeat(x, {3, 2}); });
  check_case("flip_dims02", [](const Tensor& x) { return flip(x, {0, 2}); });
  check_case("flip_last", [](const Tensor& x) { return flip(x, {-1}); });
  check_case("roll_two_dims", [](const Tensor& x) { return roll(x, {1, -2}, {0, 1}); });
  check_case("roll_flat", [](const Tensor& x) { return roll(x, {5}); });
  check_case("roll_big_shift", [](const Tensor& x) { return roll(x, 11, 1); });
}

namespace {
std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> out;
  for (const Tensor& t : ts) out.push_back(t.shape());
  return out;
}
}  // namespace

TEST_F(Ops16b, PiecesHaveTheSizesPyTorchGives) {
  const Tensor x = zeros({7, 2});
  // torch.chunk(torch.zeros(7, 2), 3) -> 3, 3, 1; chunk(x, 6) -> six of 2, 2, 2, 1 = 4 pieces
  EXPECT_EQ(shapes_of(chunk(x, 3)), (std::vector<Shape>{{3, 2}, {3, 2}, {1, 2}}));
  EXPECT_EQ(shapes_of(chunk(x, 6)), (std::vector<Shape>{{2, 2}, {2, 2}, {2, 2}, {1, 2}}));
  EXPECT_EQ(shapes_of(chunk(x, 9)), std::vector<Shape>(7, Shape{1, 2}));
  EXPECT_EQ(shapes_of(chunk(zeros({0, 2}), 3)), std::vector<Shape>(3, Shape{0, 2}));
  EXPECT_EQ(shapes_of(split(x, 3)), (std::vector<Shape>{{3, 2}, {3, 2}, {1, 2}}));
  EXPECT_EQ(shapes_of(split(x, 7)), (std::vector<Shape>{{7, 2}}));
  EXPECT_EQ(shapes_of(split(x, 10)), (std::vector<Shape>{{7, 2}}));
  EXPECT_EQ(shapes_of(split(zeros({0, 2}), 2)), (std::vector<Shape>{{0, 2}}));
  EXPECT_EQ(shapes_of(split(x, {2, 0, 5})), (std::vector<Shape>{{2, 2}, {0, 2}, {5, 2}}));
  EXPECT_EQ(shapes_of(split(x, 1, -1)), (std::vector<Shape>{{7, 1}, {7, 1}}));
  EXPECT_EQ(shapes_of(unbind(x, 1)), (std::vector<Shape>{{7}, {7}}));
  EXPECT_EQ(stack({scalar(1.0f), scalar(2.0f)}).to_vector(), (std::vector<float>{1.0f, 2.0f}));
}

TEST_F(Ops16b, ChunkSplitUnbindAreViews) {
  Tensor x = reshape(arange(0.0f, 12.0f), {3, 4});
  for (const auto& pieces : {chunk(x, 2, 1), split(x, 1, 0), split(x, {1, 3}, 1), unbind(x, 0)}) {
    for (const Tensor& p : pieces) EXPECT_TRUE(shares_storage(p, x));
  }
  // A write through a piece is seen by the base and by the other views, as in PyTorch.
  std::vector<Tensor> cols = chunk(x, 2, 1);
  cols[1].fill_(-1.0f);
  EXPECT_EQ(x.to_vector(), (std::vector<float>{0, 1, -1, -1, 4, 5, -1, -1, 8, 9, -1, -1}));
  std::vector<Tensor> rows = unbind(x, 0);
  rows[2].mul_(10.0f);
  EXPECT_EQ(select(x, 0, 2).to_vector(), (std::vector<float>{80, 90, -10, -10}));
  split(x, {1, 2}, 0)[0].zero_();
  EXPECT_EQ(select(x, 0, 0).to_vector(), (std::vector<float>(4, 0.0f)));
  // repeat, flip and roll copy.
  EXPECT_FALSE(shares_storage(repeat(x, {1, 1}), x));
  EXPECT_FALSE(shares_storage(flip(x, {}), x));
  EXPECT_FALSE(shares_storage(roll(x, {0}, {0}), x));
}

TEST_F(Ops16b, CombineGradcheck) {
  const Inputs abc = {input({2, 3}), input({2, 3}), input({2, 3})};
  check_grad([](const Inputs& v) { return stack(v, 1); }, abc);
  check_grad([](const Inputs& v) { return stack({v[0], t(transpose(v[1], 0, 1))}, -1); }, abc);
  const Inputs x = {input({4, 5})};
  check_grad([](const Inputs& v) { return weighted_cat(chunk(v[0], 2, 1), 1); }, x);
  check_grad([](const Inputs& v) { return weighted_cat(split(v[0], {1, 3}, 0), 0); }, x);
  check_grad([](const Inputs& v) { return weighted_cat(split(v[0], 3, 1), 1); }, x);
  check_grad([](const Inputs& v) { return stack(unbind(v[0] * v[0], 1), 0); }, x);
  check_grad([](const Inputs& v) { return repeat(v[0], {2, 1, 2}); }, x);
  check_grad([](const Inputs& v) { return repeat(transpose(v[0], 0, 1), {1, 3}); }, x);
  check_grad([](const Inputs& v) { return flip(v[0], {0, 1}); }, x);
  check_grad([](const Inputs& v) { return flip(transpose(v[0], 0, 1), {1}); }, x);
  check_grad([](const Inputs& v) { return roll(v[0], {2, -1}, {0, 1}); }, x);
  check_grad([](const Inputs& v) { return roll(v[0], {7}); }, x);
}

TEST_F(Ops16b, CatAndStackExplainBadInput) {
  expect_error<ShapeError>([] { cat({scalar(1.0f), scalar(2.0f)}); },
                           "zero-dimensional tensor (at position 0) cannot be concatenated");
  expect_error<ShapeError>([] { cat({ones({1}), scalar(2.0f)}); },
                           "zero-dimensional tensor (at position 1) cannot be concatenated");
  expect_error<ShapeError>([] { stack({zeros({2, 3}), zeros({2, 4})}); },
                           "stack: expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at entry 1");
  expect_error<ValueError>([] { stack({}); }, "stack: expected a non-empty list");
  expect_error<IndexError>([] { stack({zeros({2})}, 2); }, "stack: dimension 2 out of range");
}

TEST_F(Ops16b, SplittingOpsExplainBadInput) {
  const Tensor x = zeros({5, 3});
  expect_error<ShapeError>([&] { split(x, {2, 2}, 0); },
                           "expects split_sizes to sum exactly to 5 (the size of dim 0 of shape [5, 3]), but got split_sizes=[2, 2]");
  expect_error<ValueError>([&] { split(x, {6, -1}, 0); }, "non-negative");
  expect_error<ValueError>([&] { split(x, 0, 0); }, "split_size can only be 0 if the dim's size is 0");
  expect_error<ValueError>([&] { split(x, -2, 0); }, "split_size must be non-negative");
  expect_error<ValueError>([&] { chunk(x, 0); }, "chunks must be greater than 0");
  expect_error<IndexError>([&] { chunk(x, 2, 2); }, "chunk: dimension 2 out of range");
  expect_error<ShapeError>([] { unbind(scalar(1.0f)); }, "unbind: expects a tensor with at least one dim");
  expect_error<ShapeError>([&] { roll(x, {1, 2}, {0}); }, "roll: shifts and dims must align: 2 shifts [1, 2] for 1 dims [0]");
  expect_error<ShapeError>([&] { roll(x, {1, 2}); }, "roll: without dims, expects one shift");
  expect_error<IndexError>([&] { roll(x, 1, 2); }, "roll: dimension 2 out of range");
  expect_error<IndexError>([&] { flip(x, {0, -2}); }, "flip: dim 0 appears multiple times");
  expect_error<IndexError>([&] { flip(x, {3}); }, "flip: dimension 3 out of range");
  expect_error<ShapeError>([&] { repeat(x, {2}); }, "repeat: the number of repeats (1) cannot be smaller");
  expect_error<ShapeError>([&] { repeat(x, {2, -1}); }, "repeat: repeats must be non-negative");
}

TEST_F(Ops16b, ReductionsExplainBadInput) {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>([&] { var(x, {1, -1}); }, "var: dim -1 appears twice");
  expect_error<IndexError>([&] { amax(x, {2}); }, "amax: dimension 2 out of range");
  expect_error<IndexError>([&] { cumsum(x, -3); }, "cumsum: dimension -3 out of range");
  expect_error<IndexError>([&] { prod(x, 5); }, "prod: dimension 5 out of range");
  expect_error<ShapeError>([] { max(zeros({0, 2})); }, "max: the input is empty");
  expect_error<ShapeError>([] { amin(zeros({0, 2}), {0}); }, "amin: reducing over zero elements");
  expect_error<ShapeError>([] { norm(zeros({2, 0}), INFINITY, {1}); }, "norm: the infinity norm of zero elements");
  expect_error<ValueError>([&] { norm(x, NAN); }, "norm: p is NaN");
  expect_error<ValueError>([] { logsumexp(Tensor(), {0}); }, "logsumexp: the input is undefined");
}

// ---- creation and checks ----------------------------------------------------------------------

TEST_F(Ops16b, TrilTriuMatchPyTorch) {
  check_case("tril_0", [](const Tensor& x) { return tril(x); });
  check_case("tril_m1", [](const Tensor& x) { return tril(x, -1); });
  check_case("triu_1", [](const Tensor& x) { return triu(x, 1); });
  check_case("triu_m2", [](const Tensor& x) { return triu(x, -2); });
  const Inputs x = {input({2, 3, 4})};
  check_grad([](const Inputs& v) { return tril(v[0], 1); }, x);
  check_grad([](const Inputs& v) { return triu(transpose(v[0], 1, 2)); }, x);
  expect_error<ShapeError>([] { tril(zeros({3})); }, "tril: expects a tensor with at least 2 dims (..., N, M), got shape [3]");
}

TEST_F(Ops16b, EyeMatchesPyTorch) {
  EXPECT_TRUE(equal(eye(3, 4), ref::load("reduce_combine/eye_3_4.y.npy")));
  EXPECT_TRUE(equal(eye(3), ref::load("reduce_combine/eye_3.y.npy")));
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
  EXPECT_TRUE(eye(2, -1, true).requires_grad());
  expect_error<ValueError>([] { eye(-1); }, "eye: n and m must be non-negative, got n = -1, m = -1");
  expect_error<ValueError>([] { eye(2, -3); }, "eye: n and m must be non-negative, got n = 2, m = -3");
}

TEST_F(Ops16b, LinspaceIsWithinOneUlpOfPyTorch) {
  // PyTorch's vectorized kernel rounds differently from its scalar one (blocks of 8 or 16
  // from a base, FMA or not, by CPU), so bit equality is not a fixed target: both ends are
  // exact, and every value is within one ulp of the larger end (the formula's rounding).
  int exact = 0, total = 0;
  for (int i = 0; i < 7; ++i) {
    const std::string name = "reduce_combine/linspace_" + std::to_string(i);
    const auto args = ref::load(name + ".args.npy").to_vector();
    const auto want = ref::load(name + ".y.npy").to_vector();
    const auto got = linspace(args[0], args[1], static_cast<int64_t>(args[2])).to_vector();
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_EQ(got.front(), want.front()) << name;
    EXPECT_EQ(got.back(), want.back()) << name;
    const float big = std::max(std::abs(args[0]), std::abs(args[1]));
    const float ulp = std::nextafter(big, kInf) - big;
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_LE(std::abs(got[k] - want[k]), ulp) << name << "[" << k << "]: " << got[k] << " vs PyTorch " << want[k];
      exact += got[k] == want[k];
      ++total;
    }
  }
  RecordProperty("linspace_bit_exact", std::to_string(exact) + "/" + std::to_string(total));
  EXPECT_EQ(linspace(2.0f, 5.0f, 1).to_vector(), (std::vector<float>{2.0f}));
  EXPECT_EQ(linspace(2.0f, 5.0f, 0).shape(), (Shape{0}));
  expect_error<ValueError>([] { linspace(0.0f, 1.0f, -1); }, "linspace: number of steps must be non-negative");
}

TEST_F(Ops16b, LikeFactoriesFollowTheShapeAndTheSeed) {
  const Tensor t = zeros({2, 3, 4});
  manual_seed(5);
  const Tensor r1 = rand_like(t), n1 = randn_like(t);
  manual_seed(5);
  const Tensor r2 = rand(t.shape()), n2 = randn(t.shape());
  EXPECT_TRUE(equal(r1, r2));
  EXPECT_TRUE(equal(n1, n2));
  EXPECT_EQ(r1.shape(), t.shape());
  for (float v : r1.to_vector()) EXPECT_TRUE(v >= 0.0f && v < 1.0f);
  EXPECT_TRUE(equal(full_like(t, 2.5f), full({2, 3, 4}, 2.5f)));
  EXPECT_TRUE(full_like(t, 1.0f, true).requires_grad());
  EXPECT_TRUE(equal(empty({3, 2}), zeros({3, 2})));  // zero-filled, unlike PyTorch's
  expect_error<ValueError>([] { rand_like(Tensor()); }, "rand_like: the tensor is undefined");
}

TEST_F(Ops16b, AllcloseAndEqualMatchPyTorch) {
  const Tensor a = ref::load("reduce_combine/allclose.a.npy"), b = ref::load("reduce_combine/allclose.b.npy");
  const auto opts = ref::load("reduce_combine/allclose.opts.npy");
  const auto close = ref::load("reduce_combine/allclose.close.npy").to_vector();
  const auto eq = ref::load("reduce_combine/allclose.equal.npy").to_vector();
  for (int64_t k = 0; k < a.size(0); ++k) {
    const auto o = select(opts, 0, k).to_vector();
    EXPECT_EQ(allclose(select(a, 0, k), select(b, 0, k), o[0], o[1], o[2] != 0.0f), close[k] != 0.0f) << "pair " << k;
    EXPECT_EQ(equal(select(a, 0, k), select(b, 0, k)), eq[k] != 0.0f) << "pair " << k;
  }
  // Broadcasting, as torch.allclose; equal wants the same shape.
  EXPECT_TRUE(allclose(full({2, 3}, 1.0f), ones({3})));
  EXPECT_FALSE(equal(full({2, 3}, 1.0f), ones({3})));
  expect_error<ShapeError>([] { allclose(zeros({2}), zeros({3})); }, "allclose: shapes [2] and [3] cannot be broadcast");
  expect_error<ValueError>([] { allclose(zeros({2}), zeros({2}), -1.0); }, "allclose: rtol must be non-negative");
}

TEST_F(Ops16b, ExpandFollowsPyTorchsRules) {
  // torch: x (3, 1) .expand(2, -1, 4) -> (2, 3, 4); ones(1).expand(0) -> (0); sum's gradient 8
  Tensor x = reshape(arange(0.0f, 3.0f), {3, 1}).detach().requires_grad_();
  Tensor e = expand(x, {2, -1, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(select(select(e, 0, 1), 0, 2).to_vector(), std::vector<float>(4, 2.0f));
  EXPECT_EQ(expand(ones({1}), {0}).shape(), (Shape{0}));
  sum(e).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<float>(3, 8.0f));
  expect_error<ShapeError>([&] { expand(x, {-1, 3, 4}); }, "not allowed for the new leading dim 0");
  expect_error<ShapeError>([&] { expand(x, {4, 4}); }, "must match the existing size 3 at dim 0");
  expect_error<ShapeError>([&] { expand(x, {4}); }, "the number of sizes (1) must be at least the tensor's rank");
  expect_error<ShapeError>([&] { expand(x, {3, -2}); }, "expand");
}
