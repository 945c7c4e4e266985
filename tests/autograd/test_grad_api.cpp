// tg::autograd::grad, backward restricted to some inputs, and custom Functions
// (tapegrad/autograd/grad.h, tapegrad/autograd/function.h): gradients equal backward's on
// several graphs, no .grad() is touched, errors as PyTorch's; Functions gradchecked and
// compared with PyTorch 1.13 (tests/reference/make_grad_api.py).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using tg::autograd::AutogradContext;
using tg::autograd::variable_list;

namespace {

/// Same shape and values within 1e-5 (relative 1e-5).
::testing::AssertionResult same(const Tensor& a, const Tensor& b) { return ref::close(a, b); }

/// A graph builder: the loss of some leaves, plus the tensors to differentiate against.
struct Graph {
  std::vector<Tensor> leaves;  // every leaf that requires grad
  std::vector<Tensor> inputs;  // what autograd::grad differentiates against (may be non-leaves)
  Tensor loss;
};

/// autograd::grad(loss, inputs) equals what backward() accumulates (leaves) or retains
/// (non-leaves), and leaves no .grad() behind.
void expect_grad_equals_backward(const std::function<Graph()>& build) {
  Graph g = build();
  const variable_list grads = autograd::grad({g.loss}, g.inputs);
  ASSERT_EQ(grads.size(), g.inputs.size());
  for (const Tensor& l : g.leaves) EXPECT_FALSE(l.grad().defined());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    EXPECT_FALSE(grads[i].requires_grad());
    EXPECT_FALSE(g.inputs[i].grad().defined()) << "input " << i;
  }

  Graph h = build();  // the same values (built from the same seed), through backward
  for (const Tensor& x : h.inputs)
    if (!x.is_leaf()) x.retain_grad();
  h.loss.backward();
  for (size_t i = 0; i < h.inputs.size(); ++i) EXPECT_TRUE(same(grads[i], h.inputs[i].grad())) << i;
}

Tensor randn_leaf(const Shape& s) { return randn(s, true); }

}  // namespace

// ---- autograd::grad -----------------------------------------------------------------------

TEST(AutogradGrad, EqualsBackwardOnAnMlpWithBroadcastBias) {
  expect_grad_equals_backward([] {
    manual_seed(1);
    Tensor x = randn({4, 3}), w = randn_leaf({3, 5}), b = randn_leaf({5}), v = randn_leaf({5, 1});
    Tensor loss = sum(matmul(tanh(matmul(x, w) + b), v));
    return Graph{{w, b, v}, {w, b, v}, loss};
  });
}

TEST(AutogradGrad, EqualsBackwardForNonLeafInputs) {
  expect_grad_equals_backward([] {
    manual_seed(2);
    Tensor x = randn_leaf({4, 3}), w = randn_leaf({3, 3});
    Tensor h = matmul(x, w);          // a non-leaf used twice below
    Tensor a = tanh(h);
    Tensor loss = sum(a * h) + mean(exp(a));
    return Graph{{x, w}, {h, a, x}, loss};
  });
}

TEST(AutogradGrad, EqualsBackwardThroughViews) {
  expect_grad_equals_backward([] {
    manual_seed(3);
    Tensor x = randn_leaf({4, 6});
    Tensor t = transpose(x, 0, 1);              // (6, 4), a strided view
    Tensor part = narrow(t, 0, 1, 3);           // (3, 4)
    Tensor r = reshape(part.contiguous(), {2, 6});
    Tensor loss = sum(r * r * r) + sum(sigmoid(select(x, 0, 2)));
    return Graph{{x}, {x, part}, loss};
  });
}

TEST(AutogradGrad, EqualsBackwardThroughAnInPlaceWriteOnAView) {
  expect_grad_equals_backward([] {
    manual_seed(4);
    Tensor w = randn_leaf({3, 4});
    Tensor y = w * 2.0f;             // a non-leaf
    Tensor row = select(y, 0, 1);
    row.mul_(randn({4}));            // recorded through the view
    Tensor loss = sum(tanh(y));
    return Graph{{w}, {w, y}, loss};
  });
}

