// The elementwise ops and losses of issue 16 (tapegrad/ops/pointwise.h, tapegrad/ops/loss.h,
// class weights in cross_entropy/nll_loss): finite-difference gradient checks, PyTorch 1.13
// reference values (tests/reference/make_pointwise_loss.py -> tests/fixtures/pointwise_loss, see its header for
// the file naming), and the errors for bad input.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reference.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {

// ---- PyTorch reference cases --------------------------------------------------------------

using Fn = std::function<Tensor(const Inputs&)>;

std::string file(const std::string& name, const std::string& key) {
  return "pointwise_loss/" + name + "." + key + ".npy";
}

/// ref::close, where infinities of the same sign also count as equal (1/0, 0^-1).
::testing::AssertionResult close(const Tensor& a, const Tensor& e, double atol, double rtol) {
  if (!a.defined() || a.shape() != e.shape()) return ref::close(a, e, atol, rtol);
  std::vector<float> av = a.to_vector(), ev = e.to_vector();
  for (size_t i = 0; i < av.size(); ++i)
    if (std::isinf(av[i]) && av[i] == ev[i]) av[i] = ev[i] = 0.0f;
  return ref::close(tensor(av, a.shape()), tensor(ev, e.shape()), atol, rtol);
}

/// Loads the differentiated inputs `keys` and then the constants `consts` of case `name`,
/// checks y = fn(all of them) and, after backward(g), d(key) for each key.
void check_case(const std::string& name, const std::vector<std::string>& keys, const Fn& fn,
                const std::vector<std::string>& consts = {}, double atol = 1e-5, double rtol = 1e-5) {
  SCOPED_TRACE("case " + name);
  Inputs in;
  for (const auto& k : keys) in.push_back(ref::load(file(name, k), true));
  for (const auto& k : consts) in.push_back(ref::load(file(name, k)));
  Tensor y = fn(in);
  EXPECT_TRUE(close(y, ref::load(file(name, "y")), atol, rtol)) << "forward";
  y.backward(ref::load(file(name, "g")));
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_TRUE(close(in[i].grad(), ref::load(file(name, "d" + keys[i])), atol, rtol))
        << "gradient of " << keys[i];
}

Indices idx(const std::string& name) { return ref::load_indices(file(name, "t")); }

const char* red_names[] = {"none", "mean", "sum"};
const Reduction reds[] = {Reduction::None, Reduction::Mean, Reduction::Sum};

// ---- gradient checks -------------------------------------------------------------------------

Tensor input(const Shape& s, float lo = -1.0f, float hi = 1.0f) { return test_util::random_input(s, lo, hi); }

void check(const Fn& fn, const Inputs& xs, GradcheckOptions opt = GradcheckOptions()) {
  const auto r = gradcheck(fn, xs, opt);
  EXPECT_TRUE(r.ok) << r.message;
}

class Ops16Grad : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(16); }
};

using test_util::expect_error;

}  // namespace

// ---- elementwise ops against PyTorch -----------------------------------------------------------

TEST(Ops16Reference, Clamp) {
  check_case("clamp_both", {"x"}, [](auto& v) { return clamp(v[0], -0.5f, 0.5f); });
  check_case("clamp_min", {"x"}, [](auto& v) { return clamp(v[0], 0.0f); });
  check_case("clamp_max", {"x"}, [](auto& v) { return clamp(v[0], std::nullopt, -0.5f); });
  check_case("clamp_inverted", {"x"}, [](auto& v) { return clamp(v[0], 0.5f, -0.5f); });
  check_case("clamp_min", {"x"}, [](auto& v) { return clamp_min(v[0], 0.0f); });
  check_case("clamp_max", {"x"}, [](auto& v) { return clamp_max(v[0], -0.5f); });
}

