// Views: tensors that share their base's storage (ops/views.cpp), and in-place writes through
// them (autograd/views.cpp). Semantics as in PyTorch: writes are seen both ways, versions are
// shared, gradients flow through every view, and a write through a view becomes part of the
// base's history. The reference cases are written by tests/reference/make_views.py into
// tests/fixtures/views/.
#include <functional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "reference.h"
#include "tapegrad/npz.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

namespace {

Tensor seq(const Shape& s) {  // 0, 1, 2, ... in row-major order
  Tensor t = zeros(s);
  float* p = t.data_ptr();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage;
}

Tensor input(const Shape& s) { return test_util::random_input(s, -1.0f, 1.0f); }

std::string tmp_path(const std::string& name) {
  static const test_util::ScratchDir dir("tg_views");
  return dir.path(name);
}

void check_grad(const Fn& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

void check_case(const std::string& name, const std::vector<std::string>& keys, const Fn& fn) {
  SCOPED_TRACE("case " + name);
  auto file = [&](const std::string& key) { return "views/" + name + "." + key + ".npy"; };
  Inputs in;
  for (const auto& k : keys) in.push_back(ref::load(file(k), true));
  Tensor y = fn(in);
  EXPECT_TRUE(ref::close(y, ref::load(file("y")))) << "forward";
  y.backward(ref::load(file("g")));
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_TRUE(ref::close(in[i].grad(), ref::load(file("d" + keys[i])))) << "gradient of " << keys[i];
}

class Views : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(7); }
};

}  // namespace

// ---- geometry ---------------------------------------------------------------------------