TEST(AutogradGrad, LeavesAndRetainedGradsAreUntouched) {
  Tensor x = randn({3}, true), w = randn({3}, true);
  x.set_grad(full({3}, 7.0f));
  Tensor h = x * w;
  h.retain_grad();
  Tensor y = sum(h * h);
  const variable_list g = autograd::grad({y}, {x});
  EXPECT_TRUE(same(g[0], 2.0f * x * w * w));
  EXPECT_TRUE(same(x.grad(), full({3}, 7.0f)));
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(h.grad().defined());
}

TEST(AutogradGrad, UnusedInputIsAnErrorUnlessAllowed) {
  Tensor x = randn({3}, true), unused = randn({2}, true);
  Tensor y = sum(x * x);
  try {
    autograd::grad({y}, {x, unused}, {}, true);
    FAIL() << "expected an error";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("input 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allow_unused"), std::string::npos) << e.what();
  }
  const variable_list g = autograd::grad({y}, {x, unused}, {}, std::nullopt, false, true);
  EXPECT_TRUE(same(g[0], 2.0f * x));
  EXPECT_FALSE(g[1].defined());
}

TEST(AutogradGrad, BadArgumentsAreErrors) {
  Tensor x = randn({3}, true), c = randn({3});
  Tensor y = sum(x * x), v = x * 2.0f;
  EXPECT_THROW(autograd::grad({y}, {c}), AutogradError);            // input needs no grad
  EXPECT_THROW(autograd::grad({sum(c)}, {x}), AutogradError);       // output has no history
  EXPECT_THROW(autograd::grad({v}, {x}), AutogradError);            // non-scalar, no grad_outputs
  EXPECT_THROW(autograd::grad({y, v}, {x}, {Tensor()}), ValueError);  // one grad for two outputs
  EXPECT_THROW(autograd::grad({v}, {x}, {ones({2})}), ShapeError);
  EXPECT_THROW(autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true), ValueError);
  EXPECT_THROW(autograd::grad({y}, {}), ValueError);
  try {
    autograd::grad({y}, {x}, {}, std::nullopt, true);
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported yet"), std::string::npos) << e.what();
  }
}

TEST(AutogradGrad, GradOutputsWeighTheOutputs) {
  Tensor x = randn({2, 3}, true);
  Tensor a = x * x, b = sum(exp(x));
  const Tensor ga = randn({2, 3});
  const variable_list g = autograd::grad({a, b}, {x}, {ga, scalar(3.0f)});
  EXPECT_TRUE(same(g[0], ga * 2.0f * x + 3.0f * exp(x)));
}

TEST(AutogradGrad, SecondCallNeedsRetainGraph) {
  Tensor x = randn({3}, true);
  Tensor y = sum(tanh(x) * x);
  const variable_list first = autograd::grad({y}, {x}, {}, true);
  const variable_list second = autograd::grad({y}, {x});  // retain_graph defaults to false
  EXPECT_TRUE(same(first[0], second[0]));
  EXPECT_THROW(autograd::grad({y}, {x}), AutogradError);   // freed by the second call
}

TEST(AutogradGrad, DuplicateInputsAndTheOutputItself) {
  Tensor x = randn({3}, true);
  Tensor h = exp(x);
  Tensor y = sum(h);
  const variable_list g = autograd::grad({y}, {x, x, y, h}, {}, true);
  EXPECT_TRUE(same(g[0], exp(x)));
  EXPECT_TRUE(same(g[1], exp(x)));
  EXPECT_FALSE(g[0].is_same(g[1]));
  EXPECT_TRUE(same(g[2], scalar(1.0f)));
  EXPECT_TRUE(same(g[3], ones({3})));
  // A leaf output differentiated against itself.
  EXPECT_TRUE(same(autograd::grad({x}, {x}, {full({3}, 2.0f)})[0], full({3}, 2.0f)));
}