// Tensor bounds, broadcast: lo (3, 1), hi (5), one row with lo > hi.
TEST(Ops16Reference, ClampTensorBounds) {
  check_case("clamp_tensor", {"x", "lo", "hi"}, [](auto& v) { return clamp(v[0], v[1], v[2]); });
  check_case("clamp_tensor_min", {"x", "lo"}, [](auto& v) { return clamp(v[0], v[1]); });
  check_case("clamp_tensor_max", {"x", "hi"}, [](auto& v) { return clamp(v[0], Tensor(), v[1]); });
}

TEST(Ops16Reference, Transcendental) {
  check_case("sin", {"x"}, [](auto& v) { return sin(v[0]); });
  check_case("cos", {"x"}, [](auto& v) { return cos(v[0]); });
  check_case("expm1", {"x"}, [](auto& v) { return expm1(v[0]); });
  check_case("log1p", {"x"}, [](auto& v) { return log1p(v[0]); });
  check_case("rsqrt", {"x"}, [](auto& v) { return rsqrt(v[0]); }, {}, 1e-5, 1e-5);
  check_case("reciprocal", {"x"}, [](auto& v) { return reciprocal(v[0]); });
}

TEST(Ops16Reference, Activations) {
  check_case("softplus", {"x"}, [](auto& v) { return softplus(v[0]); });
  check_case("softplus_b2_t5", {"x"}, [](auto& v) { return softplus(v[0], 2.0f, 5.0f); });
  check_case("silu", {"x"}, [](auto& v) { return silu(v[0]); });
  check_case("leaky_relu", {"x"}, [](auto& v) { return leaky_relu(v[0]); });
  check_case("leaky_relu_02", {"x"}, [](auto& v) { return leaky_relu(v[0], 0.2f); });
  check_case("elu", {"x"}, [](auto& v) { return elu(v[0]); });
  check_case("elu_05", {"x"}, [](auto& v) { return elu(v[0], 0.5f); });
}

// Halves (±0.5, ±1.5, ±2.5), -0, ±1e-3: round to even; the gradient is zero.
TEST(Ops16Reference, Rounding) {
  check_case("sign", {"x"}, [](auto& v) { return sign(v[0]); });
  check_case("round", {"x"}, [](auto& v) { return round(v[0]); });
  check_case("floor", {"x"}, [](auto& v) { return floor(v[0]); });
  check_case("ceil", {"x"}, [](auto& v) { return ceil(v[0]); });
}

TEST(Ops16Reference, PowTensorExponent) {
  check_case("pow_bcast", {"a", "b"}, [](auto& v) { return pow(v[0], v[1]); }, {}, 1e-5, 1e-4);
  // base 0: d/da is 0 where b = 0 (inf for b < 0), d/db is 0 where b >= 0
  check_case("pow_zero_base", {"a", "b"}, [](auto& v) { return pow(v[0], v[1]); });
  check_case("pow_scalar_base", {"b"}, [](auto& v) { return pow(2.5f, v[0]); }, {}, 1e-5, 1e-4);
  check_case("pow_zero_scalar_base", {"b"}, [](auto& v) { return pow(0.0f, v[0]); });
}

// ---- losses against PyTorch ----------------------------------------------------------------------

TEST(Ops16Reference, PointwiseLosses) {
  for (int r = 0; r < 3; ++r) {
    const std::string s = red_names[r];
    const Reduction red = reds[r];
    check_case("bce_" + s, {"x", "t"},
               [red](auto& v) { return binary_cross_entropy(v[0], v[1], BCELossOptions().reduction(red)); });
    check_case("bce_logits_" + s, {"x", "t"}, [red](auto& v) {
      return binary_cross_entropy_with_logits(v[0], v[1], BCEWithLogitsLossOptions().reduction(red));
    });
    check_case("smooth_l1_" + s, {"x", "t"},
               [red](auto& v) { return smooth_l1_loss(v[0], v[1], SmoothL1LossOptions().reduction(red)); });
    check_case("huber_" + s, {"x", "t"},
               [red](auto& v) { return huber_loss(v[0], v[1], HuberLossOptions().reduction(red)); });
    check_case("l1_" + s, {"x", "t"}, [red](auto& v) { return l1_loss(v[0], v[1], red); });
  }
  check_case("smooth_l1_beta05", {"x", "t"}, [](auto& v) {
    return smooth_l1_loss(v[0], v[1], SmoothL1LossOptions().reduction(Reduction::None).beta(0.5f));
  });
  check_case("smooth_l1_beta0", {"x", "t"}, [](auto& v) {
    return smooth_l1_loss(v[0], v[1], SmoothL1LossOptions().reduction(Reduction::Sum).beta(0.0f));
  });
  check_case("huber_delta2", {"x", "t"}, [](auto& v) {
    return huber_loss(v[0], v[1], HuberLossOptions().reduction(Reduction::None).delta(2.0f));
  });
}

