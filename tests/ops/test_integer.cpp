// Ops on int64 and bool tensors against PyTorch 1.13: comparisons, logical ops, where and
// masked_fill with bool masks, max/min/argmax/argmin with ties and NaN, cat. The cases are
// written by tests/reference/make_dtype.py into tests/fixtures/dtype/ (see its header for the
// file naming). Also: the int64-tensor forms of the index ops equal the Indices forms, and
// the errors a float op gives for an int64 or bool input.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "reference.h"
#include "test_util.h"

using namespace tg;

namespace {

std::string file(const std::string& name, const std::string& key) {
  return "dtype/" + name + "." + key + ".npy";
}
Tensor f32(const std::string& name, const std::string& key, bool grad = false) {
  return ref::load(file(name, key), grad);
}
Tensor i64(const std::string& name, const std::string& key) { return ref::load_int64(file(name, key)); }
Tensor b8(const std::string& name, const std::string& key) { return ref::load_bool(file(name, key)); }

/// Checks a differentiable case: y, then every listed input's gradient after backward(g).
void check_grads(const std::string& name, const Tensor& y, const std::vector<Tensor>& in,
                 const std::vector<std::string>& keys) {
  EXPECT_TRUE(ref::close(y, f32(name, "y"))) << "forward";
  y.backward(f32(name, "g"));
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_TRUE(ref::close(in[i].grad(), f32(name, "d" + keys[i]))) << "gradient of " << keys[i];
}

using test_util::expect_error;

using Cmp = std::function<Tensor(const Tensor&, const Tensor&)>;
using CmpScalar = std::function<Tensor(const Tensor&, double)>;

}  // namespace

TEST(Compare, AgainstPyTorch) {
  const std::vector<std::tuple<std::string, Cmp, CmpScalar>> ops = {
      {"gt", [](auto& a, auto& b) { return gt(a, b); }, [](auto& a, double s) { return gt(a, s); }},
      {"lt", [](auto& a, auto& b) { return lt(a, b); }, [](auto& a, double s) { return lt(a, s); }},
      {"ge", [](auto& a, auto& b) { return ge(a, b); }, [](auto& a, double s) { return ge(a, s); }},
      {"le", [](auto& a, auto& b) { return le(a, b); }, [](auto& a, double s) { return le(a, s); }},
      {"eq", [](auto& a, auto& b) { return eq(a, b); }, [](auto& a, double s) { return eq(a, s); }},
      {"ne", [](auto& a, auto& b) { return ne(a, b); }, [](auto& a, double s) { return ne(a, s); }}};
  for (const auto& [op, fn, fs] : ops) {
    SCOPED_TRACE(op);
    EXPECT_TRUE(ref::equal(fn(f32(op + "_float", "a"), f32(op + "_float", "b")), b8(op + "_float", "y")));
    EXPECT_TRUE(ref::equal(fn(i64(op + "_int", "a"), i64(op + "_int", "b")), b8(op + "_int", "y")));
    EXPECT_TRUE(ref::equal(fn(i64(op + "_mixed", "a"), f32(op + "_mixed", "b")), b8(op + "_mixed", "y")));
    EXPECT_TRUE(ref::equal(fs(f32(op + "_scalar_float", "a"), 0.5), b8(op + "_scalar_float", "y")));
    EXPECT_TRUE(ref::equal(fs(i64(op + "_scalar_int", "a"), 1), b8(op + "_scalar_int", "y")));
  }
}

TEST(Compare, OperatorsAndMethodsAreTheFunctions) {
  const Tensor a = f32("gt_float", "a"), b = f32("gt_float", "b");
  const Tensor ia = i64("gt_int", "a"), ib = i64("gt_int", "b");
  EXPECT_TRUE(ref::equal(a > b, gt(a, b)));
  EXPECT_TRUE(ref::equal(a < b, lt(a, b)));
  EXPECT_TRUE(ref::equal(a >= b, ge(a, b)));
  EXPECT_TRUE(ref::equal(a <= b, le(a, b)));
  EXPECT_TRUE(ref::equal(ia == ib, eq(ia, ib)));
  EXPECT_TRUE(ref::equal(ia != ib, ne(ia, ib)));
  EXPECT_TRUE(ref::equal(0.5 < a, gt(a, 0.5)));  // the scalar on the left flips the op
  EXPECT_TRUE(ref::equal(1 >= ia, le(ia, 1)));
  EXPECT_TRUE(ref::equal(a.gt(b), gt(a, b)));
  EXPECT_TRUE(ref::equal(ia.eq(1), eq(ia, 1)));
  EXPECT_EQ((a > b).dtype(), kBool);
  EXPECT_FALSE((a > b).requires_grad());
}

