// Anomaly detection: tg::detect_anomaly / tg::DetectAnomalyGuard report the first op whose
// forward or backward produced NaN or Inf, with the module that recorded it and the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

/// The message of the AnomalyError `fn` throws ("" and a test failure if it throws none).
template <class F>
std::string anomaly_message(F&& fn) {
  try {
    fn();
  } catch (const AnomalyError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no tg::AnomalyError was thrown";
  return "";
}

bool finite(const Tensor& t) {
  for (float v : t.to_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

/// body = Linear(3, 4) -> Tanh -> Linear(4, 2), inside a module of our own.
struct Net : nn::Module {
  std::shared_ptr<nn::Sequential> body;
  Net() : Module("Net") {
    body = register_module("body", std::make_shared<nn::Sequential>(
                                       std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Tanh>(),
                                       std::make_shared<nn::Linear>(4, 2)));
  }
  Tensor forward(const Tensor& x) {
    auto scope = this->scope();
    return body->forward(x);
  }
};

}  // namespace

TEST(Anomaly, OffByDefaultAndTheGuardRestores) {
  EXPECT_FALSE(is_anomaly_enabled());
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(is_anomaly_enabled());
    {
      DetectAnomalyGuard off(false);
      EXPECT_FALSE(is_anomaly_enabled());
    }
    EXPECT_TRUE(is_anomaly_enabled());
  }
  EXPECT_FALSE(is_anomaly_enabled());
  // Off, NaN and Inf flow through silently (as in PyTorch).
  Tensor x = tensor(std::vector<float>{0.0f, -1.0f}, Shape{2}, true);
  Tensor y = sum(log(x));
  EXPECT_TRUE(std::isnan(y.item()));
  EXPECT_NO_THROW(y.backward());
}

TEST(Anomaly, ForwardOverflowInALayerNamesTheOpModuleAndShapes) {
  manual_seed(1);
  Net net;
  // tanh's outputs are all 1 (first layer of ones), and the last layer's weights are huge, so
  // the last layer's sums overflow: 4 · 1e38 > FLT_MAX.
  auto first = net.body->at<nn::Linear>(0);
  first->weight.data().fill(1.0f);
  first->bias.data().fill(0.0f);
  auto last = net.body->at<nn::Linear>(2);
  last->weight.data().fill(1e38f);
  const Tensor x = full({5, 3}, 10.0f);
  {
    Tensor y = net.forward(x);  // off: inf comes out unnoticed
    EXPECT_FALSE(finite(y));
  }
  DetectAnomalyGuard guard;
  const std::string msg = anomaly_message([&] { net.forward(x); });
  EXPECT_NE(msg.find("forward of op 'linear'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in module 'body.2 (Linear 4→2)'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("output shape [5, 2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inputs [5, 4], [2, 4] (leaf), [2] (leaf)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("every input was finite"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inf"), std::string::npos) << msg;
}

TEST(Anomaly, ExpOverflowInAModuleOfYourOwn) {
  struct Softplusish : nn::Module {
    Softplusish() : Module("Softplusish") {}
    Tensor forward(const Tensor& x) {
      auto scope = this->scope();
      return log(exp(x) + 1.0f);
    }
  };
  auto root = std::make_shared<nn::Module>("Root");
  auto act = root->register_module("act", std::make_shared<Softplusish>());
  DetectAnomalyGuard guard;
  EXPECT_NO_THROW(act->forward(full({2, 3}, 80.0f)));  // e^80 fits in float32
  const std::string msg = anomaly_message([&] { act->forward(full({2, 3}, 100.0f)); });
  // exp is the first op to overflow; add and log only pass the inf on.
  EXPECT_NE(msg.find("forward of op 'exp' in module 'act (Softplusish)'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inf (6 of 6 values: 6 inf)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("output shape [2, 3]"), std::string::npos) << msg;
}

TEST(Anomaly, LogOfZeroInTheForward) {
  DetectAnomalyGuard guard;
  Tensor x = tensor(std::vector<float>{1.0f, 0.0f, 2.0f}, Shape{3}, true);
  const std::string msg = anomaly_message([&] { sum(log(x)); });
  EXPECT_NE(msg.find("forward of op 'log' (no module scope)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-inf (1 of 3 values: 1 -inf)"), std::string::npos) << msg;
}

TEST(Anomaly, UserDataHoldingNaNIsReportedAtTheFirstOpThatReadsIt) {
  DetectAnomalyGuard guard;
  Tensor x = tensor(std::vector<float>{1.0f, std::nanf("")}, Shape{2});
  Tensor w = ones({2}, true);
  const std::string msg = anomaly_message([&] { sum(tanh(x * w)); });
  EXPECT_NE(msg.find("forward of op 'mul'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2] holding NaN (1 of 2 values: 1 NaN) (leaf)"), std::string::npos) << msg;
}

TEST(Anomaly, SqrtAtZeroInTheBackward) {
  // sqrt(0) = 0 is fine; its derivative 1 / (2 √x) is inf there.
  Tensor x = tensor(std::vector<float>{0.0f, 4.0f}, Shape{2}, true);
  Tensor y = sum(sqrt(x));
  DetectAnomalyGuard guard;
  const std::string msg = anomaly_message([&] { y.backward(); });
  EXPECT_NE(msg.find("backward of op 'sqrt'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inf (1 of 2 values: 1 inf) in the gradient of its input 0 (shape [2], a leaf"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the output gradient it received: [2], finite"), std::string::npos) << msg;
}

TEST(Anomaly, NaNInTheBackwardFromZeroTimesInf) {
  // d/dx of sqrt(x)·0 at 0 is 0·inf = NaN: the first bad gradient comes from sqrt's closure,
  // not from mul's (which gives a finite 0).
  Tensor x = tensor(std::vector<float>{0.0f, 1.0f, 9.0f}, Shape{3}, true);
  Tensor y = sum(sqrt(x) * zeros({3}));
  DetectAnomalyGuard guard;
  const std::string msg = anomaly_message([&] { y.backward(); });
  EXPECT_NE(msg.find("backward of op 'sqrt'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN (1 of 3 values: 1 NaN)"), std::string::npos) << msg;
}

TEST(Anomaly, BackwardOverflowNamesTheModuleThatRecordedTheOp) {
  manual_seed(2);
  Net net;
  auto first = net.body->at<nn::Linear>(0);
  first->weight.data().fill(1e30f);
  first->bias.data().fill(0.0f);
  const Tensor x = full({2, 3}, 1e-32f);  // forward: 3e-2, finite
  Tensor y = net.forward(x);
  ASSERT_TRUE(finite(y));
  DetectAnomalyGuard guard;
  // A huge upstream gradient: tanh passes ~1e10 on, and 1e10 · 1e30 overflows in dL/dx.
  const std::string msg = anomaly_message([&] {
    Tensor xg = x.detach().requires_grad_();
    net.forward(xg).backward(full({2, 2}, 1e30f));
  });
  EXPECT_NE(msg.find("backward of op 'linear' in module 'body.0 (Linear 3→4)'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gradient of its input 0 (shape [2, 3], a leaf"), std::string::npos) << msg;
}

TEST(Anomaly, ABadUpstreamGradientIsReported) {
  Tensor x = ones({2}, true);
  Tensor y = x * 2.0f;
  DetectAnomalyGuard guard;
  const std::string msg = anomaly_message([&] { y.backward(tensor(std::vector<float>{1.0f, kInf}, Shape{2})); });
  EXPECT_NE(msg.find("backward() was given a gradient holding inf"), std::string::npos) << msg;
  EXPECT_NE(msg.find("op 'mul_scalar'"), std::string::npos) << msg;
}

TEST(Anomaly, TrainingThatDivergesStopsAtTheFirstBadOp) {
  // Linear regression with a learning rate that makes SGD diverge: off, the loss silently
  // becomes inf/NaN; on, the first op that overflows throws.
  auto run = [](bool anomaly) {
    manual_seed(3);
    nn::Linear lin(4, 1);
    optim::SGD opt(lin.parameters(), optim::SGDOptions(50.0));
    const Tensor x = randn({16, 4}), t = randn({16, 1});
    DetectAnomalyGuard guard(anomaly);
    for (int step = 0; step < 200; ++step) {
      opt.zero_grad();
      Tensor loss = mse_loss(lin.forward(x), t);
      if (!std::isfinite(loss.item())) return step;
      loss.backward();
      opt.step();
    }
    return -1;
  };
  const int diverged_at = run(false);
  ASSERT_GT(diverged_at, 0) << "the off run should diverge";
  int thrown_at = -1;
  std::string msg;
  try {
    run(true);
  } catch (const AnomalyError& e) {
    msg = e.what();
    thrown_at = 0;
  }
  ASSERT_EQ(thrown_at, 0) << "the diverging run did not raise an AnomalyError";
  EXPECT_NE(msg.find("anomaly detected"), std::string::npos) << msg;
  EXPECT_NE(msg.find("produced inf"), std::string::npos) << msg;
}

TEST(Anomaly, NoFalseAlarmsAndNoEffectOnResults) {
  // A transformer block with a causal mask (-inf inside the fused op) and a masked_fill with
  // -inf, forward and backward: nothing is flagged and gradients are bitwise the same.
  auto run = [](bool anomaly) {
    manual_seed(4);
    nn::TransformerBlock block(nn::TransformerBlockOptions(8, 2, 16));
    DetectAnomalyGuard guard(anomaly);
    Tensor x = randn({2, 5, 8});
    Tensor y = block.forward(x, nn::AttentionForwardOptions().causal(true));
    Tensor scores = masked_fill(y, tensor(std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, Shape{8}),
                                -kInf);
    Tensor loss = sum(softmax(scores, -1) * y);
    loss.backward();
    std::vector<std::vector<float>> grads;
    for (const auto& p : block.parameters()) grads.push_back(p.grad().to_vector());
    return grads;
  };
  std::vector<std::vector<float>> off, on;
  off = run(false);
  ASSERT_NO_THROW(on = run(true));
  EXPECT_EQ(off, on);
}

TEST(Anomaly, ModuleScopesNestAndCostNothingWhenOff) {
  nn::Linear outer(2, 2);
  auto root = std::make_shared<nn::Module>("Root");
  auto inner = root->register_module("inner", std::make_shared<nn::Linear>(2, 3));
  {
    auto a = outer.scope();
    EXPECT_EQ(current_module(), "");  // off: nothing is recorded
  }
  DetectAnomalyGuard guard;
  EXPECT_EQ(current_module(), "");
  {
    auto a = outer.scope();
    EXPECT_EQ(current_module(), "Linear 2→2");
    {
      auto b = inner->scope();
      EXPECT_EQ(current_module(), "inner (Linear 2→3)");
      {
        const ModuleScope c("decoder.head");  // any path, e.g. from a module of one's own
        EXPECT_EQ(current_module(), "decoder.head");
        const ModuleScope none("");  // an empty path opens nothing
        EXPECT_EQ(current_module(), "decoder.head");
      }
      EXPECT_EQ(current_module(), "inner (Linear 2→3)");
    }
    EXPECT_EQ(current_module(), "Linear 2→2");
  }
  EXPECT_EQ(current_module(), "");
  // A forward that throws leaves no scope behind.
  EXPECT_THROW(inner->forward(ones({1, 5})), ShapeError);
  EXPECT_EQ(current_module(), "");
}

TEST(Anomaly, CustomOpsAreCheckedToo) {
  Tensor x = tensor(std::vector<float>{1.0f, 2.0f}, Shape{2}, true);
  Tensor y = custom_op("bad_grad", x.detach(), {x}, [](const Tensor& g) {
    return std::vector<Tensor>{full(g.shape(), std::nanf(""))};  // a factory: not an op
  });
  DetectAnomalyGuard guard;
  const std::string msg = anomaly_message([&] { sum(y).backward(); });
  EXPECT_NE(msg.find("backward of op 'bad_grad'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN (2 of 2 values: 2 NaN)"), std::string::npos) << msg;
}