TEST(Ops16Reference, BinaryCrossEntropyWeightsAndEdges) {
  check_case("bce_weight", {"x", "t"},
             [](auto& v) { return binary_cross_entropy(v[0], v[1], BCELossOptions().weight(v[2])); }, {"w"});
  // x = 0 and 1: the logs clamp at -100; the gradient divides by max(x(1-x), 1e-12).
  check_case("bce_edges", {"x"}, [](auto& v) {
    return binary_cross_entropy(v[0], v[1], BCELossOptions().reduction(Reduction::Sum));
  }, {"t"});
  check_case("bce_logits_weights", {"x", "t"}, [](auto& v) {
    return binary_cross_entropy_with_logits(v[0], v[1], BCEWithLogitsLossOptions().weight(v[2]).pos_weight(v[3]));
  }, {"w", "pw"});
}

// Logits ±100 and ±1e4: finite losses and gradients, as PyTorch's.
TEST(Ops16Reference, BinaryCrossEntropyWithLogitsLargeLogits) {
  check_case("bce_logits_big", {"x", "t"}, [](auto& v) {
    return binary_cross_entropy_with_logits(v[0], v[1], BCEWithLogitsLossOptions().reduction(Reduction::None));
  });
  check_case("bce_logits_big_pw", {"x", "t"}, [](auto& v) {
    return binary_cross_entropy_with_logits(
        v[0], v[1], BCEWithLogitsLossOptions().pos_weight(v[2]).reduction(Reduction::Sum));
  }, {"pw"});
  const Tensor x = ref::load(file("bce_logits_big", "x"));
  const Tensor t = ref::load(file("bce_logits_big", "t"));
  for (float v : binary_cross_entropy_with_logits(x, t, BCEWithLogitsLossOptions().reduction(Reduction::None))
                     .to_vector())
    EXPECT_TRUE(std::isfinite(v));
}

TEST(Ops16Reference, KLDiv) {
  const char* names[] = {"none", "batchmean", "sum", "mean"};
  const KLDivReduction r[] = {KLDivReduction::None, KLDivReduction::BatchMean, KLDivReduction::Sum,
                              KLDivReduction::Mean};
  for (int i = 0; i < 4; ++i) {
    const KLDivReduction red = r[i];
    check_case(std::string("kl_") + names[i], {"x", "t"},
               [red](auto& v) { return kl_div(v[0], v[1], KLDivLossOptions().reduction(red)); });
    check_case(std::string("kl_log_target_") + names[i], {"x", "t"}, [red](auto& v) {
      return kl_div(v[0], v[1], KLDivLossOptions().reduction(red).log_target(true));
    });
  }
  // zero targets add nothing (t log t = 0 there)
  check_case("kl_zero_target", {"x"}, [](auto& v) {
    return kl_div(v[0], v[1], KLDivLossOptions().reduction(KLDivReduction::BatchMean));
  }, {"t"});
}