TEST_F(Views, StridesAndOffsetsAsInPyTorch) {
  const Tensor x = seq({2, 3, 4});
  EXPECT_EQ(x.strides(), (Shape{12, 4, 1}));
  const Tensor p = permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  const Tensor n = narrow(x, 2, 1, 2);
  EXPECT_EQ(n.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_FALSE(n.is_contiguous());
  const Tensor s = select(x, 0, 1);
  EXPECT_EQ(s.storage_offset(), 12);
  EXPECT_TRUE(s.is_contiguous());
  const Tensor e = expand(reshape(arange(3), {3, 1}), {2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  for (const Tensor& v : {p, n, s, e, reshape(x, {6, 4}), flatten(x), unsqueeze(x, 1),
                          squeeze(unsqueeze(x, 0)), t(select(x, 0, 0)), view(x, {4, -1})})
    EXPECT_TRUE(shares_storage(v, x) || shares_storage(v, e));
}

TEST_F(Views, ValuesMatchACopy) {
  const Tensor x = seq({2, 3, 4});
  EXPECT_EQ(permute(x, {2, 0, 1}).to_vector(), permute(x, {2, 0, 1}).contiguous().to_vector());
  const std::vector<float> n = narrow(x, 2, 1, 2).to_vector();
  EXPECT_EQ(n, (std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_EQ(select(x, 2, -1).to_vector(), (std::vector<float>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(t(select(x, 0, 1)).to_vector(),
            (std::vector<float>{12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23}));
  EXPECT_EQ(expand(tensor({1, 2}), {2, 2}).to_vector(), (std::vector<float>{1, 2, 1, 2}));
  EXPECT_FLOAT_EQ(select(select(select(x, 0, 1), 0, 2), 0, 3).item(), 23.0f);
  EXPECT_EQ(narrow(x, 2, 1, 2).clone().strides(), (Shape{6, 2, 1}));
}

TEST_F(Views, ReshapeIsAViewWhenTheStridesAllowIt) {
  const Tensor x = seq({4, 6});
  const Tensor n = narrow(x, 0, 1, 2);  // rows: contiguous, any reshape is a view
  EXPECT_TRUE(shares_storage(reshape(n, {3, 4}), x));
  const Tensor tr = t(x);  // (6, 4) with strides (1, 6)
  EXPECT_TRUE(shares_storage(reshape(unsqueeze(tr, 1), {6, 4}), x));
  EXPECT_TRUE(shares_storage(view(reshape(permute(reshape(x, {2, 2, 6}), {0, 2, 1}), {2, 6, 2}), {2, 6, 2}), x));
  // Merging dims that are not one block needs a copy: reshape makes it, view() refuses.
  const Tensor flat = reshape(tr, {24});
  EXPECT_FALSE(shares_storage(flat, x));
  EXPECT_EQ(flat.to_vector(), tr.contiguous().to_vector());
  try {
    view(tr, {24});
    ADD_FAILURE() << "view() of a transpose into one dim must throw";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("reshape()"), std::string::npos) << e.what();
  }
}

// ---- writes both ways and one version counter ---------------------------------------------

TEST_F(Views, WritesAreSeenBothWays) {
  Tensor x = seq({3, 4});
  Tensor col = select(x, 1, 2);  // strided
  col.copy_(tensor({-1, -2, -3}));
  EXPECT_EQ(x.to_vector()[2], -1.0f);
  EXPECT_EQ(x.to_vector()[10], -3.0f);
  x.add_(100.0f);
  EXPECT_EQ(col.to_vector(), (std::vector<float>{99, 98, 97}));
  Tensor rows = narrow(x, 0, 1, 2);  // contiguous: raw access works
  rows.data()(0, 0) = 5.0f;
  EXPECT_EQ(x.to_vector()[4], 5.0f);
  // Views of views write the same storage.
  narrow(t(x), 0, 3, 1).fill_(0.0f);
  EXPECT_EQ(select(x, 1, 3).to_vector(), (std::vector<float>{0, 0, 0}));
  // x.narrow(0, 1, 2).copy_(y) changes x, as the issue asks.
  narrow(x, 0, 1, 2).copy_(zeros({2, 4}));
  EXPECT_EQ(select(x, 0, 1).to_vector(), std::vector<float>(4, 0.0f));
}

TEST_F(Views, ShareTheBasesVersionCounter) {
  Tensor x = seq({3, 4});
  Tensor v = t(x);
  const uint32_t before = x.version();
  v.mul_(2.0f);
  EXPECT_EQ(x.version(), before + 1);
  EXPECT_EQ(v.version(), x.version());
  x.zero_();
  EXPECT_EQ(v.version(), before + 2);
}

TEST_F(Views, AWriteThroughAViewIsCaughtByBackward) {
  Tensor w = input({3, 4});
  w.requires_grad_();
  Tensor a = w * 1.0f;
  Tensor y = exp(a);  // saves its output, not a: this one is fine
  Tensor z = a * a;   // saves a
  narrow(a, 1, 0, 2).mul_(3.0f);
  EXPECT_NO_THROW(sum(y).backward());
  try {
    sum(z).backward();
    ADD_FAILURE() << "backward must refuse a value changed through a view";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos);
  }
}

TEST_F(Views, ExpandRefusesInPlaceWrites) {
  Tensor e = expand(tensor({1, 2}), {3, 2});
  EXPECT_THROW(e.add_(1.0f), ValueError);
  EXPECT_THROW(e.copy_(zeros({3, 2})), ValueError);
  EXPECT_THROW(narrow(e, 0, 0, 2).fill_(0.0f), ValueError);
  EXPECT_NO_THROW(select(e, 0, 1).fill_(5.0f));  // its two elements are distinct
  EXPECT_EQ(e.to_vector(), (std::vector<float>{5, 5, 5, 5, 5, 5}));
}

TEST_F(Views, InPlaceOnAViewOfALeafThatRequiresGradIsRefused) {
  Tensor w = input({2, 3});
  w.requires_grad_();
  EXPECT_THROW(select(w, 0, 0).mul_(2.0f), AutogradError);
  {
    NoGradGuard no_grad;
    select(w, 0, 0).mul_(2.0f);  // how parameters are changed
  }
  // A view made without grad mode cannot record a write made with it.
  Tensor a = w * 1.0f;
  Tensor v;
  {
    NoGradGuard no_grad;
    v = narrow(a, 1, 0, 2);
  }
  EXPECT_THROW(v.mul_(2.0f), AutogradError);
}

// ---- raw access -------------------------------------------------------------------------------

TEST_F(Views, RawAccessToAStridedViewNamesContiguous) {
  const Tensor x = seq({3, 4});
  for (const Tensor& v : {t(x), narrow(x, 1, 1, 2), expand(select(x, 0, 0), {2, 4})}) {
    try {
      v.data_ptr();
      ADD_FAILURE() << "data_ptr() of a strided view must throw";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("contiguous()"), std::string::npos) << e.what();
    }
    EXPECT_THROW(v.data(), ValueError);
    EXPECT_THROW(array(v), ValueError);
    EXPECT_EQ(v.contiguous().to_vector(), v.to_vector());
    EXPECT_TRUE(v.contiguous().is_contiguous());
  }
  const Tensor rows = narrow(x, 0, 1, 2);
  EXPECT_EQ(rows.data_ptr(), x.data_ptr() + 4);
  EXPECT_EQ(rows.data()[0], 4.0f);
  EXPECT_THROW(array(rows), ValueError);  // part of a larger array
  EXPECT_TRUE(x.contiguous().is_same(x));
}

// ---- every op reads strided inputs ----------------------------------------------------------

TEST_F(Views, OpsGiveTheSameValuesAndGradientsOnStridedInputs) {
  // Each op runs on a transposed view and on its contiguous copy: same values, and the same
  // gradient reaches the leaf.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](const Tensor& a) { return exp(a); }},
      {"tanh", [](const Tensor& a) { return tanh(a); }},
      {"mul", [](const Tensor& a) { return a * a; }},
      {"sum0", [](const Tensor& a) { return sum(a, {0}); }},
      {"mean", [](const Tensor& a) { return mean(a, {1}, true); }},
      {"softmax", [](const Tensor& a) { return softmax(a, -1); }},
      {"log_softmax", [](const Tensor& a) { return log_softmax(a, 0); }},
      {"matmul", [](const Tensor& a) { return matmul(a, t(a)); }},
      {"linear", [](const Tensor& a) { return linear(a, a, select(a, 0, 0)); }},
      {"layer_norm", [](const Tensor& a) { return layer_norm(a, {4}); }},
      {"gelu", [](const Tensor& a) { return gelu(a); }},
      {"cat", [](const Tensor& a) { return cat({a, a}, 1); }},
      {"where", [](const Tensor& a) { return where(a, a, a * 2.0f); }},
      {"masked_fill", [](const Tensor& a) { return masked_fill(a, a, 1.0f); }},
      {"index_select", [](const Tensor& a) { return index_select(a, 1, Indices{2, 0}); }},
      {"mse", [](const Tensor& a) { return mse_loss(a, t(t(a)) * 0.5f); }},
      {"cross_entropy", [](const Tensor& a) { return cross_entropy(a, Indices{1, 0, 3, 2}); }},
      {"sdpa", [](const Tensor& a) {
         const Tensor q = unsqueeze(a, 0);
         return scaled_dot_product_attention(q, q, q);
       }},
  };
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    Tensor x = input({4, 4});
    x.requires_grad_();
    Tensor y1 = op(t(x));
    sum(y1 * y1).backward();
    const std::vector<float> g1 = x.grad().to_vector();
    x.set_grad(Tensor());
    Tensor y2 = op(t(x).contiguous());
    sum(y2 * y2).backward();
    EXPECT_TRUE(ref::close(y1, y2, 1e-6, 1e-6));
    EXPECT_TRUE(ref::close(tensor(g1, {4, 4}), x.grad(), 1e-6, 1e-6));
  }
}

// ---- gradients through every view op (finite differences) -----------------------------------

TEST_F(Views, GradcheckEveryViewOp) {
  const Inputs x = {input({2, 3, 4})};
  check_grad([](const Inputs& v) { return transpose(v[0], 0, 2) * transpose(v[0], 0, 2); }, x);
  check_grad([](const Inputs& v) { return exp(permute(v[0], {1, 2, 0})); }, x);
  check_grad([](const Inputs& v) { return tanh(t(select(v[0], 0, 1))); }, x);
  check_grad([](const Inputs& v) { return view(v[0], {4, -1}) * 2.0f; }, x);
  check_grad([](const Inputs& v) { return exp(reshape(t(select(v[0], 1, 0)), {8})); }, x);
  check_grad([](const Inputs& v) { return flatten(v[0], 1) * flatten(v[0], 1); }, x);
  check_grad([](const Inputs& v) { return squeeze(unsqueeze(v[0], 2), 2) * v[0]; }, x);
  check_grad([](const Inputs& v) { return tanh(narrow(v[0], 2, 1, 2)); }, x);
  check_grad([](const Inputs& v) { return exp(slice(v[0], 1, -2, 3)); }, x);
  check_grad([](const Inputs& v) { return exp(select(v[0], 2, -1)); }, x);
  check_grad([](const Inputs& v) { return expand(narrow(v[0], 2, 0, 1), {3, 2, 3, 5}) * 1.5f; }, x);
  check_grad([](const Inputs& v) { return narrow(t(select(v[0], 0, 1)), 0, 1, 2).contiguous(); }, x);
}

TEST_F(Views, GradcheckInPlaceWritesThroughViews) {
  const Inputs xw = {input({3, 4}), input({3, 2})};
  check_grad([](const Inputs& v) {
    Tensor a = v[0] * 2.0f;
    narrow(a, 1, 1, 2).mul_(v[1]);
    return a * a;
  }, xw);
  check_grad([](const Inputs& v) {
    Tensor a = v[0] * 1.0f;
    narrow(t(a), 0, 2, 2).copy_(t(v[1]));  // a strided view of a strided view
    return tanh(a);
  }, xw);
  check_grad([](const Inputs& v) {
    Tensor a = v[0] * 1.0f;
    Tensor other = narrow(a, 1, 1, 3);  // made before the write, which changes part of it
    narrow(a, 1, 0, 2).div_(v[1] + 3.0f);
    return other * other;
  }, xw);
  check_grad([](const Inputs& v) {
    Tensor a = v[0] * 1.0f;
    Tensor row = select(a, 0, 1);
    a.sub_(unsqueeze(select(a, 1, 0), 1));  // the operand is a view of a itself
    return row * row;
  }, xw);
}

// ---- products read transposed views in place ---------------------------------------------

namespace {
// The op that produced input i of y's op ("permute" for a view read in place, "contiguous"
// for a copy).
std::string input_op(const Tensor& y, size_t i) {
  const auto& e = y.impl()->grad_fn->next.at(i);
  return e.fn ? e.fn->name : "(leaf)";
}
}  // namespace

TEST_F(Views, ProductsReadTransposedViewsWithoutACopy) {
  Tensor x = input({5, 3}), w = input({5, 4});
  x.requires_grad_();
  w.requires_grad_();
  EXPECT_EQ(input_op(matmul(t(x), w), 0), "permute");
  EXPECT_EQ(input_op(matmul(t(w), x), 1), "(leaf)");
  EXPECT_EQ(input_op(linear(x, t(narrow(w, 0, 0, 3))), 1), "permute");  // weight (4, 3), transposed
  EXPECT_EQ(input_op(linear(narrow(w, 1, 1, 3), t(narrow(w, 0, 0, 3))), 0), "narrow");  // rows 4 apart
  EXPECT_EQ(input_op(matmul(transpose(reshape(w, {5, 2, 2}), 1, 2), narrow(t(x), 0, 0, 2)), 0), "permute");
  // A matrix whose rows repeat (an expand) is copied first.
  EXPECT_EQ(input_op(matmul(expand(narrow(x, 0, 0, 1), {4, 3}), t(x)), 0), "contiguous");
  // Attention reads (B, H, T, D) views of (B, T, H·D) projections in place.
  Tensor q = input({2, 5, 6});
  q.requires_grad_();
  const Tensor heads = transpose(view(q, {2, 5, 3, 2}), 1, 2);
  EXPECT_FALSE(heads.is_contiguous());
  EXPECT_EQ(input_op(scaled_dot_product_attention(heads, heads, heads), 0), "permute");
  // The values and gradients are those of the copies.
  check_grad([](const Inputs& v) { return matmul(t(v[0]), v[1]); }, {x, w});
  check_grad([](const Inputs& v) {
    return linear(narrow(v[1], 1, 1, 3), t(narrow(v[0], 0, 0, 3)), narrow(select(v[1], 0, 2), 0, 0, 3));
  }, {x, w});
  check_grad([](const Inputs& v) {
    const Tensor h = transpose(view(v[0], {2, 5, 3, 2}), 1, 2);
    return scaled_dot_product_attention(h, h, h, AttnMask(), true);
  }, {q});
}

// ---- PyTorch reference values --------------------------------------------------------------

TEST_F(Views, MatchPyTorchReadingViews) {
  check_case("chain", {"x", "w"}, [](auto& v) { return slice(reshape(t(v[0]) * v[1], {-1}), 0, 2, 10); });
  check_case("permute_reshape_copy", {"x", "w"},
             [](auto& v) { return reshape(permute(v[0], {2, 0, 1}), {4, 6}) * v[1]; });
  check_case("expand", {"x", "w"}, [](auto& v) { return expand(v[0], {3, 2, 4}) * v[1]; });
  check_case("squeeze_unsqueeze", {"x", "w"},
             [](auto& v) { return flatten(squeeze(unsqueeze(v[0], 1) * v[1], 1)); });
  check_case("select_narrow", {"x"}, [](auto& v) {
    return narrow(select(v[0], 1, 2), 0, 1, 2) * narrow(select(v[0], 0, -1), 0, 0, 2);
  });
  check_case("matmul_transposed", {"x", "w"},
             [](auto& v) { return matmul(t(v[0]), v[1]) + matmul(t(v[1]), v[0]); });
  check_case("matmul_batched_transposed", {"x", "w"},
             [](auto& v) { return matmul(transpose(v[0], 1, 2), v[1]); });
  check_case("linear_on_views", {"x", "w", "b"},
             [](auto& v) { return linear(narrow(v[0], 1, 1, 3), t(v[1]), v[2]); });
  check_case("attention_on_views", {"q", "k", "v"}, [](auto& v) {
    auto heads = [](const Tensor& x) { return transpose(view(x, {2, 5, 3, 2}), 1, 2); };
    return scaled_dot_product_attention(heads(v[0]), heads(v[1]), heads(v[2]), AttnMask(), true);
  });
}

TEST_F(Views, MatchPyTorchWritingThroughViews) {
  check_case("narrow_copy", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 2.0f;
    narrow(a, 1, 1, 2).copy_(v[1]);
    return a * a;
  });
  check_case("select_mul", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 1.5f;
    select(a, 0, 1).mul_(v[1]);
    return tanh(a);
  });
  check_case("transpose_add", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 1.0f;
    t(a).add_(v[1]);
    return exp(a) * v[0];
  });
  check_case("overlapping_views", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 1.0f;
    Tensor v1 = slice(a, 1, 0, 3), v2 = slice(a, 1, 1, 4);
    v1.mul_(v[1]);
    return v2 * v2 + narrow(a, 1, 0, 3);
  });
  check_case("view_of_view", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 1.0f;
    narrow(t(a), 0, 1, 2).sub_(v[1]);
    return sum(a * a, {0});
  });
  check_case("base_write_then_view", {"x", "w"}, [](auto& v) {
    Tensor a = v[0] * 1.0f;
    Tensor row = select(a, 0, 1);
    a.mul_(2.0f);
    a.div_(v[0] + 3.0f);
    return row * v[1];
  });
  check_case("copy_into_plain_buffer", {"x", "w"}, [](auto& v) {
    Tensor a = zeros({3, 4});
    select(a, 1, 2).copy_(v[0]);
    narrow(a, 0, 0, 2).add_(v[1]);
    return a * a;
  });
  check_case("clamp_fill_through_view", {"x"}, [](auto& v) {
    Tensor a = v[0] * 1.0f;
    narrow(t(a), 0, 0, 2).clamp_(-0.5f, 0.5f);
    narrow(a, 1, 3, 1).fill_(0.25f);
    return a * v[0];
  });
}

