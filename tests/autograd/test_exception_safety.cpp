// Exception safety: an exception in the middle of a forward or a backward pass leaves the
// tape, the modules and the optimizer usable, and the next training step gives exactly the
// gradients and weights of a run in which nothing was thrown.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {

/// fc1 -> tanh -> flaky -> fc2 -> tanh -> fc3. `flaky` is the identity, recorded with
/// tg::custom_op; its backward throws once when armed.
struct Model : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  std::shared_ptr<int> throws_left = std::make_shared<int>(0);

  Model() : Module("Model") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, 8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 8));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(8, 2));
  }

  Tensor flaky(const Tensor& h) {
    auto left = throws_left;
    return custom_op("flaky", h, {h}, [left](const Tensor& g) {
      if (*left > 0) {
        --*left;
        throw std::runtime_error("injected failure in flaky's backward");
      }
      return std::vector<Tensor>{g};
    });
  }

  /// bad_shape: a later layer gets 5 features instead of 8 (tg::ShapeError from fc2).
  Tensor forward(const Tensor& x, bool bad_shape = false) {
    Tensor h = flaky(tanh(fc1->forward(x)));
    if (bad_shape) h = narrow(h, 1, 0, 5);
    return fc3->forward(tanh(fc2->forward(h)));
  }
};

struct Snapshot {
  std::vector<std::vector<float>> values, grads;
  bool operator==(const Snapshot& o) const { return values == o.values && grads == o.grads; }
};

Snapshot snapshot(const nn::Module& m) {
  Snapshot s;
  for (const auto& p : m.parameters()) {
    s.values.push_back(p.to_vector());
    s.grads.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<float>{});
  }
  return s;
}

const Tensor& inputs() {
  static const Tensor x = [] {
    manual_seed(99);
    return randn({6, 3});
  }();
  return x;
}
const Tensor& targets() {
  static const Tensor t = [] {
    manual_seed(98);
    return randn({6, 2});
  }();
  return t;
}

/// One ordinary step; returns the state after it.
Snapshot train_step(Model& m, optim::Optimizer& opt) {
  opt.zero_grad();
  mse_loss(m.forward(inputs()), targets()).backward();
  opt.step();
  return snapshot(m);
}

/// The reference: `steps` ordinary steps of a fresh model, the state after each.
std::vector<Snapshot> reference_run(int steps) {
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  std::vector<Snapshot> out;
  for (int i = 0; i < steps; ++i) out.push_back(train_step(m, opt));
  return out;
}

}  // namespace