TEST(Compare, NaNAndLargeInts) {
  const Tensor n = tensor({NAN, 1.0f});
  EXPECT_EQ((n == n).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ((n != n).to_vector<bool>(), (std::vector<bool>{true, false}));
  // int64 against int64 compares exactly (not through float: 2^40 + 1 > 2^40).
  const Tensor big = tensor(std::vector<int64_t>{(int64_t(1) << 40) + 1}, {1});
  const Tensor big0 = tensor(std::vector<int64_t>{int64_t(1) << 40}, {1});
  EXPECT_TRUE((big > big0).item<bool>());
  EXPECT_TRUE((big > double(int64_t(1) << 40)).item<bool>());
}

TEST(Compare, BroadcastErrorNamesTheOp) {
  expect_error<ShapeError>([] { gt(zeros({2, 3}), zeros({4})); }, {"gt", "[2, 3]", "[4]"});
  expect_error<ValueError>([] { eq(Tensor(), zeros({4})); }, {"eq", "undefined"});
}

TEST(Logical, AgainstPyTorch) {
  const Tensor a = b8("logical_and", "a"), b = b8("logical_and", "b");
  EXPECT_TRUE(ref::equal(a & b, b8("logical_and", "y")));
  EXPECT_TRUE(ref::equal(a | b, b8("logical_or", "y")));
  EXPECT_TRUE(ref::equal(a ^ b, b8("logical_xor", "y")));
  EXPECT_TRUE(ref::equal(~a, b8("logical_not", "y")));
  EXPECT_TRUE(ref::equal(logical_and(a, b), b8("logical_and", "y")));
  EXPECT_TRUE(ref::equal(a.logical_not(), b8("logical_not", "y")));
  // logical_* read numbers as != 0; the operators want bool masks.
  EXPECT_EQ(logical_or(tensor({0.0f, 2.0f}), tensor({0, 0}, kInt64)).to_vector<bool>(),
            (std::vector<bool>{false, true}));
  expect_error<TypeError>([] { ~tensor({1.0f}); }, {"operator~", "bool", "float32"});
  expect_error<TypeError>([&] { a & tensor({1, 0}, kInt64); }, {"operator&", "int64"});
}

TEST(Masks, WhereWithABoolCondition) {
  const std::string n = "where_bool";
  const Tensor c = b8(n, "c"), a = f32(n, "a", true), b = f32(n, "b", true);
  check_grads(n, where(c, a, b), {a, b}, {"a", "b"});
  // A float 0/1 condition gives the same values.
  EXPECT_TRUE(ref::close(where(c.to(kFloat32), a, b), f32(n, "y")));
}

TEST(Masks, MaskedFillWithABoolMask) {
  const std::string n = "masked_fill_bool";
  const Tensor a = f32(n, "a", true), m = b8(n, "m");
  check_grads(n, masked_fill(a, m, -7.5f), {a}, {"a"});
  EXPECT_TRUE(ref::close(masked_fill(a, m.to(kFloat32), -7.5f), f32(n, "y")));
  EXPECT_TRUE(ref::close(a.masked_fill(m, -7.5f), f32(n, "y")));  // the method
}

TEST(Masks, MaskedFillWithAComparison) {
  const std::string n = "masked_fill_cmp";
  const Tensor a = f32(n, "a", true);
  check_grads(n, masked_fill(a, a > 0.3, 0.0f), {a}, {"a"});
}

TEST(Masks, MaskedFillInPlaceTakesABoolMask) {
  const Tensor a = tensor({1.0f, 2.0f, 3.0f});
  a.masked_fill_(a >= 2.0, 0.0f);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{1.0f, 0.0f, 0.0f}));
}

TEST(Masks, AttentionTakesABoolMask) {
  manual_seed(3);
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
  const Tensor keep = tensor(std::vector<int64_t>{0, 0, 1, 0, 1}, {5}, kBool);  // true = masked
  const Tensor with_bool = scaled_dot_product_attention(q, k, v, AttnMask::boolean(keep));
  const Tensor with_float =
      scaled_dot_product_attention(q, k, v, AttnMask::boolean(keep.to(kFloat32)));
  EXPECT_TRUE(ref::close(with_bool, with_float, 0, 0));
  const Tensor unmasked = scaled_dot_product_attention(q, k, v);
  EXPECT_FALSE(ref::close(with_bool, unmasked));  // the mask did something
}

