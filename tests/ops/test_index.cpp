// Indexing and selection against PyTorch 1.13: gather, scatter, scatter_add, index_add,
// sort/argsort/topk, Tensor::index and index_put_. The cases are written by
// tests/reference/make_index.py into tests/fixtures/index/ (file naming in its header).
// Also: finite-difference gradient checks, views from basic slicing, the in-place forms,
// errors, and multinomial's frequencies, distinctness and reproducibility.
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "reference.h"
#include "test_util.h"

using namespace tg;
using namespace tg::indexing;
using Inputs = std::vector<Tensor>;

namespace {

std::string file(const std::string& name, const std::string& key) { return "index/" + name + "." + key + ".npy"; }
Tensor f32(const std::string& name, const std::string& key, bool grad = false) {
  return ref::load(file(name, key), grad);
}
Tensor i64(const std::string& name, const std::string& key) { return ref::load_int64(file(name, key)); }
Tensor b8(const std::string& name, const std::string& key) { return ref::load_bool(file(name, key)); }

/// y against the fixture, then every listed input's gradient after backward(g).
void check_grads(const std::string& name, const Tensor& y, const Inputs& in, const std::vector<std::string>& keys) {
  SCOPED_TRACE(name);
  EXPECT_TRUE(ref::close(y, f32(name, "y"))) << "forward";
  y.backward(f32(name, "g"));
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_TRUE(ref::close(in[i].grad(), f32(name, "d" + keys[i]))) << "gradient of " << keys[i];
}

using test_util::expect_error;

void gradcheck_ok(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

Tensor input(const Shape& s) { return test_util::random_input(s, -1.0f, 1.0f); }

}  // namespace

// ---- gather / scatter / scatter_add / index_add ----------------------------------------------

TEST(Gather, AgainstPyTorch) {
  for (auto [name, dim] : std::vector<std::pair<std::string, int64_t>>{{"gather_dim1", 1}, {"gather_dim0_3d", 0}}) {
    Tensor x = f32(name, "x", true);
    check_grads(name, gather(x, dim, i64(name, "idx")), {x}, {"x"});
  }
  // int64 input: a plain selection, and the method is the function
  const Tensor idx = i64("gather_dim1", "idx");
  const Tensor xi = i64("gather_dim1", "idx");
  EXPECT_TRUE(ref::equal(xi.gather(1, narrow(idx, 1, 0, 2)), gather(xi, 1, narrow(idx, 1, 0, 2))));
}

TEST(Scatter, AgainstPyTorch) {
  Tensor x = f32("scatter_dim1", "x", true), src = f32("scatter_dim1", "src", true);
  check_grads("scatter_dim1", scatter(x, 1, i64("scatter_dim1", "idx"), src), {x, src}, {"x", "src"});
  Tensor x2 = f32("scatter_value", "x", true);
  check_grads("scatter_value", x2.scatter(1, i64("scatter_value", "idx"), 2.5f), {x2}, {"x"});
  Tensor x3 = f32("scatter_add_dim0", "x", true), s3 = f32("scatter_add_dim0", "src", true);
  check_grads("scatter_add_dim0", scatter_add(x3, 0, i64("scatter_add_dim0", "idx"), s3), {x3, s3}, {"x", "src"});
}

TEST(IndexAdd, AgainstPyTorch) {
  Tensor x = f32("index_add_dim0", "x", true), s = f32("index_add_dim0", "src", true);
  check_grads("index_add_dim0", index_add(x, 0, i64("index_add_dim0", "idx"), s, 0.5f), {x, s}, {"x", "src"});
  Tensor x2 = f32("index_add_dim1", "x", true), s2 = f32("index_add_dim1", "src", true);
  check_grads("index_add_dim1", x2.index_add(1, i64("index_add_dim1", "idx"), s2), {x2, s2}, {"x", "src"});
}

TEST(Scatter, Gradcheck) {
  const Tensor gi = tensor(std::vector<int64_t>{0, 2, 2, 1, 0, 1}, {2, 3});
  gradcheck_ok([&](const Inputs& v) { return gather(v[0], 1, gi); }, {input({2, 4})});
  const Tensor si = tensor(std::vector<int64_t>{3, 0, 1, 2, 1, 0}, {2, 3});  // distinct per row
  gradcheck_ok([&](const Inputs& v) { return scatter(v[0], 1, si, v[1]); }, {input({2, 4}), input({2, 3})});
  gradcheck_ok([&](const Inputs& v) { return scatter(v[0], 1, si, 0.25f); }, {input({2, 4})});
  gradcheck_ok([&](const Inputs& v) { return scatter_add(v[0], 1, gi, v[1]); }, {input({2, 4}), input({2, 3})});
  const Tensor ai = tensor(std::vector<int64_t>{2, 0, 2}, {3});
  gradcheck_ok([&](const Inputs& v) { return index_add(v[0], 1, ai, v[1], -1.5f); }, {input({2, 4, 2}), input({2, 3, 2})});
  // src larger than the index: its unread entries get zero gradient
  gradcheck_ok([&](const Inputs& v) { return scatter(v[0], 1, si, v[1]); }, {input({2, 4}), input({3, 5})});
}

TEST(Scatter, InPlaceFormsRecordTheWrite) {
  const Tensor idx = tensor(std::vector<int64_t>{1, 0}, {1, 2});
  Tensor w = input({2, 3}).requires_grad_(), src = input({1, 2}).requires_grad_();
  Tensor y = w * 2.0f;
  const uint32_t v0 = y.version();
  y.scatter_(1, idx, src);
  EXPECT_EQ(y.version(), v0 + 1);
  EXPECT_TRUE(ref::close(y, scatter(w * 2.0f, 1, idx, src)));
  y.sum().backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{0, 0, 2, 2, 2, 2}));
  EXPECT_EQ(src.grad().to_vector(), (std::vector<float>{1, 1}));
  // scatter_add_ and index_add_ equal their out-of-place forms
  Tensor a = input({3, 2}).detach(), b = a.clone();
  const Tensor s = input({2, 2}), ii = tensor(std::vector<int64_t>{2, 2}, {2});
  a.index_add_(0, ii, s, 2.0f);
  EXPECT_TRUE(ref::close(a, index_add(b, 0, ii, s, 2.0f)));
  Tensor c = b.clone();
  c.scatter_add_(0, tensor(std::vector<int64_t>{0, 1, 0, 0}, {2, 2}), s);
  EXPECT_TRUE(ref::close(c, scatter_add(b, 0, tensor(std::vector<int64_t>{0, 1, 0, 0}, {2, 2}), s)));
  // a leaf that requires grad refuses, naming the op
  expect_error<AutogradError>([&] { w.scatter_(1, idx, 0.0f); }, {"scatter_"});
}

