// int64 and bool tensors: dtypes, factories, conversions, readers, views on every dtype,
// the gradient rules (only float32 requires grad), and Tensor's LibTorch-like methods.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using I = std::vector<int64_t>;

namespace {
using test_util::expect_error;

/// 0, 1, ..., n-1 in `shape`, int64.
Tensor seq(const Shape& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return arange(n).reshape(shape);
}
}  // namespace

TEST(Dtype, FactoriesAndReaders) {
  const Tensor a = tensor(I{3, -1, 4, 1, -5, 9}, {2, 3});
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_FALSE(a.is_floating_point());
  EXPECT_EQ(a.to_vector<int64_t>(), (I{3, -1, 4, 1, -5, 9}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, -1, 4, 1, -5, 9}));
  EXPECT_EQ(tensor(std::vector<int>{1, 2}, {2}).dtype(), kInt64);  // any integral vector
  const Tensor b = tensor({1, 0, 1}, kBool);
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(tensor({1.5f}).dtype(), kFloat32);
  EXPECT_TRUE(tensor({1.5f}).is_floating_point());
  EXPECT_EQ(tensor({7}, kInt64).item<int64_t>(), 7);
  EXPECT_TRUE(tensor({2}, kBool).item<bool>());  // nonzero is true
  EXPECT_EQ(zeros({2, 2}, kInt64).to_vector<int64_t>(), (I{0, 0, 0, 0}));
  EXPECT_EQ(ones({3}, kBool).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(full({2}, 7.0f, kInt64).to_vector<int64_t>(), (I{7, 7}));
  EXPECT_EQ(full({2}, 7.0f, kFloat32).dtype(), kFloat32);
  EXPECT_EQ(zeros_like(a).dtype(), kInt64);
  EXPECT_EQ(ones_like(b).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_THROW(tensor(I{1, 2, 3}, {2, 2}), ShapeError);
  // The float readers refuse other dtypes, naming the typed ones.
  expect_error<TypeError>([&] { a.to_vector(); }, {"to_vector", "int64", "to_vector<int64_t>()"});
  expect_error<TypeError>([&] { b.item(); }, {"item", "bool"});
  expect_error<TypeError>([&] { a.data_ptr(); }, {"data_ptr", "int64"});
  expect_error<TypeError>([&] { a.data(); }, {"int64"});
}

TEST(Dtype, ArangeFollowsPyTorch) {
  EXPECT_EQ(arange(4).dtype(), kInt64);
  EXPECT_EQ(arange(2, 11, 3).to_vector<int64_t>(), (I{2, 5, 8}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (I{5, 3, 1}));
  EXPECT_EQ(arange(int64_t{3}, int64_t{3}).numel(), 0);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).to_vector(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0.0f, 2.0f).dtype(), kFloat32);
  EXPECT_EQ(arange(0, 3, 1, kFloat32).to_vector(), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(arange(0.0, 3.0, 1.0, kInt64).to_vector<int64_t>(), (I{0, 1, 2}));
  EXPECT_THROW(arange(0, 5, 0), ValueError);
}

TEST(Dtype, Conversions) {
  const Tensor f = tensor({-2.7f, -0.5f, 0.0f, 0.5f, 2.7f});
  EXPECT_EQ(f.to(kInt64).to_vector<int64_t>(), (I{-2, 0, 0, 0, 2}));  // toward zero, as PyTorch
  EXPECT_EQ(f.to(kBool).to_vector<bool>(), (std::vector<bool>{true, true, false, true, true}));
  EXPECT_EQ(f.to(kBool).to(kFloat32).to_vector(), (std::vector<float>{1, 1, 0, 1, 1}));
  EXPECT_EQ(f.to(kBool).to(kInt64).to_vector<int64_t>(), (I{1, 1, 0, 1, 1}));
  EXPECT_TRUE(f.to(kFloat32).is_same(f));  // no conversion: the same tensor
  // A conversion is not recorded: no gradient flows through it.
  const Tensor w = tensor({1.5f}, true);
  EXPECT_FALSE(w.to(kInt64).requires_grad());
  // From a strided view.
  EXPECT_EQ(seq({2, 3}).t().to(kFloat32).to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Dtype, OnlyFloatTensorsRequireGrad) {
  expect_error<TypeError>([] { arange(3).requires_grad_(); }, {"requires_grad_", "floating point", "int64"});
  expect_error<TypeError>([] { zeros({2}, kBool, true); }, {"float32", "bool"});
  arange(3).requires_grad_(false);  // turning it off is fine
  EXPECT_FALSE(arange(3).requires_grad());
  EXPECT_TRUE(zeros({2}, kFloat32, true).requires_grad());
  // An int64 tensor cannot be a gradient either.
  const Tensor w = zeros({2}, true);
  expect_error<TypeError>([&] { w.set_grad(arange(2)); }, {"int64"});
}

TEST(Dtype, ViewsWorkOnEveryDtype) {
  const Tensor x = seq({2, 3, 4});
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.reshape({4, 6}).to_vector<int64_t>(), x.to_vector<int64_t>());
  EXPECT_EQ(x.view({-1}).shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.select(0, 1).to_vector<int64_t>()[0], 12);
  EXPECT_EQ(x[1].to_vector<int64_t>(), x.select(0, 1).to_vector<int64_t>());
  EXPECT_EQ(x.narrow(2, 1, 2).to_vector<int64_t>(), (I{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(x.slice(1, -1, 3).to_vector<int64_t>(), (I{8, 9, 10, 11, 20, 21, 22, 23}));
  const Tensor tr = x[0].t();
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.to_vector<int64_t>(), (I{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  const Tensor c = tr.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector<int64_t>(), tr.to_vector<int64_t>());
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(x.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(x.permute({2, 0, 1}).to_vector<int64_t>()[1], 4);  // x[0][1][0]
  EXPECT_EQ(x.transpose(0, 2).reshape({-1}).to_vector<int64_t>()[1], 12);  // reshape copies here
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), x.shape());
  EXPECT_EQ(x.unsqueeze(0).squeeze().shape(), x.shape());
  const Tensor e = tensor({1, 0}, kBool).reshape({2, 1}).expand({2, 3});
  EXPECT_EQ(e.to_vector<bool>(), (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_EQ(e.dtype(), kBool);
  // clone copies, detach shares, and a view shares: writes are seen through views.
  const Tensor cl = x.clone(), de = x.detach();
  EXPECT_EQ(cl.dtype(), kInt64);
  EXPECT_EQ(cl.to_vector<int64_t>(), x.to_vector<int64_t>());
  EXPECT_EQ(de.to_vector<int64_t>(), x.to_vector<int64_t>());
  EXPECT_EQ(de.storage_offset(), 0);
  // view() refuses what only a copy can do, as for floats.
  EXPECT_THROW(tr.view({-1}), ShapeError);
}

TEST(Dtype, Printing) {
  std::ostringstream os;
  os << tensor(I{3, -1}, {2});
  EXPECT_NE(os.str().find("dtype=int64"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("-1"), std::string::npos) << os.str();
  EXPECT_NE(tensor({1, 0}, kBool).to_string().find("dtype=bool"), std::string::npos);
  EXPECT_STREQ(to_string(kFloat32), "float32");
}

TEST(Dtype, IndicesAndTensors) {
  const Indices i({2, 0, 1, 1}, {2, 2});
  const Tensor t = i;
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  const Indices back(t.t());  // from any geometry
  EXPECT_EQ(back.values, (I{2, 1, 0, 1}));
  EXPECT_EQ(back.shape, (Shape{2, 2}));
  expect_error<TypeError>([] { Indices(tensor({1.0f})); }, {"Indices", "int64", "float32"});
}

TEST(TensorMethods, MirrorTheFreeFunctions) {
  manual_seed(1);
  const Tensor x = randn({2, 3, 4}, true);
  EXPECT_EQ(x.sizes(), x.shape());
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_FLOAT_EQ(x.sum().item(), sum(x).item());
  EXPECT_EQ(x.sum({1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(x.mean({0, 2}).to_vector(), mean(x, {0, 2}).to_vector());
  EXPECT_FLOAT_EQ(x.mean().item(), mean(x).item());
  EXPECT_EQ(std::get<0>(x.max(1)).to_vector(), std::get<0>(max(x, 1)).to_vector());
  EXPECT_EQ(x.argmax(2).to_vector<int64_t>(), std::get<1>(max(x, 2)).to_vector<int64_t>());
  EXPECT_EQ(x.argmin(2, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.argmin().item<int64_t>(), argmin(x).item<int64_t>());
  EXPECT_EQ(x.transpose(0, 1).shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(x.permute({1, 2, 0}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(x[1].to_vector(), select(x, 0, 1).to_vector());
  EXPECT_EQ(x.exp().to_vector(), exp(x).to_vector());
  EXPECT_EQ(x.tanh().to_vector(), tanh(x).to_vector());
  EXPECT_EQ(x.abs().log().to_vector(), log(abs(x)).to_vector());
  EXPECT_EQ(x.sigmoid().relu().to_vector(), relu(sigmoid(x)).to_vector());
  EXPECT_EQ(x.abs().sqrt().to_vector(), sqrt(abs(x)).to_vector());
  EXPECT_EQ(x.pow(2.0f).to_vector(), pow(x, 2.0f).to_vector());
  EXPECT_EQ(x.neg().to_vector(), neg(x).to_vector());
  EXPECT_EQ(x.softmax(-1).to_vector(), softmax(x, -1).to_vector());
  EXPECT_EQ(x.log_softmax(1).to_vector(), log_softmax(x, 1).to_vector());
  const Tensor w = randn({4, 5});
  EXPECT_EQ(x.matmul(w).to_vector(), matmul(x, w).to_vector());
  EXPECT_EQ(x.add(x).sub(x).mul(x).div(x.abs() + 1.0f).to_vector(),
            div(mul(sub(add(x, x), x), x), x.abs() + 1.0f).to_vector());
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.narrow(1, 1, 2).shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(x.contiguous().is_same(x), true);
  EXPECT_EQ(x.expand({3, 2, 3, 4}).shape(), (Shape{3, 2, 3, 4}));
  // Gradients flow through the methods as through the functions.
  x.reshape({6, 4}).t().unsqueeze(0).squeeze(0).exp().sum().backward();
  const auto g = x.grad().to_vector(), e = exp(x).to_vector();
  ASSERT_EQ(g.size(), e.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-6f * e[i]);
}

// The methods of the other op headers (reduce, pointwise, combine, create, integer).
TEST(TensorMethods, MirrorTheOtherOpHeaders) {
  manual_seed(2);
  const Tensor x = randn({3, 4});
  auto same = [](const Tensor& a, const Tensor& b) { return a.to_vector() == b.to_vector(); };
  EXPECT_EQ(x.max().item(), max(x).item());
  EXPECT_EQ(x.min().item(), min(x).item());
  EXPECT_TRUE(same(x.amax({1}), amax(x, {1})));
  EXPECT_TRUE(same(x.amin({0}, true), amin(x, {0}, true)));
  EXPECT_EQ(x.gt(0.0).all().to(kInt64).item<int64_t>(), all(gt(x, 0.0)).to(kInt64).item<int64_t>());
  EXPECT_EQ(x.gt(0.0).any(1).to(kInt64).to_vector<int64_t>(),
            any(gt(x, 0.0), 1).to(kInt64).to_vector<int64_t>());
  EXPECT_TRUE(same(x.cumsum(1), cumsum(x, 1)));
  EXPECT_TRUE(same(x.logsumexp({1}), logsumexp(x, {1})));
  EXPECT_TRUE(same(x.var({0}), tg::var(x, {0})));
  EXPECT_TRUE(same(x.std({}, false), tg::std(x, {}, false)));
  EXPECT_TRUE(same(x.norm(1.0, {1}), norm(x, 1.0, {1})));
  EXPECT_TRUE(same(x.prod(), prod(x)));
  EXPECT_TRUE(same(x.prod(0, true), prod(x, 0, true)));
  EXPECT_TRUE(same(x.clamp(-0.5f, 0.5f), clamp(x, -0.5f, 0.5f)));
  EXPECT_TRUE(same(x.clamp(std::nullopt, 0.1f), clamp_max(x, 0.1f)));
  EXPECT_TRUE(same(x.clamp_min(0.0f), relu(x)));
  EXPECT_TRUE(same(x.sin().cos(), cos(sin(x))));
  EXPECT_TRUE(same(x.abs().log1p().expm1(), expm1(log1p(abs(x)))));
  EXPECT_TRUE(same(x.abs().reciprocal().rsqrt(), rsqrt(reciprocal(abs(x)))));
  EXPECT_TRUE(same(x.sign(), sign(x)));
  EXPECT_TRUE(same((x * 3.0f).round(), round(x * 3.0f)));
  EXPECT_TRUE(same(x.floor().add(x.ceil()), floor(x) + ceil(x)));
  EXPECT_TRUE(same(x.abs().pow(x), pow(abs(x), x)));
  EXPECT_TRUE(same(x.repeat({2, 1}), repeat(x, {2, 1})));
  EXPECT_TRUE(same(x.flip({0, 1}), flip(x, {0, 1})));
  EXPECT_TRUE(same(x.roll({1}, {1}), roll(x, {1}, {1})));
  EXPECT_TRUE(same(x.tril(), tril(x)));
  EXPECT_TRUE(same(x.triu(1), triu(x, 1)));
  EXPECT_EQ(x.chunk(2, 1).size(), 2u);
  EXPECT_TRUE(same(x.split(3, 1)[1], split(x, 3, 1)[1]));
  EXPECT_TRUE(same(x.unbind(0)[2], select(x, 0, 2)));
}