TEST(AutogradGrad, RunsOnlyTheOpsThatLeadToTheInputs) {
  int runs = 0;
  auto counted = [&runs](const Tensor& t) {
    Tensor v;
    {
      NoGradGuard ng;
      v = t * 3.0f;
    }
    return custom_op("counted", v, {t}, [&runs](const Tensor& g) {
      ++runs;
      return std::vector<Tensor>{g * 3.0f};
    });
  };
  Tensor x = randn({3}, true), w = randn({3}, true);
  Tensor y = sum(x * x) + sum(counted(w));
  autograd::grad({y}, {x});
  EXPECT_EQ(runs, 0);
  // The branch that did not run kept its saved values: backward into w still works.
  y = sum(x * x) + sum(counted(w));
  y.backward({}, false, {w});
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(same(w.grad(), full({3}, 3.0f)));
  EXPECT_FALSE(x.grad().defined());
}

TEST(AutogradGrad, InPlaceChangeOfASavedValueIsStillAnError) {
  Tensor x = randn({3}, true);
  Tensor h = x * 2.0f;
  Tensor y = sum(h * h);
  h.add_(1.0f);
  EXPECT_THROW(autograd::grad({y}, {x}), AutogradError);
}

TEST(AutogradGrad, ThreadsShareALeaf) {
  Tensor w = randn({8}, true);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&w, &bad, t] {
      for (int i = 0; i < 50; ++i) {
        const float k = static_cast<float>(t + 1);
        Tensor y = sum(w * w * k);
        const Tensor g = autograd::grad({y}, {w})[0];
        const auto got = g.to_vector(), wv = w.to_vector();
        for (size_t j = 0; j < got.size(); ++j)
          if (std::abs(got[j] - 2 * k * wv[j]) > 1e-5f) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_FALSE(w.grad().defined());
}

// ---- backward restricted to some inputs ---------------------------------------------------

TEST(BackwardInputs, OnlyThoseAccumulate) {
  Tensor x = randn({2, 3}, true), w = randn({3}, true), b = randn({3}, true);
  Tensor y = sum(tanh(x * w + b));
  y.backward({}, true, {x, b});
  EXPECT_FALSE(w.grad().defined());
  const Tensor gx = x.grad(), gb = b.grad();
  ASSERT_TRUE(gx.defined() && gb.defined());
  const variable_list want = autograd::grad({y}, {x, b}, {}, true);
  EXPECT_TRUE(same(gx, want[0]));
  EXPECT_TRUE(same(gb, want[1]));
  // A second call accumulates, as backward does.
  autograd::backward({y}, {}, true, false, {b});
  EXPECT_TRUE(same(b.grad(), 2.0f * want[1]));
  EXPECT_TRUE(same(x.grad(), want[0]));
  EXPECT_FALSE(w.grad().defined());
}

TEST(BackwardInputs, NonLeafInputGetsItsGrad) {
  Tensor x = randn({3}, true);
  Tensor h = exp(x);
  Tensor y = sum(h * h);
  y.backward({}, false, {h});
  EXPECT_TRUE(same(h.grad(), 2.0f * exp(x)));
  EXPECT_FALSE(x.grad().defined());
}

TEST(BackwardInputs, SeveralTensorsAtOnce) {
  Tensor x = randn({3}, true);
  Tensor a = x * x, b = sum(x);
  const Tensor ga = randn({3});
  autograd::backward({a, b}, {ga, Tensor()});
  EXPECT_TRUE(same(x.grad(), ga * 2.0f * x + 1.0f));
}

TEST(BackwardInputs, BadArgumentsAreErrors) {
  Tensor x = randn({3}, true), c = randn({3});
  Tensor y = sum(x * x);
  EXPECT_THROW(y.backward({}, true, {}), ValueError);
  EXPECT_THROW(y.backward({}, true, {c}), AutogradError);
  EXPECT_THROW(autograd::backward({y}, {}, true, true), ValueError);  // create_graph
  EXPECT_THROW(autograd::backward({y}, {scalar(1.0f), scalar(1.0f)}), ValueError);
}

// ---- custom Functions ----------------------------------------------------------------------

namespace {

/// (a, b, s) -> (s·a·b, a² + b), with b broadcast against a's rows: two inputs that need
/// gradients, a number, two outputs.
struct MulSquare : autograd::Function<MulSquare> {
  static variable_list forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, double s) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["s"] = s;
    return {a * b * static_cast<float>(s), a * a + b};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &a = saved[0], &b = saved[1];
    const float s = static_cast<float>(ctx->saved_data["s"].toDouble());
    Tensor ga = g[0] * b * s + g[1] * 2.0f * a;
    Tensor gb = g[0] * a * s + g[1];  // a's shape: the engine sums it down to b's
    return {ga, gb, Tensor()};
  }
};

