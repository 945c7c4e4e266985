// Version counters and in-place ops: a backward never computes with values that changed after
// an op saved them (tg::AutogradError instead, as PyTorch's "modified by an inplace
// operation"), in-place ops follow PyTorch's rules (leaves that require grad only under
// no-grad, history rebased on non-leaves, broadcasting operands) and each is gradient-checked.
#include <gtest/gtest.h>

#include "autograd/node.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;
using Inputs = std::vector<Tensor>;

namespace {
Tensor input(const Shape& s, float lo = -1.0f, float hi = 1.0f) {
  return test_util::random_input(s, lo, hi);
}

void expect_gradcheck(const std::function<Tensor(const Inputs&)>& fn, const Inputs& xs) {
  const auto r = gradcheck(fn, xs);
  EXPECT_TRUE(r.ok) << r.message;
}

/// Runs f, which must throw AutogradError mentioning every one of `parts`.
template <class F>
void expect_version_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error was thrown";
  } catch (const AutogradError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("modified by an inplace operation"), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' in: " << msg;
  }
}

class Versions : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(3); }
};
}  // namespace

// ---- the cases of the issue: each was a silent wrong gradient -------------------------------

// y = sum(w * x); w changes; backward would give x.grad = the new w.
TEST_F(Versions, CopyIntoASavedParameterIsCaught) {
  const Tensor w = input({3}), x = input({3});
  const Tensor y = sum(w * x);
  EXPECT_THROW(w.copy_(zeros({3})), AutogradError);  // a leaf that requires grad, grad mode on
  {
    NoGradGuard no_grad;
    w.copy_(ones({3}));
  }
  EXPECT_EQ(w.version(), 1u);
  expect_version_error([&] { y.backward(); }, {"'mul'", "[3]", "version 1", "expected version 0"});
}

// h = w * w; l1 = sum(h * x); l2 = sum(h); l1.backward(retain); step; l2.backward()
TEST_F(Versions, AnOptimizerStepBetweenTwoBackwardsIsCaught) {
  const Tensor w = input({4}), x = input({4});
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  const Tensor h = w * w;
  const Tensor l1 = sum(h * x), l2 = sum(h);
  l1.backward(Tensor(), true);
  opt.step();
  expect_version_error([&] { l2.backward(); }, {"'mul'", "[4]"});
}

TEST_F(Versions, WritingThroughADetachedAliasIsCaught) {
  const Tensor w = input({2, 3}), x = input({2, 3});
  const Tensor y = sum(exp(w) * x);  // exp saves its output, mul saves both operands
  const Tensor alias = x.detach();
  EXPECT_EQ(alias.version(), x.version());  // one counter for both handles
  alias.mul_(2.0f);
  EXPECT_EQ(x.version(), 1u);
  expect_version_error([&] { y.backward(); }, {"'mul'", "[2, 3]"});
}

TEST_F(Versions, AnOpsOwnSavedOutputIsChecked) {
  const Tensor x = input({5});
  const Tensor y = tanh(x * 1.0f);  // tanh's backward reads its output y
  const Tensor loss = sum(y * 1.0f);
  y.add_(1.0f);  // y is not a leaf: allowed, and recorded
  expect_version_error([&] { loss.backward(); }, {"'tanh'", "[5]"});
}

TEST_F(Versions, UntouchedValuesAndRawWritesPass) {
  const Tensor w = input({3}), x = input({3});
  const Tensor y = sum(w * x);
  w.data()[0] = 5.0f;  // raw: not counted (as PyTorch's .data); documented in the README
  EXPECT_EQ(w.version(), 0u);
  EXPECT_NO_THROW(y.backward());
}

TEST_F(Versions, EveryWriteThroughTheApiBumps) {
  const Tensor t = zeros({2, 2});
  uint32_t v = t.version();
  auto bumped = [&] {
    const bool b = t.version() > v;
    v = t.version();
    return b;
  };
  t.add_(1.0f);
  EXPECT_TRUE(bumped());
  t.copy_(ones({2}));
  EXPECT_TRUE(bumped());
  nn::init::normal_(t);
  EXPECT_TRUE(bumped());
  nn::init::zeros_(t);
  EXPECT_TRUE(bumped());
  t.fill_(2.0f).clamp_(0.0f, 1.0f);
  EXPECT_GE(t.version(), v + 2);
  v = t.version();
  nn::Linear lin(2, 2);
  const uint32_t w0 = lin.weight.version();
  Checkpoint ck;
  ck.set_model(lin);
  ck.restore_model(lin);  // loading a state dict writes every parameter
  EXPECT_GT(lin.weight.version(), w0);
}

// ---- in-place rules -------------------------------------------------------------------------