TEST(Masks, MultiheadAttentionTakesBoolMasks) {
  manual_seed(4);
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = randn({2, 5, 8});
  const Tensor pad = tensor(std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5}, kBool);
  const Tensor causal = arange(5).unsqueeze(0) > arange(5).unsqueeze(1);  // key j > query i
  const auto opts = [](const Tensor& kp, const Tensor& am) {
    return nn::AttentionForwardOptions().key_padding_mask(AttnMask::boolean(kp)).attn_mask(AttnMask::boolean(am));
  };
  const Tensor with_bool = mha.forward(x, x, x, opts(pad, causal)).output;
  const Tensor with_float = mha.forward(x, x, x, opts(pad.to(kFloat32), causal.to(kFloat32))).output;
  EXPECT_TRUE(ref::close(with_bool, with_float, 0, 0));
  EXPECT_TRUE(ref::close(with_bool, mha.forward(x, x, x, nn::AttentionForwardOptions()
                                                              .causal(true)
                                                              .key_padding_mask(AttnMask::boolean(pad)))
                                        .output, 1e-6, 1e-5));
}

TEST(MaxMin, AlongADimAgainstPyTorch) {
  using Fn = std::function<std::tuple<Tensor, Tensor>(const Tensor&)>;
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"max_dim1", [](const Tensor& x) { return max(x, 1); }},
      {"max_dim0_keep", [](const Tensor& x) { return max(x, 0, true); }},
      {"min_dim1", [](const Tensor& x) { return min(x, 1); }},
      {"min_dim0_keep", [](const Tensor& x) { return x.min(0, true); }},
      {"max_3d", [](const Tensor& x) { return x.max(-2); }},
      {"min_3d", [](const Tensor& x) { return min(x, 2, true); }}};
  for (const auto& [n, fn] : cases) {
    SCOPED_TRACE(n);
    const Tensor x = f32(n, "x", true);
    const auto [values, indices] = fn(x);
    EXPECT_TRUE(ref::equal(indices, i64(n, "i")));  // ties: the first index, as PyTorch
    check_grads(n, values, {x}, {"x"});
  }
}

TEST(MaxMin, NaNWins) {
  const auto [values, indices] = max(f32("max_nan", "x"), 1);
  EXPECT_TRUE(ref::close(values, f32("max_nan", "y")));
  EXPECT_TRUE(ref::equal(indices, i64("max_nan", "i")));
  EXPECT_TRUE(ref::equal(argmin(f32("argmin_nan", "x"), 1), i64("argmin_nan", "y")));
}

TEST(MaxMin, ArgmaxArgminAgainstPyTorch) {
  EXPECT_TRUE(ref::equal(argmax(f32("argmax_all", "x")), i64("argmax_all", "y")));
  EXPECT_TRUE(ref::equal(argmin(f32("argmin_all", "x")), i64("argmin_all", "y")));
  EXPECT_TRUE(ref::equal(argmax(f32("argmax_dim1", "x"), 1), i64("argmax_dim1", "y")));
  EXPECT_TRUE(ref::equal(argmin(f32("argmin_dim0_keep", "x"), 0, true), i64("argmin_dim0_keep", "y")));
  EXPECT_TRUE(ref::equal(f32("argmax_dim1", "x").argmax(1), i64("argmax_dim1", "y")));
  EXPECT_EQ(f32("argmax_all", "x").argmax().dim(), 0);
}

TEST(MaxMin, ZeroDimAndErrors) {
  const auto [v, i] = max(scalar(2.5f), 0);  // a 0-d tensor reduces over dim 0 or -1
  EXPECT_EQ(v.dim(), 0);
  EXPECT_FLOAT_EQ(v.item(), 2.5f);
  EXPECT_EQ(i.item<int64_t>(), 0);
  expect_error<IndexError>([] { min(zeros({2, 3}), 2); }, {"min"});
  expect_error<ShapeError>([] { argmax(zeros({0})); }, {"argmax", "empty"});
  expect_error<TypeError>([] { max(arange(4), 0); }, {"int64", "float32"});
}