// ---- files hold a view's own elements ----------------------------------------------------------

TEST_F(Views, CheckpointsAndNpzWriteAViewsOwnElements) {
  const Tensor x = seq({4, 5});
  const Tensor tr = t(x), rows = narrow(x, 0, 1, 2), col = select(x, 1, 3);
  const std::string ck_path = tmp_path("views.ckpt");
  Checkpoint ck;
  ck.model = {{"t", tr}, {"rows", rows}, {"col", col}};
  ck.states["s"].tensors["e"] = expand(col, {2, 4});
  ck.save(ck_path);
  const Checkpoint back = Checkpoint::load(ck_path);
  EXPECT_EQ(back.model_tensor("t").to_vector(), tr.to_vector());
  EXPECT_EQ(back.model_tensor("t").shape(), (Shape{5, 4}));
  EXPECT_EQ(back.model_tensor("rows").to_vector(), rows.to_vector());
  EXPECT_EQ(back.model_tensor("col").to_vector(), col.to_vector());
  EXPECT_EQ(back.get("s").tensors.at("e").to_vector(), expand(col, {2, 4}).to_vector());
  
  const std::string npz_path = tmp_path("views.npz");
  write_npz(npz_path, {{"t", tr}, {"rows", rows}, {"col", col}});
  const auto arrays = read_npz(npz_path);
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays[0].second.to_vector(), tr.to_vector());
  EXPECT_EQ(arrays[1].second.to_vector(), rows.to_vector());
  EXPECT_EQ(arrays[2].second.to_vector(), col.to_vector());
}