/// The flat concatenation of a list of tensors (what gradcheck projects).
Tensor flat_cat(const variable_list& ts) {
  variable_list flat;
  for (const Tensor& t : ts) flat.push_back(reshape(t, {t.numel()}));
  return cat(flat);
}

}  // namespace

TEST(Function, TwoInputsTwoOutputsGradcheck) {
  manual_seed(5);
  Tensor a = randn({3, 4}, true), b = randn({4}, true);
  const auto r = gradcheck([](const variable_list& in) {
    return flat_cat(MulSquare::apply(in[0], in[1], 1.5));
  }, {a, b});
  EXPECT_TRUE(r.ok) << r.message;
  const variable_list y = MulSquare::apply(a, b, 1.5);
  EXPECT_EQ(y[0].op_name(), "MulSquare");
  EXPECT_TRUE(y[1].requires_grad());
  EXPECT_TRUE(same(y[0], a * b * 1.5f));
}

TEST(Function, OnlyOneOutputUsedGivesZerosForTheOther) {
  manual_seed(6);
  Tensor a = randn({2, 3}, true), b = randn({3}, true);
  sum(MulSquare::apply(a, b, 2.0)[1]).backward();
  EXPECT_TRUE(same(a.grad(), 2.0f * a));
  EXPECT_TRUE(same(b.grad(), full({3}, 2.0f)));
}

TEST(Function, WorksWithAutogradGrad) {
  manual_seed(7);
  Tensor a = randn({2, 3}, true), b = randn({3}, true);
  const variable_list y = MulSquare::apply(a, b, 0.5);
  const variable_list g = autograd::grad({sum(y[0] + y[1])}, {b});
  EXPECT_TRUE(same(g[0], sum(a * 0.5f + 1.0f, {0})));
  EXPECT_FALSE(a.grad().defined());
}

namespace {
/// Saves its input; y = x³.
struct Cube : autograd::Function<Cube> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const Tensor x = ctx->get_saved_variables()[0];
    return {g[0] * 3.0f * x * x};
  }
};
}  // namespace

TEST(Function, SavedTensorChangedInPlaceIsAnError) {
  Tensor w = randn({3}, true);
  Tensor x = w * 1.0f;  // a non-leaf, so it may be written in place
  Tensor y = sum(Cube::apply(x));
  x.mul_(2.0f);
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const AutogradError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Cube"), std::string::npos) << m;
    EXPECT_NE(m.find("modified by an inplace operation"), std::string::npos) << m;
  }
}

TEST(Function, SavedOutputChangedInPlaceIsAnError) {
  struct Exp : autograd::Function<Exp> {  // saves its output: dy = g·y
    static Tensor forward(AutogradContext* ctx, Tensor x) {
      Tensor y = exp(x);
      ctx->save_for_backward({y});
      return y;
    }
    static variable_list backward(AutogradContext* ctx, variable_list g) {
      return {g[0] * ctx->get_saved_variables()[0]};
    }
  };
  Tensor x = randn({3}, true);
  Tensor y = Exp::apply(x);
  Tensor loss = sum(y * 1.0f);
  EXPECT_TRUE(same(autograd::grad({loss}, {x}, {}, true)[0], exp(x)));
  y.add_(1.0f);
  EXPECT_THROW(loss.backward(), AutogradError);
}

namespace {
/// (x) -> (relu(x), mask of x > 0), the mask not differentiable; needs_input_grad recorded.
struct ReluMask : autograd::Function<ReluMask> {
  static inline std::vector<bool> seen_forward, seen_backward;
  static variable_list forward(AutogradContext* ctx, Tensor x, Tensor unused_y) {
    seen_forward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    Tensor mask = zeros(x.shape());
    {
      auto m = mask.data();
      auto xv = x.to_vector();
      for (int64_t i = 0; i < mask.numel(); ++i) m[i] = xv[i] > 0 ? 1.0f : 0.0f;
    }
    ctx->mark_non_differentiable({mask});
    ctx->save_for_backward({mask});
    return {x * mask, mask};
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    seen_backward = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    EXPECT_TRUE(same(g[1], zeros(g[1].shape())));  // the mask's gradient: zeros
    return {g[0] * ctx->get_saved_variables()[0], Tensor()};
  }
};
}  // namespace