TEST(Scatter, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>([&] { gather(x, 1, tensor(std::vector<int64_t>{0, 3}, {1, 2})); },
                           {"gather", "index 3", "dim 1", "size 3"});
  expect_error<IndexError>([&] { scatter(x, 0, tensor(std::vector<int64_t>{-1}, {1, 1}), 1.0f); },
                           {"scatter", "index -1", "dim 0", "size 2"});
  expect_error<IndexError>([&] { index_add(x, 1, tensor(std::vector<int64_t>{5}, {1}), zeros({2, 1})); },
                           {"index_add", "index 5", "size 3"});
  expect_error<ShapeError>([&] { gather(x, 1, tensor(std::vector<int64_t>{0}, {1})); }, {"gather", "same number of dims"});
  expect_error<ShapeError>([&] { gather(x, 1, tensor(std::vector<int64_t>{0, 0, 0}, {3, 1})); }, {"gather", "dim 0"});
  expect_error<ShapeError>([&] { scatter(x, 1, tensor(std::vector<int64_t>{0, 1}, {1, 2}), zeros({1, 1})); },
                           {"scatter", "larger than src"});
  expect_error<ShapeError>([&] { index_add(x, 1, tensor(std::vector<int64_t>{0, 1}, {2}), zeros({2, 3})); },
                           {"index_add", "source"});
  expect_error<TypeError>([&] { gather(x, 1, zeros({2, 3})); }, {"gather", "int64", "float32"});
}

// ---- sort / argsort / topk ------------------------------------------------------------------------