TEST(ExceptionSafety, ThrowInTheMiddleOfAForward) {
  const auto ref = reference_run(3);
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  ASSERT_EQ(train_step(m, opt), ref[0]);

  // fc1 and flaky are recorded, then fc2 throws: nothing may change.
  opt.zero_grad();
  const Snapshot before = snapshot(m);
  try {
    m.forward(inputs(), /*bad_shape=*/true);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("fc2 (Linear 8→8)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(snapshot(m), before);
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE(m.is_training());

  // The next steps are the reference's steps 2 and 3, bit for bit.
  EXPECT_EQ(train_step(m, opt), ref[1]);
  EXPECT_EQ(train_step(m, opt), ref[2]);
}

TEST(ExceptionSafety, ThrowInTheMiddleOfABackward) {
  const auto ref = reference_run(3);
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  ASSERT_EQ(train_step(m, opt), ref[0]);

  // flaky's closure throws after fc3's and fc2's have run (they sit after it in the forward,
  // so before it in the replay): fc2 and fc3 hold partial gradients, fc1 none.
  opt.zero_grad(/*set_to_none=*/true);
  *m.throws_left = 1;
  Tensor loss = mse_loss(m.forward(inputs()), targets());
  EXPECT_THROW(loss.backward(), std::runtime_error);
  EXPECT_TRUE(is_grad_enabled());  // the custom op's no-grad scope was unwound
  EXPECT_TRUE(m.fc3->weight.grad().defined());
  EXPECT_FALSE(m.fc1->weight.grad().defined());
  // The half-replayed graph cannot be replayed again (its later nodes were freed): a clear
  // AutogradError, not a crash or a silently wrong gradient.
  try {
    loss.backward();
    FAIL() << "no error";
  } catch (const AutogradError& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }

  // The next step (zero_grad, forward, backward, step) is the reference's step 2.
  EXPECT_EQ(train_step(m, opt), ref[1]);
  EXPECT_EQ(train_step(m, opt), ref[2]);
}

TEST(ExceptionSafety, ARetainedGraphCanBeReplayedAfterAThrow) {
  const auto ref = reference_run(2);
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  ASSERT_EQ(train_step(m, opt), ref[0]);

  opt.zero_grad();
  *m.throws_left = 1;
  Tensor loss = mse_loss(m.forward(inputs()), targets());
  EXPECT_THROW(loss.backward(Tensor(), /*retain_graph=*/true), std::runtime_error);
  // Nothing was freed: discard the partial gradients and replay the same graph.
  opt.zero_grad();
  loss.backward();
  opt.step();
  EXPECT_EQ(snapshot(m), ref[1]);
}

TEST(ExceptionSafety, AnAnomalyErrorMidBackwardLeavesTrainingUsable) {
  const auto ref = reference_run(2);
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  ASSERT_EQ(train_step(m, opt), ref[0]);
  {
    // A gradient that overflows inside the replay: 1e10 · 1e30 in mul_scalar's backward.
    DetectAnomalyGuard anomaly;
    opt.zero_grad();
    Tensor out = m.forward(inputs()) * 1e30f;
    EXPECT_THROW(out.backward(full(out.shape(), 1e10f)), AnomalyError);
  }
  EXPECT_EQ(train_step(m, opt), ref[1]);
}

TEST(ExceptionSafety, RepeatedFailuresDoNotAccumulateState) {
  // Many failed backwards in a row, then one good step: still the reference's step 2 (no
  // gradient, node or scope left behind by the failures).
  const auto ref = reference_run(2);
  manual_seed(7);
  Model m;
  optim::Adam opt(m.parameters(), optim::AdamOptions(1e-2));
  ASSERT_EQ(train_step(m, opt), ref[0]);
  for (int i = 0; i < 50; ++i) {
    *m.throws_left = 1;
    Tensor loss = mse_loss(m.forward(inputs()), targets());
    EXPECT_THROW(loss.backward(), std::runtime_error);
    EXPECT_THROW(m.forward(inputs(), true), ShapeError);
  }
  EXPECT_EQ(train_step(m, opt), ref[1]);
}

TEST(ExceptionSafety, CustomOpValidatesItsBackward) {
  Tensor x = ones({2, 3}, true);
  Tensor y = custom_op("two_grads", x, {x}, [](const Tensor& g) {
    return std::vector<Tensor>{g, g};
  });
  try {
    sum(y).backward();
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("custom_op 'two_grads': backward returned 2 gradients for 1 inputs"),
              std::string::npos)
        << e.what();
  }
  Tensor z = custom_op("wrong_shape", x, {x}, [](const Tensor&) { return std::vector<Tensor>{ones({4})}; });
  try {
    sum(z).backward();
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("custom_op 'wrong_shape': backward returned a gradient of shape [4] "
                                         "for input 0 of shape [2, 3]"),
              std::string::npos)
        << e.what();
  }
  // A broadcast-shaped gradient is summed down.
  Tensor w = custom_op("broadcast", x, {x}, [](const Tensor&) { return std::vector<Tensor>{ones({4, 2, 3})}; });
  x.zero_grad();
  sum(w).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<float>(6, 4.0f));
}

TEST(ExceptionSafety, CustomOpGradcheck) {
  // y = x³ as a custom op, checked against finite differences.
  auto cube = [](const Tensor& x) {
    Tensor y;
    {
      NoGradGuard ng;
      y = x * x * x;
    }
    return custom_op("cube", y, {x}, [x](const Tensor& g) { return std::vector<Tensor>{g * 3.0f * x * x}; });
  };
  manual_seed(5);
  Tensor x = randn({3, 4}, true);
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return cube(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(cube(x).op_name(), "cube");
  // Under no-grad, nothing is recorded.
  NoGradGuard ng;
  EXPECT_FALSE(cube(x).requires_grad());
}

// The exact guarantee (README, "Exceptions"): a forward that throws after a Dropout has run
// leaves the parameters, the optimizer state, grad mode and the module scope untouched; the
// generator has advanced by what ran (the dropout's draws), no more and no less.
TEST(ExceptionSafety, TheGuaranteeAfterAThrowPastADropout) {
  manual_seed(11);
  nn::Linear lin(4, 4);
  nn::Dropout drop(0.5f);
  optim::Adam opt(lin.parameters(), optim::AdamOptions(1e-2));
  sum(lin.forward(ones({2, 4}))).backward();
  opt.step();  // the optimizer has state now
  const std::vector<float> w = lin.weight.to_vector();
  const StateDict before = opt.state_dict();
  const Generator::State g0 = default_generator().state();
  DetectAnomalyGuard anomaly;  // scopes are recorded only while detection is on
  try {
    auto scope = lin.scope();
    const Tensor h = drop.forward(ones({2, 4}));  // 8 draws
    (void)lin.forward(ones({2, 5}));               // wrong last dim: throws
    FAIL() << "no error";
  } catch (const ShapeError&) {
  }
  EXPECT_EQ(lin.weight.to_vector(), w);
  const StateDict after = opt.state_dict();
  EXPECT_EQ(after.numbers, before.numbers);
  for (const auto& [k, t] : before.tensors) EXPECT_EQ(after.tensors.at(k).to_vector(), t.to_vector()) << k;
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_EQ(current_module(), "");
  Generator expected(0);
  expected.set_state(g0);
  std::vector<float> eight(8);
  expected.fill_uniform(eight.data(), 8);  // what the dropout drew
  EXPECT_EQ(default_generator().state(), expected.state());
}