TEST(Function, MarkNonDifferentiableAndNeedsInputGrad) {
  Tensor x = tensor({-1.0f, 2.0f, 0.5f, -3.0f}, true), c = randn({4});
  const variable_list out = ReluMask::apply(x, c);
  EXPECT_EQ(ReluMask::seen_forward, (std::vector<bool>{true, false}));
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_TRUE(same(out[1], tensor({0.0f, 1.0f, 1.0f, 0.0f})));
  sum(out[0] * 2.0f).backward();
  EXPECT_EQ(ReluMask::seen_backward, (std::vector<bool>{true, false}));
  EXPECT_TRUE(same(x.grad(), tensor({0.0f, 2.0f, 2.0f, 0.0f})));
  // Nothing requires grad: plain tensors, nothing recorded.
  const variable_list plain = ReluMask::apply(c, c);
  EXPECT_FALSE(plain[0].requires_grad());
  {
    NoGradGuard ng;
    EXPECT_FALSE(ReluMask::apply(x, c)[0].requires_grad());
  }
  EXPECT_THROW(AutogradContext().needs_input_grad(0), IndexError);
}

namespace {
struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(AutogradContext*, Tensor x, Tensor y) { return x * y; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(AutogradContext*, Tensor x) { return x * 2.0f; }
  static variable_list backward(AutogradContext*, variable_list) { return {ones({5})}; }
};
struct GradForANumber : autograd::Function<GradForANumber> {
  static Tensor forward(AutogradContext*, Tensor x, double k) { return x * static_cast<float>(k); }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], g[0]}; }
};
struct ReturnsItsInput : autograd::Function<ReturnsItsInput> {
  static Tensor forward(AutogradContext*, Tensor x) { return x; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};

template <class E>
void expect_error_naming(const std::function<void()>& f, const std::string& name,
                         const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an error";
  } catch (const E& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'" + name + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
  }
}
}  // namespace

TEST(Function, WrongBackwardsAreErrorsNamingTheFunction) {
  Tensor x = randn({3}, true), y = randn({3}, true);
  expect_error_naming<ValueError>([&] { sum(WrongCount::apply(x, y)).backward(); }, "WrongCount",
                                  "returned 1 gradients, expected 2");
  expect_error_naming<ShapeError>([&] { sum(WrongShape::apply(x)).backward(); }, "WrongShape",
                                  "shape [5]");
  expect_error_naming<ValueError>([&] { sum(GradForANumber::apply(x, 2.0)).backward(); },
                                  "GradForANumber", "argument 1, which is not a tensor");
  // A rejected backward gave nothing (the gradients are checked before any is given), and
  // the engine works again.
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  sum(Cube::apply(x)).backward();
  EXPECT_TRUE(same(x.grad(), 3.0f * x * x));
}