TEST(Sort, AgainstPyTorch) {
  Tensor x = f32("sort_dim1", "x", true);
  auto [v, i] = sort(x, 1);
  EXPECT_TRUE(ref::equal(i, i64("sort_dim1", "i")));
  check_grads("sort_dim1", v, {x}, {"x"});
  Tensor x0 = f32("sort_desc_dim0", "x", true);
  auto [v0, i0] = x0.sort(0, true);
  EXPECT_TRUE(ref::equal(i0, i64("sort_desc_dim0", "i")));
  check_grads("sort_desc_dim0", v0, {x0}, {"x"});
  // PyTorch 1.13's default CPU sort gives the stable order too
  EXPECT_TRUE(ref::equal(std::get<1>(sort(f32("sort_default", "x"))), i64("sort_default", "i")));
  EXPECT_TRUE(ref::equal(argsort(f32("argsort_desc", "x"), 1, true), i64("argsort_desc", "y")));
  for (auto [name, desc] : std::vector<std::pair<std::string, bool>>{{"sort_nan", false}, {"sort_nan_desc", true}}) {
    auto [vn, in] = sort(f32(name, "x"), 1, desc);
    EXPECT_TRUE(ref::equal(in, i64(name, "i"))) << name;
    const auto got = vn.to_vector(), want = f32(name, "y").to_vector();
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_TRUE(std::isnan(want[k]) ? std::isnan(got[k]) : got[k] == want[k]) << name << " " << k;
  }
  auto [vi, ii] = sort(i64("sort_int", "x"), 1);
  EXPECT_TRUE(ref::equal(vi, i64("sort_int", "y")));
  EXPECT_TRUE(ref::equal(ii, i64("sort_int", "i")));
}

TEST(Topk, AgainstPyTorch) {
  Tensor x = f32("topk_largest", "x", true);
  auto [v, i] = topk(x, 3);
  EXPECT_TRUE(ref::equal(i, i64("topk_largest", "i")));
  check_grads("topk_largest", v, {x}, {"x"});
  Tensor x2 = f32("topk_smallest_dim0", "x", true);
  auto [v2, i2] = x2.topk(2, 0, false);
  EXPECT_TRUE(ref::equal(i2, i64("topk_smallest_dim0", "i")));
  check_grads("topk_smallest_dim0", v2, {x2}, {"x"});
  // sorted = false: the same entries (PyTorch's order is unspecified; ours is x's order)
  auto [v3, i3] = topk(f32("topk_unsorted", "x"), 4, 1, true, false);
  const Tensor want = std::get<0>(sort(i64("topk_unsorted", "i"), 1));
  EXPECT_TRUE(ref::equal(i3, want));
  EXPECT_TRUE(ref::close(v3, gather(f32("topk_unsorted", "x"), 1, want)));
}

TEST(Sort, GradcheckAndErrors) {
  gradcheck_ok([](const Inputs& v) { return std::get<0>(sort(v[0], 0, true)); }, {input({4, 3})});
  gradcheck_ok([](const Inputs& v) { return std::get<0>(topk(v[0], 2, -1)); }, {input({3, 5})});
  expect_error<IndexError>([] { topk(zeros({2, 3}), 4); }, {"topk", "k 4", "size 3"});
  expect_error<IndexError>([] { sort(zeros({2, 3}), 2); }, {"sort"});
}

// ---- Tensor::index -------------------------------------------------------------------------------

TEST(Index, BasicAgainstPyTorch) {
  const std::string n1 = "index_slice_int", n2 = "index_step_none", n3 = "index_ellipsis", n4 = "index_int_ellipsis_neg";
  Tensor a = f32(n1, "x", true);
  check_grads(n1, a.index({Slice(1, 3), -1}), {a}, {"x"});
  Tensor b = f32(n2, "x", true);
  check_grads(n2, b.index({Slice(None, None, 2), None, Slice(1, 5, 2)}), {b}, {"x"});
  Tensor c = f32(n3, "x", true);
  check_grads(n3, c.index({Ellipsis, 0}), {c}, {"x"});
  Tensor d = f32(n4, "x", true);
  check_grads(n4, d.index({1, "...", Slice(-4, None)}), {d}, {"x"});
}

TEST(Index, AdvancedAgainstPyTorch) {
  Tensor a = f32("index_tensor", "x", true);
  check_grads("index_tensor", a.index({i64("index_tensor", "idx")}), {a}, {"x"});
  Tensor b = f32("index_tensor_dim1", "x", true);
  check_grads("index_tensor_dim1", b.index({Slice(), i64("index_tensor_dim1", "idx"), Slice(1, None, 3)}), {b}, {"x"});
  Tensor c = f32("index_two_adjacent", "x", true);
  check_grads("index_two_adjacent",
              c.index({Slice(), i64("index_two_adjacent", "a"), i64("index_two_adjacent", "b")}), {c}, {"x"});
  Tensor d = f32("index_two_apart", "x", true);
  check_grads("index_two_apart", d.index({i64("index_two_apart", "a"), Slice(), i64("index_two_apart", "b")}), {d},
              {"x"});
  Tensor e = f32("index_mask", "x", true);
  check_grads("index_mask", e.index({b8("index_mask", "m")}), {e}, {"x"});
  Tensor f = f32("index_mask_dim1", "x", true);
  check_grads("index_mask_dim1", f.index({Slice(1, None), b8("index_mask_dim1", "m")}), {f}, {"x"});
}