TEST_F(Versions, InPlaceOnALeafThatRequiresGradNeedsNoGrad) {
  const Tensor w = input({3});
  for (auto f : std::vector<std::function<void()>>{
           [&] { w.add_(1.0f); }, [&] { w.mul_(w); }, [&] { w.zero_(); }, [&] { w.fill_(1.0f); },
           [&] { w += ones({3}); }, [&] { w.clamp_(-1, 1); }, [&] { w.copy_(ones({3})); },
           [&] { w.masked_fill_(ones({3}), 0.0f); }}) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const AutogradError& e) {
      EXPECT_NE(std::string(e.what()).find("leaf tensor that requires grad"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(w.version(), 0u);  // refused before writing
  NoGradGuard no_grad;
  w.sub_(0.5f);  // how parameters are changed
  EXPECT_EQ(w.version(), 1u);
}

TEST_F(Versions, InPlaceOnANonLeafRebasesItsHistory) {
  const Tensor x = input({3});
  Tensor y = x * 2.0f;
  EXPECT_EQ(y.op_name(), "mul_scalar");
  y.mul_(3.0f).add_(1.0f);  // y = 6x + 1
  EXPECT_EQ(y.op_name(), "add_scalar_");
  sum(y).backward();
  for (float g : x.grad().to_vector()) EXPECT_FLOAT_EQ(g, 6.0f);
}

TEST_F(Versions, InPlaceMakesATensorRequireGrad) {
  const Tensor w = input({3});
  const Tensor buf = zeros({3});  // a leaf that does not require grad
  buf.add_(w);
  EXPECT_TRUE(buf.requires_grad());
  EXPECT_FALSE(buf.is_leaf());
  sum(buf * buf).backward();
  const auto g = w.grad().to_vector(), wv = w.to_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_FLOAT_EQ(g[i], 2 * wv[i]);
}

TEST_F(Versions, CopyBroadcastsItsSourceAndRefusesWhatDoesNot) {
  const Tensor t = zeros({2, 3});
  t.copy_(tensor({1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_THROW(t.copy_(zeros({2})), ShapeError);
  EXPECT_THROW(t.add_(zeros({4, 2, 3})), ShapeError);  // an in-place op keeps the shape
}

TEST_F(Versions, RetainGradFollowsTheNewValue) {
  const Tensor x = input({2});
  Tensor y = x * 1.0f;
  y.retain_grad();
  y.mul_(4.0f);
  sum(y * 3.0f).backward();
  for (float g : y.grad().to_vector()) EXPECT_FLOAT_EQ(g, 3.0f);  // d/d(new y)
  for (float g : x.grad().to_vector()) EXPECT_FLOAT_EQ(g, 12.0f);
}

// ---- each in-place op, gradient-checked through a non-leaf -----------------------------------

TEST_F(Versions, GradcheckTensorOperands) {
  const Inputs x = {input({3, 4}), input({4}, 0.5f, 2.0f)};  // b broadcasts to a
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.add_(v[1]); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.sub_(v[1]); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.mul_(v[1]); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.div_(v[1]); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t += v[1]; t *= v[1]; return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.copy_(v[1]); return t * v[0]; }, x);
  // the operand aliases self: x·x and x/x read the old values
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.mul_(t); return t; }, x);
}

TEST_F(Versions, GradcheckScalarAndMaskOperands) {
  const Inputs x = {input({2, 5}, -2.0f, 2.0f)};
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.add_(0.5f).mul_(-3.0f); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.sub_(2.0f).div_(4.0f); return t; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t -= 1.0f; t /= 2.0f; return t * v[0]; }, x);
  // clamp at ±0.95: inputs are at least 0.1 from 0 but may sit near the bounds; keep them off
  const Inputs y = {input({2, 5}, -0.9f, 0.9f) * 2.0f};
  const Tensor leaf = y[0].detach().requires_grad_();
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.clamp_(-1.0f, 1.0f); return t; },
                   {leaf});
  const Tensor mask = tensor({1, 0, 0, 1, 0, 1, 1, 0, 0, 0}, {2, 5});
  expect_gradcheck([mask](const Inputs& v) { Tensor t = v[0] * 1.0f; t.masked_fill_(mask, 7.0f); return t * v[0]; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.fill_(2.0f); return t * v[0]; }, x);
  expect_gradcheck([](const Inputs& v) { Tensor t = v[0] * 1.0f; t.zero_(); return t + v[0]; }, x);
}

TEST_F(Versions, ClampValuesAndNaN) {
  const Tensor t = tensor({-2.0f, 0.5f, 3.0f, std::nanf("")});
  t.clamp_(-1.0f, 1.0f);
  const auto v = t.to_vector();
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[1], 0.5f);
  EXPECT_EQ(v[2], 1.0f);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_THROW(t.clamp_(1.0f, -1.0f), ValueError);
}

// ---- the engine checks the shape of every gradient an op gives ----------------------------------

TEST_F(Versions, AGradientOfTheWrongShapeIsRefusedNamingTheOp) {
  const Tensor x = input({2, 3});
  // An op whose backward gives its input a (3, 2) gradient: the right element count, the
  // wrong shape, which the engine used to reshape silently.
  const Tensor y = custom_op("transposing_backward", x * 1.0f, {x}, [](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, {3, 2})};
  });
  try {
    sum(y).backward();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("transposing_backward"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
  }
  // The same from an op of the library's own kind (the engine's check, not custom_op's).
  const Tensor z = detail::record("bad_op", Array(detail::val(x)), {x}, [](detail::BackwardContext& ctx) {
    Array g = ctx.grad;
    g.reshape({3, 2});
    ctx.give(0, std::move(g));
  });
  try {
    sum(z).backward();
    ADD_FAILURE() << "no error";
  } catch (const AutogradError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'bad_op'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  }
  // A gradient in the broadcast shape is summed down, as before.
  const Tensor b = input({3});
  sum(input({2, 3}) * b).backward();
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
}