// ---- regressions found in review -----------------------------------------------------------

TEST_F(Views, BackwardFromAViewWhoseBaseWasWrittenGoesThroughTheWrite) {
  Tensor a = tensor({1, 2, 3}, true);
  Tensor x = a * 1.0f;
  Tensor v = narrow(x, 0, 0, 2);
  x.mul_(2.0f);
  v.backward(ones({2}));
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{2, 2, 0}));  // PyTorch: AsStridedBackward
  // A view of a plain buffer that a write gave a history.
  Tensor w = tensor({1, 2, 3}, true);
  Tensor y = zeros({3});
  Tensor u = narrow(y, 0, 0, 2);
  y.copy_(w);
  EXPECT_TRUE(u.requires_grad());
  EXPECT_FALSE(u.is_leaf());
  EXPECT_EQ(u.op_name(), "as_strided");
  u.retain_grad();
  sum(u * 3.0f).backward();
  EXPECT_EQ(w.grad().to_vector(), (std::vector<float>{3, 3, 0}));
  EXPECT_EQ(u.grad().to_vector(), (std::vector<float>{3, 3}));
}

TEST_F(Views, SetGradCopiesAView) {
  Tensor p = ones({2, 3}, true);
  const Tensor m = seq({3, 2});
  p.set_grad(t(m));
  EXPECT_EQ(p.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(p.grad().to_vector(), t(m).to_vector());
  Tensor q = ones({2}, true);
  q.set_grad(narrow(tensor({100, 3, 4, 100}), 0, 1, 2));
  EXPECT_EQ(q.grad().to_vector(), (std::vector<float>{3, 4}));
  EXPECT_FLOAT_EQ(nn::utils::clip_grad_norm_({q}, 1e9), 5.0f);
}

TEST_F(Views, MaxReadsAStridedInput) {
  const Tensor x = input({3, 4});
  const auto [v1, i1] = max(t(x), 1);
  const auto [v2, i2] = max(t(x).contiguous(), 1);
  EXPECT_EQ(v1.to_vector(), v2.to_vector());
  EXPECT_EQ(i1.to_vector<int64_t>(), i2.to_vector<int64_t>());
}

TEST_F(Views, EmptyExpandsAndSumsDoNotCrash) {
  Tensor x = rand({3}, true);
  sum(expand(x, {0, 3})).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<float>(3, 0.0f));
  EXPECT_EQ(sum(zeros({0, 3}), {0}).to_vector(), std::vector<float>(3, 0.0f));
  EXPECT_EQ(sum(zeros({0, 3}), {0}, true).shape(), (Shape{1, 3}));
  x.set_grad(Tensor());
  sum(add(zeros({0, 3}), x)).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<float>(3, 0.0f));
}