TEST(Index, PutAgainstPyTorch) {
  auto run = [](const std::string& name, const std::function<void(const Tensor&, const Tensor&)>& put) {
    Tensor x = f32(name, "x", true), v = f32(name, "v", true);
    Tensor y = x * 1.0f;
    put(y, v);
    check_grads(name, y, {x, v}, {"x", "v"});
  };
  run("put_slice", [](const Tensor& y, const Tensor& v) { y.index_put_({Slice(), Slice(1, 5, 2)}, v); });
  run("put_int", [](const Tensor& y, const Tensor& v) { y.index_put_({2}, v); });
  run("put_tensor", [](const Tensor& y, const Tensor& v) { y.index_put_({Slice(), i64("put_tensor", "idx")}, v); });
  run("put_mask", [](const Tensor& y, const Tensor& v) { y.index_put_({b8("put_mask", "m")}, v); });
  // a scalar value, through a basic index
  Tensor z = zeros({2, 3});
  z.index_put_({Slice(), Slice(None, None, 2)}, 7.0f);
  EXPECT_EQ(z.to_vector(), (std::vector<float>{7, 0, 7, 7, 0, 7}));
}

TEST(Index, BasicSlicingGivesViews) {
  const Tensor x = arange(24).to(kFloat32).reshape({2, 3, 4});
  const Tensor v = x.index({Slice(), Slice(None, None, 2), Slice(1, None, 2)});
  EXPECT_EQ(v.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(v.strides(), (Shape{12, 8, 2}));
  EXPECT_EQ(v.storage_offset(), 1);
  EXPECT_EQ(v.to_vector(), (std::vector<float>{1, 3, 9, 11, 13, 15, 21, 23}));
  v.fill_(-1.0f);  // writes through to x
  EXPECT_EQ(x.index({0, 0, 1}).item(), -1.0f);
  EXPECT_EQ(x.index({1, 2, 3}).item(), -1.0f);
  EXPECT_EQ(x.index({0, 1, 1}).item(), 5.0f);
  EXPECT_EQ(x.index({None}).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.index({true}).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.index({false}).shape(), (Shape{0, 2, 3, 4}));
  // advanced indexing copies
  const Tensor c = x.index({tensor(std::vector<int64_t>{1}, {1})});
  c.fill_(100.0f);
  EXPECT_NE(x.index({1, 0, 0}).item(), 100.0f);
  gradcheck_ok([](const Inputs& in) { return in[0].index({Slice(None, None, -(-2)), Ellipsis, 1}); }, {input({5, 2, 3})});
  gradcheck_ok([](const Inputs& in) { return in[0].index({Slice(), tensor(std::vector<int64_t>{2, 0, 2}, {3})}); },
               {input({2, 4})});
}

TEST(Index, Errors) {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>([&] { x.index({0, 0, 0}); }, {"too many indices", "dimension 2"});
  expect_error<IndexError>([&] { x.index({Slice(), 3}); }, {"index 3", "dimension 1", "size 3"});
  expect_error<IndexError>([&] { x.index({tensor(std::vector<int64_t>{2}, {1})}); }, {"index 2", "dimension 0", "size 2"});
  expect_error<ValueError>([&] { x.index({Slice(None, None, -1)}); }, {"step", "greater than zero"});
  expect_error<ValueError>([&] { x.index({Slice(None, None, 0)}); }, {"step"});
  expect_error<IndexError>([&] { x.index({Ellipsis, Ellipsis}); }, {"single ellipsis"});
  expect_error<IndexError>([&] { x.index({tensor(std::vector<int64_t>{1, 0, 1}, {3}).to(kBool)}); },
                           {"mask", "[3]", "[2, 3]"});
  expect_error<ValueError>([&] { x.index({".."}); }, {"..."});
  expect_error<ShapeError>([&] { zeros({2, 3}).index_put_({0}, zeros({2})); }, {"index_put_", "[2]", "[3]"});
}

// ---- multinomial ----------------------------------------------------------------------------------

TEST(Multinomial, FrequenciesWithinFourSigma) {
  manual_seed(7);
  const std::vector<float> w = {1, 0, 3, 6};  // probabilities 0.1, 0, 0.3, 0.6
  const int64_t n = 20000;
  const Tensor s = multinomial(tensor({1.0f, 0.0f, 3.0f, 6.0f}), n, true);
  ASSERT_EQ(s.shape(), (Shape{n}));
  std::vector<int64_t> count(4, 0);
  for (int64_t c : s.to_vector<int64_t>()) ++count.at(static_cast<size_t>(c));
  for (size_t c = 0; c < 4; ++c) {
    const double p = w[c] / 10.0, sigma = std::sqrt(n * p * (1 - p));
    EXPECT_LE(std::abs(count[c] - n * p), 4 * sigma + 1e-9) << "category " << c << ": " << count[c];
  }
  // without replacement, 2-D: every row's draws are distinct and never a zero-weight category,
  // and the first draw follows the weights
  const int64_t rows = 4000;
  const Tensor p2 = expand(tensor({{2.0f, 0.0f, 1.0f, 1.0f}}), {rows, 4}).contiguous();
  const Tensor d = multinomial(p2, 3);
  ASSERT_EQ(d.shape(), (Shape{rows, 3}));
  const auto v = d.to_vector<int64_t>();
  int64_t first0 = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::set<int64_t> seen(v.begin() + r * 3, v.begin() + r * 3 + 3);
    EXPECT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen.count(1), 0u);
    first0 += v[static_cast<size_t>(r * 3)] == 0;
  }
  const double sigma = std::sqrt(rows * 0.5 * 0.5);
  EXPECT_LE(std::abs(first0 - rows * 0.5), 4 * sigma);
}