TEST(Cat, IntAndBoolAgainstPyTorch) {
  EXPECT_TRUE(ref::equal(cat({i64("cat_int", "a"), i64("cat_int", "b")}, 1), i64("cat_int", "y")));
  EXPECT_TRUE(ref::equal(cat({b8("cat_bool", "a"), b8("cat_bool", "b")}, 0), b8("cat_bool", "y")));
  // Strided int64 inputs: a transposed view.
  const Tensor x = reshape(arange(6), {2, 3});
  EXPECT_EQ(cat({t(x), t(x)}, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5}));
  expect_error<TypeError>([&] { cat({x, x.to(kFloat32)}, 0); }, {"cat", "int64", "float32"});
}

TEST(IndexOps, Int64TensorsEqualIndices) {
  manual_seed(7);
  const Indices ids({3, 0, 2, 3, 1, 0}, {2, 3});
  const Tensor ids_t = ids;  // Indices converts to an int64 tensor
  EXPECT_EQ(ids_t.dtype(), kInt64);
  EXPECT_EQ(ids_t.shape(), (Shape{2, 3}));
  const Tensor w = randn({4, 5}, true);
  EXPECT_TRUE(ref::close(embedding(w, ids_t, 0), embedding(w, ids, 0), 0, 0));
  EXPECT_TRUE(ref::close(index_select(w, 0, tensor({2, 2, 1}, kInt64)), index_select(w, 0, Indices{2, 2, 1}), 0, 0));
  // cross_entropy / nll_loss: the same loss and the same gradient.
  const Tensor logits = randn({6, 4}, true);
  const Tensor targets = reshape(ids_t, {-1});
  Tensor a = cross_entropy(logits, targets, CrossEntropyOptions().label_smoothing(0.1f));
  a.backward();
  const std::vector<float> ga = logits.grad().to_vector();
  logits.zero_grad();
  Tensor b = cross_entropy(logits, Indices(targets), CrossEntropyOptions().label_smoothing(0.1f));
  b.backward();
  EXPECT_FLOAT_EQ(a.item(), b.item());
  EXPECT_EQ(ga, logits.grad().to_vector());
  EXPECT_FLOAT_EQ(nll_loss(log_softmax(logits, 1), targets).item(),
                  nll_loss(log_softmax(logits, 1), Indices(targets)).item());
  // The Embedding module, and targets shaped (B, T) flattened with reshape, as in PyTorch.
  nn::Embedding emb(4, 3);
  EXPECT_TRUE(ref::close(emb(ids_t), emb(ids), 0, 0));
  EXPECT_EQ(reshape(ids_t, {-1}).to_vector<int64_t>(), ids.values);
}

TEST(IndexOps, WrongDtypesAreErrors) {
  const Tensor w = randn({4, 5});
  expect_error<TypeError>([&] { embedding(w, tensor({1.0f, 2.0f})); }, {"embedding", "int64", "float32"});
  expect_error<TypeError>([&] { index_select(w, 0, tensor({1, 0}, kBool)); }, {"index_select", "int64", "bool"});
  // A float32 target holds class probabilities (tapegrad/ops/loss.h), as in PyTorch.
  EXPECT_EQ(cross_entropy(w, softmax(w, 1)).item(), cross_entropy_probs(w, softmax(w, 1)).item());
  expect_error<TypeError>([&] { cross_entropy(w, tensor({1, 0, 1, 1}, kBool)); }, {"cross_entropy", "bool"});
  expect_error<TypeError>([&] { nll_loss(w, tensor({1.0f, 0.0f, 1.0f, 1.0f})); }, {"nll_loss", "int64"});
  expect_error<TypeError>([&] { nn::Embedding(4, 3)(tensor({1.0f})); }, {"Embedding", "int64"});
  // A float op given int64 values (logits, say) refuses them.
  expect_error<TypeError>([] { cross_entropy(arange(4).reshape({2, 2}), tensor({0, 1}, kInt64)); },
                                     {"float32", "int64"});
  expect_error<IndexError>([&] { embedding(w, tensor({4}, kInt64)); }, {"embedding", "4"});
}