TEST(Ops16Reference, CrossEntropyProbabilityTargets) {
  check_case("ce_probs_mean", {"x", "t"}, [](auto& v) { return cross_entropy(v[0], v[1]); });
  check_case("ce_probs_none_smooth", {"x", "t"}, [](auto& v) {
    return cross_entropy(v[0], v[1], CrossEntropyOptions().reduction(Reduction::None).label_smoothing(0.2f));
  });
  check_case("ce_probs_weight_smooth", {"x", "t"}, [](auto& v) {
    return cross_entropy(v[0], v[1], CrossEntropyOptions().weight(v[2]).label_smoothing(0.1f));
  }, {"w"});
  check_case("ce_probs_3d_sum", {"x", "t"}, [](auto& v) {
    return cross_entropy_probs(v[0], v[1], CrossEntropyOptions().weight(v[2]).reduction(Reduction::Sum));
  }, {"w"});
  check_case("ce_probs_1d", {"x", "t"}, [](auto& v) { return cross_entropy(v[0], v[1]); });
}

TEST(Ops16Reference, ClassWeights) {
  for (int r = 0; r < 3; ++r) {
    const std::string s = red_names[r];
    const Reduction red = reds[r];
    const Indices t = idx("ce_weight_" + s);
    check_case("ce_weight_" + s, {"x"}, [&](auto& v) {
      return cross_entropy(v[0], t, CrossEntropyOptions().weight(v[1]).reduction(red));
    }, {"w"});
    check_case("ce_weight_smooth_" + s, {"x"}, [&](auto& v) {
      return cross_entropy(v[0], t, CrossEntropyOptions().weight(v[1]).reduction(red).label_smoothing(0.3f));
    }, {"w"});
    check_case("nll_weight_" + s, {"x"}, [&](auto& v) {
      return nll_loss(v[0], t, CrossEntropyOptions().weight(v[1]).reduction(red));
    }, {"w"});
  }
  const Indices t3 = idx("ce_weight_3d_smooth");
  check_case("ce_weight_3d_smooth", {"x"}, [&](auto& v) {
    return cross_entropy(v[0], t3, CrossEntropyOptions().weight(v[1]).label_smoothing(0.2f));
  }, {"w"});
  const Indices ti = idx("ce_weight_ignore3");
  check_case("ce_weight_ignore3", {"x"}, [&](auto& v) {
    return cross_entropy(v[0], ti, CrossEntropyOptions().weight(v[1]).ignore_index(3));
  }, {"w"});
}

// ---- gradient checks ---------------------------------------------------------------------------

TEST_F(Ops16Grad, Elementwise) {
  const Inputs x = {input({2, 5}, -2.0f, 2.0f)};
  const Inputs pos = {input({2, 5}, 0.2f, 2.0f)};
  check([](const Inputs& v) { return sin(v[0]); }, x);
  check([](const Inputs& v) { return cos(v[0]); }, x);
  check([](const Inputs& v) { return expm1(v[0]); }, x);
  check([](const Inputs& v) { return log1p(v[0]); }, pos);
  check([](const Inputs& v) { return reciprocal(v[0]); }, pos);
  check([](const Inputs& v) { return rsqrt(v[0]); }, pos);
  check([](const Inputs& v) { return softplus(v[0]); }, x);
  check([](const Inputs& v) { return softplus(v[0], 3.0f, 2.0f); }, x);  // both branches
  check([](const Inputs& v) { return silu(v[0]); }, x);
  check([](const Inputs& v) { return leaky_relu(v[0], 0.2f); }, x);  // both sides of 0
  check([](const Inputs& v) { return elu(v[0], 0.7f); }, x);
  // piecewise constant: zero gradient, which the finite difference agrees with off the steps
  const Inputs off = {tensor({-1.3f, -0.7f, 0.2f, 0.6f, 1.7f}, true)};
  check([](const Inputs& v) { return sign(v[0]); }, off);
  check([](const Inputs& v) { return round(v[0]); }, off);
  check([](const Inputs& v) { return floor(v[0]); }, off);
  check([](const Inputs& v) { return ceil(v[0]); }, off);
}