TEST_F(Views, ANoGradViewOfARewrittenBaseIsRefusedInGradMode) {
  Tensor a = rand({3}, true);
  Tensor x = a * 1.0f;
  Tensor v;
  {
    NoGradGuard no_grad;
    v = narrow(x, 0, 0, 2);
  }
  x.mul_(2.0f);
  EXPECT_THROW(v * 3.0f, AutogradError);  // PyTorch: "A view was created in no_grad mode..."
  NoGradGuard no_grad;
  EXPECT_EQ((v * 1.0f).to_vector(), narrow(x, 0, 0, 2).to_vector());
}

TEST_F(Views, DivThroughAViewSurvivesAWriteToAnotherSlice) {
  Tensor a = tensor({1, 2, 3, 4}, true), b = tensor({2, 2}, true);
  Tensor x = a * 1.0f;
  narrow(x, 0, 0, 2).div_(b);
  narrow(x, 0, 2, 2).mul_(3.0f);
  sum(x).backward();
  EXPECT_EQ(a.grad().to_vector(), (std::vector<float>{0.5f, 0.5f, 3, 3}));  // PyTorch's
  EXPECT_EQ(b.grad().to_vector(), (std::vector<float>{-0.25f, -0.5f}));
}

TEST_F(Views, ZeroSizeAndEdgeGeometryAsInPyTorch) {
  EXPECT_EQ(zeros({2, 0, 3}).strides(), (Shape{3, 3, 1}));
  EXPECT_TRUE(expand(rand({3}), {0, 3}).is_contiguous());
  EXPECT_EQ(narrow(seq({5}), 0, -2, 2).to_vector(), (std::vector<float>{3, 4}));
  EXPECT_THROW(narrow(seq({5}), 0, -6, 1), IndexError);
  EXPECT_FLOAT_EQ(transpose(scalar(2.0f), 0, -1).item(), 2.0f);
}