namespace {
Tensor global_param;
struct ReturnsAParameter : autograd::Function<ReturnsAParameter> {
  static Tensor forward(AutogradContext*, Tensor) { return global_param; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};
}  // namespace

TEST(Function, AnOutputNeverAliasesAnInputOrAParameter) {
  Tensor x = randn({3}, true);
  Tensor y = ReturnsItsInput::apply(x);
  EXPECT_NE(y.data_ptr(), x.data_ptr());
  const auto before = x.to_vector();
  y.add_(1.0f);
  EXPECT_EQ(x.to_vector(), before);
  global_param = randn({3}, true);
  Tensor z = ReturnsAParameter::apply(x);
  EXPECT_NE(z.data_ptr(), global_param.data_ptr());
  EXPECT_EQ(z.to_vector(), global_param.to_vector());
  global_param = Tensor();
}

TEST(Function, SavedDataHoldsSeveralTypes) {
  autograd::SavedValue d = 0.25, i = 3, b = true, t = ones({2}), s = "name";
  autograd::SavedValue l = std::vector<int64_t>{1, 2};
  EXPECT_EQ(d.toDouble(), 0.25);
  EXPECT_EQ(i.toInt(), 3);
  EXPECT_TRUE(b.toBool());
  EXPECT_TRUE(same(t.toTensor(), ones({2})));
  EXPECT_EQ(s.toStringRef(), "name");
  EXPECT_EQ(l.toIntVector(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(autograd::SavedValue().isNone());
  EXPECT_THROW(i.toDouble(), ValueError);
  EXPECT_THROW(d.toTensor(), ValueError);
}

TEST(Function, MatchesPyTorch) {
  // tests/reference/make_grad_api.py: MulSquare (s = 1.5) inside a larger graph, with the
  // second output used only through a tanh; gradients of a, b, and of the loss.
  Tensor a = ref::load("grad_api/function.a.npy", true);
  Tensor b = ref::load("grad_api/function.b.npy", true);
  const variable_list y = MulSquare::apply(a, b, 1.5);
  Tensor loss = sum(y[0] * y[0]) + sum(tanh(y[1]) * ref::load("grad_api/function.w.npy"));
  EXPECT_TRUE(ref::close(y[0], ref::load("grad_api/function.y0.npy")));
  EXPECT_TRUE(ref::close(y[1], ref::load("grad_api/function.y1.npy")));
  loss.backward();
  EXPECT_TRUE(ref::close(a.grad(), ref::load("grad_api/function.da.npy"), 1e-4, 1e-4));
  EXPECT_TRUE(ref::close(b.grad(), ref::load("grad_api/function.db.npy"), 1e-4, 1e-4));
}

TEST(Function, CustomOpStillWorks) {
  Tensor x = randn({3}, true);
  Tensor v;
  {
    NoGradGuard ng;
    v = x * x * x;
  }
  Tensor y = custom_op("cube", v, {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{g * 3.0f * x * x};
  });
  EXPECT_TRUE(same(autograd::grad({sum(y)}, {x})[0], 3.0f * x * x));
}

namespace {
/// Activation checkpointing as a Function: forward keeps only x; backward recomputes
/// y = tanh(x·x) with grad mode on and differentiates it with autograd::grad (a backward
/// inside a backward).
struct Checkpointed : autograd::Function<Checkpointed> {
  static Tensor body(const Tensor& x) { return tanh(x * x); }
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->save_for_backward({x});
    return body(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_();
    set_grad_enabled(true);
    Tensor y = body(x);
    set_grad_enabled(false);
    return autograd::grad({y}, {x}, {g[0]});
  }
};
}  // namespace

TEST(Function, BackwardMayCallAutogradGrad) {
  manual_seed(8);
  Tensor x = randn({5}, true), w = randn({5}, true);
  Tensor loss = sum(Checkpointed::apply(x * w) * w);
  const Tensor h = x * w, want_dx = (1.0f - pow(tanh(h * h), 2.0f)) * 2.0f * h * w * w;
  // Inside an outer autograd::grad (whose inputs the inner call must not see) ...
  const variable_list g = autograd::grad({loss}, {x}, {}, true);
  EXPECT_TRUE(same(g[0], want_dx));
  EXPECT_FALSE(x.grad().defined());
  // ... and inside a plain backward.
  loss.backward();
  EXPECT_TRUE(same(x.grad(), want_dx));
  EXPECT_TRUE(is_grad_enabled());
}

TEST(Function, GraphsDroppedWithoutBackwardAreFreed) {
  Tensor a = randn({64, 64}, true), b = randn({64}, true);
  auto run = [&] {
    const variable_list y = MulSquare::apply(a, b, 2.0);
    Tensor loss = sum(y[0]) + sum(y[1]);  // dropped without backward
  };
  run();
  const int64_t before = memory_stats().live_bytes;
  for (int i = 0; i < 20; ++i) run();
  EXPECT_EQ(memory_stats().live_bytes, before);
}

TEST(AutogradGrad, LongChainsDoNotRecurse) {
  Tensor x = randn({4}, true), w = randn({4}, true);
  Tensor h = x;
  for (int i = 0; i < 100000; ++i) h = h * 1.0f;
  Tensor y = sum(h * w);
  const variable_list g = autograd::grad({y}, {x, w});
  EXPECT_TRUE(same(g[0], w));
  EXPECT_TRUE(same(g[1], x));
}