// Near both bounds (0.01 inside and outside): the gradient passes inside only.
TEST_F(Ops16Grad, ClampNearBounds) {
  const Inputs x = {tensor({-0.51f, -0.49f, 0.0f, 0.49f, 0.51f, 2.0f}, true)};
  check([](const Inputs& v) { return clamp(v[0], -0.5f, 0.5f); }, x);
  check([](const Inputs& v) { return clamp(v[0], -0.5f); }, x);
  check([](const Inputs& v) { return clamp(v[0], std::nullopt, 0.5f); }, x);
  check([](const Inputs& v) { return clamp(v[0], 0.5f, -0.5f); }, x);
  // at the bounds exactly, PyTorch's convention: the gradient passes (bounds included)
  Tensor at = tensor({-0.5f, 0.5f}, true);
  sum(clamp(at, -0.5f, 0.5f)).backward();
  EXPECT_EQ(at.grad().to_vector(), (std::vector<float>{1.0f, 1.0f}));
}

TEST_F(Ops16Grad, ClampTensorBounds) {
  const Tensor x = tensor({-0.51f, -0.49f, 0.0f, 0.49f, 0.51f, 2.0f, -3.0f, 1.0f}, {2, 4}, true);
  const Tensor lo = tensor({-0.5f, 1.5f}, {2, 1}, true);  // row 1: lo > hi
  const Tensor hi = tensor({0.5f, 0.3f, 1.2f, 0.9f}, {4}, true);
  check([](const Inputs& v) { return clamp(v[0], v[1], v[2]); }, {x, lo, hi});
  check([](const Inputs& v) { return clamp(v[0], v[1]); }, {x, lo});
  check([](const Inputs& v) { return clamp(v[0], Tensor(), v[1]); }, {x, hi});
  EXPECT_THROW(clamp(x, Tensor(), Tensor()), ValueError);
  EXPECT_THROW(clamp(x, ones({3})), ShapeError);
}

TEST_F(Ops16Grad, Pow) {
  check([](const Inputs& v) { return pow(v[0], v[1]); }, {input({3, 1, 4}, 0.3f, 2.0f), input({2, 4})});
  check([](const Inputs& v) { return pow(v[0], v[1]); }, {input({2, 3}, 0.3f, 2.0f), input({3})});
  check([](const Inputs& v) { return pow(1.7f, v[0]); }, {input({2, 3})});
}

TEST_F(Ops16Grad, PointwiseLosses) {
  const Inputs pt = {input({3, 4}, 0.1f, 0.9f), input({3, 4}, 0.1f, 0.9f)};
  check([](const Inputs& v) { return binary_cross_entropy(v[0], v[1]); }, pt);
  const Tensor w = rand({4}) + 0.5f;
  check([w](const Inputs& v) { return binary_cross_entropy(v[0], v[1], BCELossOptions().weight(w)); }, pt);
  const Inputs lt = {input({3, 4}, -3.0f, 3.0f), input({3, 4}, 0.1f, 0.9f)};
  check([](const Inputs& v) { return binary_cross_entropy_with_logits(v[0], v[1]); }, lt);
  check([w](const Inputs& v) {
    return binary_cross_entropy_with_logits(
        v[0], v[1], BCEWithLogitsLossOptions().pos_weight(w * 2.0f).weight(w).reduction(Reduction::Sum));
  }, lt);
  // large logits: the loss is linear there, the finite difference sees its slope
  const Inputs big = {tensor({100.0f, -100.0f, 30.0f, -30.0f}, true), tensor({0.2f, 0.7f, 0.5f, 1.0f}, true)};
  check([](const Inputs& v) { return binary_cross_entropy_with_logits(v[0], v[1]); }, big);
  const Inputs d = {input({3, 4}, -3.0f, 3.0f), input({3, 4})};
  check([](const Inputs& v) { return smooth_l1_loss(v[0], v[1]); }, d);
  check([](const Inputs& v) { return smooth_l1_loss(v[0], v[1], SmoothL1LossOptions().beta(0.5f)); }, d);
  check([](const Inputs& v) { return huber_loss(v[0], v[1], HuberLossOptions().delta(1.5f)); }, d);
  check([](const Inputs& v) { return l1_loss(v[0], v[1], Reduction::Sum); }, d);
  const Inputs kl = {input({3, 4}, -3.0f, -0.2f), input({3, 4}, 0.1f, 1.0f)};
  check([](const Inputs& v) {
    return kl_div(v[0], v[1], KLDivLossOptions().reduction(KLDivReduction::BatchMean));
  }, kl);
  check([](const Inputs& v) {
    return kl_div(v[0], v[1], KLDivLossOptions().log_target(true).reduction(KLDivReduction::None));
  }, {input({3, 4}, -3.0f, -0.2f), input({3, 4}, -3.0f, -0.2f)});
}