TEST(Multinomial, ReproducibleForASeedAndErrors) {
  const Tensor p = tensor({0.2f, 0.5f, 0.3f});
  manual_seed(11);
  const auto a = multinomial(p, 50, true).to_vector<int64_t>();
  manual_seed(11);
  EXPECT_EQ(multinomial(p, 50, true).to_vector<int64_t>(), a);
  expect_error<ValueError>([&] { multinomial(p, 4); }, {"multinomial", "4", "3", "without replacement"});
  expect_error<ValueError>([] { multinomial(tensor({0.5f, -0.1f}), 1); }, {"non-negative"});
  expect_error<ValueError>([] { multinomial(zeros({2, 3}), 1, true); }, {"sums to zero"});
  expect_error<ValueError>([] { multinomial(tensor({1.0f, 0.0f, 0.0f}), 2); }, {"too few"});
  expect_error<ShapeError>([] { multinomial(ones({1, 2, 3}), 1); }, {"1-D or 2-D"});
}

// Strided inputs (a transpose, a narrow) read as their contiguous copies would be.
TEST(Index, StridedInputsAndWritesThroughViews) {
  const Tensor x = test_util::random_input({4, 3}, -1.0f, 1.0f).detach();
  const Tensor xt = x.t(), xc = x.t().contiguous();
  const Tensor idx = tensor(std::vector<int64_t>{3, 0, 1, 2, 2, 1, 0, 3}, {4, 2}).t();  // (2, 4), strided
  EXPECT_TRUE(ref::close(gather(xt, 1, narrow(idx, 1, 0, 3)), gather(xc, 1, narrow(idx, 1, 0, 3).contiguous())));
  EXPECT_TRUE(ref::equal(std::get<1>(sort(xt, 1)), std::get<1>(sort(xc, 1))));
  EXPECT_TRUE(ref::close(std::get<0>(topk(xt, 2, 0)), std::get<0>(topk(xc, 2, 0))));
  EXPECT_TRUE(ref::close(xt.index({tensor(std::vector<int64_t>{2, 0}, {2}), Slice(1, None)}),
                         xc.index({tensor(std::vector<int64_t>{2, 0}, {2}), Slice(1, None)})));
  // scatter_ and index_put_ through a view write the base, and the gradient follows
  Tensor w = test_util::random_input({3, 4}, -1.0f, 1.0f), src = test_util::random_input({1, 2}, -1.0f, 1.0f);
  Tensor base = w * 1.0f;
  base.index({1}).scatter_(0, tensor(std::vector<int64_t>{3, 0}, {2}), reshape(src, {2}));
  base.index_put_({0, Slice(None, None, 3)}, 5.0f);
  const auto v = base.to_vector(), wv = w.to_vector(), sv = src.to_vector();
  EXPECT_EQ(v[4 + 3], sv[0]);
  EXPECT_EQ(v[4 + 0], sv[1]);
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_EQ(v[3], 5.0f);
  EXPECT_EQ(v[1], wv[1]);
  base.sum().backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(src.grad().to_vector(), (std::vector<float>{1, 1}));
}