TEST(FloatOps, RejectIntAndBoolInputs) {
  const Tensor i = arange(6).reshape({2, 3});
  const Tensor b = i > 2;
  const Tensor f = ones({2, 3});
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"add", [&] { add(i, f); }},
      {"mul scalar", [&] { mul(b, 2.0f); }},
      {"exp", [&] { exp(i); }},
      {"sum", [&] { sum(i); }},
      {"matmul", [&] { matmul(f, t(i)); }},
      {"matmul contiguous", [&] { matmul(i, t(f)); }},
      {"softmax", [&] { softmax(b, 1); }},
      {"relu of a transposed view", [&] { relu(t(i)); }},
      {"linear", [&] { linear(i, f); }},
      {"layer_norm", [&] { layer_norm(i, {3}); }},
      {"in-place add_", [&] { f.add_(i); }},
      {"where's a", [&] { where(b, i, f); }},
      {"masked_fill's input", [&] { masked_fill(i, b, 0.0f); }},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    expect_error<TypeError>(fn, {"expected a float32 tensor", "tensor of shape"});
  }
}

TEST(MaskOps, AllAnyNonzeroAgainstPyTorch) {
  EXPECT_TRUE(ref::equal(all(b8("all", "a")), b8("all", "y")));
  EXPECT_TRUE(ref::equal(any(b8("any_dim1", "a"), 1), b8("any_dim1", "y")));
  EXPECT_TRUE(ref::equal(all(b8("all_dim0_keep", "a"), 0, true), b8("all_dim0_keep", "y")));
  EXPECT_TRUE(ref::equal(nonzero(i64("nonzero", "a")), i64("nonzero", "y")));
  EXPECT_TRUE(all(tensor({1.0f, 2.0f})).item<bool>());  // numbers count as != 0
  EXPECT_FALSE(any(zeros({2, 0})).item<bool>());         // any of nothing is false, all is true
  EXPECT_TRUE(all(zeros({0})).item<bool>());
  EXPECT_EQ(nonzero(scalar(3.0f)).shape(), (Shape{1, 0}));  // as PyTorch
}

TEST(MaskOps, MaskedSelectAgainstPyTorch) {
  const Tensor a = f32("masked_select", "a", true), m = b8("masked_select", "m");
  check_grads("masked_select", masked_select(a, m), {a}, {"a"});
  EXPECT_TRUE(ref::equal(masked_select(i64("masked_select_int", "a"), b8("masked_select_int", "m")),
                         i64("masked_select_int", "y")));
  manual_seed(5);
  const Tensor x = test_util::random_input({3, 4}, -1.0f, 1.0f);
  const Tensor mask = rand({4}) > 0.4;
  const auto r = gradcheck([&](const std::vector<Tensor>& v) { return masked_select(v[0], mask); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
  expect_error<ShapeError>([] { masked_select(zeros({2, 3}), ones({2}, kBool)); }, {"masked_select", "[2, 3]"});
}

TEST(MaskOps, OneHotAgainstPyTorch) {
  EXPECT_TRUE(ref::equal(one_hot(i64("one_hot", "a")), i64("one_hot", "y")));
  EXPECT_TRUE(ref::equal(one_hot(i64("one_hot_k", "a"), 7), i64("one_hot_k", "y")));
  expect_error<IndexError>([] { one_hot(tensor({1, 3}, kInt64), 3); }, {"one_hot", "3 classes"});
  expect_error<IndexError>([] { one_hot(tensor({-1}, kInt64)); }, {"one_hot", "-1"});
  expect_error<TypeError>([] { one_hot(tensor({1.0f})); }, {"one_hot", "int64"});
}

TEST(MaskOps, RandintIsUniformAndSeeded) {
  manual_seed(11);
  const Tensor r = randint(-3, 7, {100000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int64_t> count(10, 0);
  for (int64_t v : r.to_vector<int64_t>()) {
    ASSERT_TRUE(v >= -3 && v < 7) << v;
    ++count[static_cast<size_t>(v + 3)];
  }
  // Each of the 10 values: 10,000 expected, sd ≈ 95; 600 is over 6 sd.
  for (size_t k = 0; k < count.size(); ++k) EXPECT_NEAR(count[k], 10000, 600) << "value " << k - 3;
  manual_seed(11);
  EXPECT_EQ(randint(-3, 7, {100000}).to_vector<int64_t>(), r.to_vector<int64_t>());
  manual_seed(12);
  EXPECT_NE(randint(10, {50}).to_vector<int64_t>(), randint(10, {50}).to_vector<int64_t>());
  expect_error<ValueError>([] { randint(5, 5, {2}); }, {"randint", "low < high"});
}