TEST_F(Ops16Grad, CrossEntropyWeightsAndProbabilities) {
  const Tensor w = rand({5}) + 0.5f;
  const Indices t{2, 0, -100, 4};
  check([&](const Inputs& v) { return cross_entropy(v[0], t, CrossEntropyOptions().weight(w)); },
        {input({4, 5}, -2.0f, 2.0f)});
  check([&](const Inputs& v) {
    return cross_entropy(v[0], t, CrossEntropyOptions().weight(w).label_smoothing(0.2f));
  }, {input({4, 5}, -2.0f, 2.0f)});
  check([&](const Inputs& v) { return nll_loss(v[0], t, CrossEntropyOptions().weight(w)); },
        {input({4, 5})});
  check([&](const Inputs& v) {
    return cross_entropy(v[0], softmax(v[1], 1), CrossEntropyOptions().weight(w).label_smoothing(0.1f));
  }, {input({3, 5}, -2.0f, 2.0f), input({3, 5})});
  check([](const Inputs& v) {
    return cross_entropy(v[0], v[1], CrossEntropyOptions().reduction(Reduction::None));
  }, {input({2, 4, 3}), input({2, 4, 3}, 0.1f, 1.0f)});
}

// A strided input (a transposed view) gives the values and gradient of its contiguous copy.
TEST_F(Ops16Grad, StridedInputs) {
  const Tensor base = input({3, 4}, -2.0f, 2.0f);
  const Tensor tc = transpose(base, 0, 1).contiguous().detach().requires_grad_();
  for (auto f : std::vector<Fn>{[](const Inputs& v) { return softplus(v[0], 2.0f); },
                                [](const Inputs& v) { return clamp(v[0], -0.5f, 1.0f); },
                                [](const Inputs& v) { return pow(v[0].detach() * 0.0f + 2.0f, v[0]); },
                                [](const Inputs& v) { return huber_loss(v[0], ones({4, 3}), {}); }}) {
    base.zero_grad();
    tc.zero_grad();
    const Tensor a = f({transpose(base, 0, 1)}), b = f({tc});
    EXPECT_TRUE(ref::close(a, b, 0, 0));
    sum(a).backward();
    sum(b).backward();
    EXPECT_TRUE(ref::close(transpose(base.grad(), 0, 1).contiguous(), tc.grad(), 0, 0));
  }
}

// ---- errors ----------------------------------------------------------------------------------

TEST(Ops16Errors, BadOptions) {
  const Tensor x = ones({2, 3});
  expect_error<ValueError>([&] { clamp(x, std::nullopt, std::nullopt); }, {"clamp", "min", "max"});
  expect_error<ValueError>([&] { softplus(x, 0.0f); }, {"softplus", "beta", "> 0"});
  expect_error<ValueError>([&] { softplus(x, -1.0f); }, {"softplus", "beta"});
  expect_error<ValueError>([&] { smooth_l1_loss(x, x, SmoothL1LossOptions().beta(-1.0f)); },
                           {"smooth_l1_loss", "beta", ">= 0"});
  expect_error<ValueError>([&] { huber_loss(x, x, HuberLossOptions().delta(0.0f)); }, {"huber_loss", "delta"});
  expect_error<ValueError>([&] { cross_entropy(x, x, CrossEntropyOptions().label_smoothing(1.5f)); },
                           {"cross_entropy", "label_smoothing"});
  expect_error<ValueError>([&] { cross_entropy(x, x, CrossEntropyOptions().ignore_index(0)); },
                           {"cross_entropy", "ignore_index", "probability"});
  expect_error<ValueError>([&] { binary_cross_entropy(x * 1.5f, x); },
                           {"binary_cross_entropy", "[0, 1]", "1.5", "position 0"});
}

TEST(Ops16Errors, ShapeMismatch) {
  const Tensor x = ones({2, 3}), t = ones({3, 2});
  expect_error<ShapeError>([&] { binary_cross_entropy(x * 0.5f, t); }, {"binary_cross_entropy", "[2, 3]", "[3, 2]"});
  expect_error<ShapeError>([&] { binary_cross_entropy_with_logits(x, t); }, {"binary_cross_entropy_with_logits"});
  expect_error<ShapeError>([&] { smooth_l1_loss(x, t); }, {"smooth_l1_loss", "[2, 3]", "[3, 2]"});
  expect_error<ShapeError>([&] { huber_loss(x, ones({3})); }, {"huber_loss"});
  expect_error<ShapeError>([&] { l1_loss(x, ones({2, 1})); }, {"l1_loss"});
  expect_error<ShapeError>([&] { kl_div(x, t); }, {"kl_div", "[2, 3]", "[3, 2]"});
  expect_error<ShapeError>([&] { cross_entropy(x, t); }, {"cross_entropy", "[2, 3]", "[3, 2]"});
  expect_error<ShapeError>([&] { pow(x, t); }, {"pow", "[2, 3]", "[3, 2]"});
  expect_error<ShapeError>([&] {
    binary_cross_entropy_with_logits(x, x, BCEWithLogitsLossOptions().pos_weight(ones({2})));
  }, {"binary_cross_entropy_with_logits", "pos_weight", "[2]", "[2, 3]"});
  expect_error<ShapeError>([&] { binary_cross_entropy(x * 0.5f, x, BCELossOptions().weight(ones({4}))); },
                           {"binary_cross_entropy", "weight", "[4]"});
}

TEST(Ops16Errors, ClassWeights) {
  const Tensor x = zeros({2, 3});
  const Indices t{0, 2};
  expect_error<ShapeError>([&] { cross_entropy(x, t, CrossEntropyOptions().weight(ones({4}))); },
                           {"cross_entropy", "weight", "[4]", "(3)"});
  expect_error<ShapeError>([&] { nll_loss(x, t, CrossEntropyOptions().weight(ones({3, 1}))); },
                           {"nll_loss", "weight", "[3, 1]"});
  expect_error<ShapeError>([&] { cross_entropy(x, ones({2, 3}), CrossEntropyOptions().weight(ones({2}))); },
                           {"cross_entropy", "weight", "[2]"});
  // a weight that wants a gradient would silently get none: refused
  expect_error<ValueError>([&] { cross_entropy(x, t, CrossEntropyOptions().weight(ones({3}, true))); },
                           {"cross_entropy", "weight", "gradient"});
  expect_error<ValueError>([&] { binary_cross_entropy(x, x, BCELossOptions().weight(ones({3}, true))); },
                           {"binary_cross_entropy", "weight", "gradient"});
  // ... but it is fine without grad mode
  NoGradGuard ng;
  EXPECT_NO_THROW(cross_entropy(x, t, CrossEntropyOptions().weight(ones({3}, true))));
}

// Weighted mean with every target ignored: 0/0 = NaN, as PyTorch.
TEST(Ops16Errors, AllIgnoredWeightedMeanIsNaN) {
  const Tensor y = cross_entropy(zeros({2, 3}), Indices{-100, -100}, CrossEntropyOptions().weight(ones({3})));
  EXPECT_TRUE(std::isnan(y.item()));
}
