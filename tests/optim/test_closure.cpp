// Optimizer API beyond the update rules: step(closure) against step() and against PyTorch 1.13
// (tests/reference/make_grad_api.py), typed options (getters, defaults()), the two rules for a
// group's options, and the constructor shortcuts.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
using namespace tg::optim;

namespace {

using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;

/// The configurations of make_grad_api.py's closure cases.
std::vector<std::pair<std::string, Factory>> cases() {
  using P = std::vector<Tensor>;
  return {
      {"sgd",
       [](P p) {
         return std::make_unique<SGD>(
             p, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
       }},
      {"adam", [](P p) { return std::make_unique<Adam>(p, AdamOptions(0.05).amsgrad(true)); }},
      {"adamw",
       [](P p) { return std::make_unique<AdamW>(p, AdamWOptions(0.05).weight_decay(0.1)); }},
      {"rmsprop",
       [](P p) {
         return std::make_unique<RMSprop>(p, RMSpropOptions(0.01).momentum(0.5).centered(true));
       }},
  };
}

/// The problem of make_grad_api.py: loss(w, b) = mean((tanh(X w + b) − T)²) + 0.01·Σw⁴.
struct Problem {
  Tensor X = ref::load("grad_api/closure.X.npy"), T = ref::load("grad_api/closure.T.npy");
  Tensor w = ref::load("grad_api/closure.w.npy", true);
  Tensor b = ref::load("grad_api/closure.b.npy", true);
  Tensor loss() const {
    Tensor r = tanh(matmul(X, w) + b) - T;
    return mean(r * r) + 0.01f * sum(pow(w, 4.0f));
  }
};

constexpr int kSteps = 6;

Tensor row(const Tensor& stacked, int64_t t) { return select(stacked, 0, t).contiguous(); }

}  // namespace

TEST(StepClosure, MatchesPyTorchAndStepWithoutClosure) {
  for (const auto& [name, make] : cases()) {
    SCOPED_TRACE(name);
    const Tensor want_w = ref::load("grad_api/closure_" + name + ".w.npy");
    const Tensor want_b = ref::load("grad_api/closure_" + name + ".b.npy");
    const Tensor want_loss = ref::load("grad_api/closure_" + name + ".loss.npy");

    Problem p;  // with a closure
    auto opt = make({p.w, p.b});
    int calls = 0;
    Problem q;  // the same by hand: zero_grad, loss, backward, step()
    auto opt2 = make({q.w, q.b});
    for (int t = 0; t < kSteps; ++t) {
      const Tensor loss = opt->step([&] {
        ++calls;
        opt->zero_grad();
        Tensor l = p.loss();
        l.backward();
        return l;
      });
      EXPECT_EQ(calls, t + 1);
      EXPECT_TRUE(ref::close(loss, scalar(want_loss.to_vector()[t]), 1e-5, 1e-4)) << "step " << t;
      EXPECT_TRUE(ref::close(p.w, row(want_w, t), 1e-5, 1e-4)) << "step " << t;
      EXPECT_TRUE(ref::close(p.b, row(want_b, t), 1e-5, 1e-4)) << "step " << t;

      opt2->zero_grad();
      Tensor l2 = q.loss();
      l2.backward();
      EXPECT_FALSE(opt2->step().defined());
      EXPECT_EQ(p.w.to_vector(), q.w.to_vector()) << "step " << t;  // bitwise
      EXPECT_EQ(p.b.to_vector(), q.b.to_vector()) << "step " << t;
      EXPECT_EQ(loss.item(), l2.item());
    }
  }
}

TEST(StepClosure, RunsWithGradModeOnAndRestoresIt) {
  Tensor w = tensor({1.0f, -2.0f}, true);
  SGD opt({w}, 0.5);
  NoGradGuard ng;  // step under no-grad, as a training loop might
  bool grad_mode_inside = false;
  const Tensor loss = opt.step([&] {
    grad_mode_inside = is_grad_enabled();
    opt.zero_grad();
    Tensor l = sum(w * w);
    l.backward();
    return l;
  });
  EXPECT_TRUE(grad_mode_inside);
  EXPECT_FALSE(is_grad_enabled());
  EXPECT_FLOAT_EQ(loss.item(), 5.0f);
  EXPECT_EQ(w.to_vector(), (std::vector<float>{0.0f, 0.0f}));  // w − 0.5·2w
  // A closure that throws leaves the parameters as they were, and grad mode as it was.
  EXPECT_THROW(opt.step([]() -> Tensor { throw ValueError("no loss"); }), ValueError);
  EXPECT_FALSE(is_grad_enabled());
}

TEST(OptimOptions, GettersAreTyped) {
  Tensor w = zeros({2}, true);
  Adam opt({w}, AdamOptions(0.01).betas({0.8, 0.9}).weight_decay(0.1));
  auto& o = static_cast<AdamOptions&>(opt.param_groups()[0].options());  // LibTorch's way
  EXPECT_DOUBLE_EQ(o.lr(), 0.01);
  EXPECT_DOUBLE_EQ(o.betas().first, 0.8);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options<AdamOptions>().weight_decay(), 0.1);
  EXPECT_DOUBLE_EQ(opt.defaults<AdamOptions>().betas().second, 0.9);
  EXPECT_FALSE(opt.defaults<AdamOptions>().amsgrad());
  EXPECT_DOUBLE_EQ(opt.defaults<AdamOptions>().eps(), 1e-8);
  // Setting through the typed reference changes the group.
  opt.param_groups()[0].options<AdamOptions>().lr(0.5);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr(), 0.5);
  try {
    opt.defaults<SGDOptions>();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Adam's, not tg::optim::SGDOptions"), std::string::npos)
        << e.what();
  }
  const Optimizer& c = opt;
  EXPECT_DOUBLE_EQ(c.param_groups()[0].options<AdamOptions>().betas().first, 0.8);
  // The defaults change the groups added afterwards.
  opt.defaults<AdamOptions>().lr(0.2);
  opt.add_param_group(ParamGroup({zeros({1}, true)}));
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].lr(), 0.2);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].lr(), 0.5);

  RMSprop r({zeros({1}, true)}, RMSpropOptions().alpha(0.5).centered(true));
  EXPECT_DOUBLE_EQ(r.defaults<RMSpropOptions>().alpha(), 0.5);
  EXPECT_TRUE(r.param_groups()[0].options<RMSpropOptions>().centered());
  SGD s({zeros({1}, true)}, SGDOptions(0.1).dampening(0.2));
  EXPECT_DOUBLE_EQ(s.defaults<SGDOptions>().dampening(), 0.2);
  EXPECT_FALSE(s.defaults<SGDOptions>().nesterov());
}

TEST(OptimOptions, WholeOptionsAreUsedWholeOverridesChangeSingleFields) {
  Tensor a = zeros({2}, true), b = zeros({2}, true), c = zeros({2}, true);
  const AdamOptions defaults = AdamOptions(1e-3).weight_decay(0.1).betas({0.8, 0.95}).amsgrad(true);
  Adam opt({ParamGroup({a}),                               // the defaults
            ParamGroup({b}, AdamOptions(0.05)),            // LibTorch: these options, whole
            ParamGroup({c}, {{"lr", 0.05}, {"amsgrad", 0}})},  // Python: defaults, lr changed
           defaults);
  const auto& ga = opt.param_groups()[0].options<AdamOptions>();
  const auto& gb = opt.param_groups()[1].options<AdamOptions>();
  const auto& gc = opt.param_groups()[2].options<AdamOptions>();
  EXPECT_DOUBLE_EQ(ga.weight_decay(), 0.1);
  EXPECT_TRUE(ga.amsgrad());
  // Whole: AdamOptions(0.05)'s own defaults, not the optimizer's.
  EXPECT_DOUBLE_EQ(gb.lr(), 0.05);
  EXPECT_DOUBLE_EQ(gb.weight_decay(), 0.0);
  EXPECT_DOUBLE_EQ(gb.betas().first, 0.9);
  EXPECT_FALSE(gb.amsgrad());
  // Overrides: the optimizer's defaults with lr and amsgrad changed.
  EXPECT_DOUBLE_EQ(gc.lr(), 0.05);
  EXPECT_DOUBLE_EQ(gc.weight_decay(), 0.1);
  EXPECT_DOUBLE_EQ(gc.betas().first, 0.8);
  EXPECT_DOUBLE_EQ(gc.betas().second, 0.95);
  EXPECT_FALSE(gc.amsgrad());
  // Options of another optimizer, or an unknown field, are errors naming the group.
  EXPECT_THROW(Adam({ParamGroup({a}, SGDOptions(0.1))}), ValueError);
  EXPECT_THROW(Adam({ParamGroup({a}, {{"momentum", 0.9}})}), ValueError);
}

TEST(OptimOptions, ConstructorShortcuts) {
  Tensor w = zeros({2}, true);
  EXPECT_DOUBLE_EQ(SGD({w}, 0.1).defaults().get_lr(), 0.1);
  EXPECT_DOUBLE_EQ(Adam({w}).defaults().get_lr(), 1e-3);
  EXPECT_DOUBLE_EQ(Adam({w}, 0.02).defaults<AdamOptions>().lr(), 0.02);
  EXPECT_DOUBLE_EQ(AdamW({w}, 0.03).defaults<AdamWOptions>().lr(), 0.03);
  EXPECT_DOUBLE_EQ(AdamW({w}).defaults<AdamWOptions>().weight_decay(), 1e-2);
  EXPECT_DOUBLE_EQ(RMSprop({w}, 0.04).defaults<RMSpropOptions>().lr(), 0.04);
  EXPECT_DOUBLE_EQ(RMSprop({w}).defaults<RMSpropOptions>().lr(), 1e-2);
  std::vector<Tensor> params{w};
  SGD from_list(params, 0.3);
  EXPECT_DOUBLE_EQ(from_list.param_groups()[0].lr(), 0.3);
  SGD from_groups({ParamGroup({w}, {{"momentum", 0.5}})}, 0.3);
  EXPECT_DOUBLE_EQ(from_groups.param_groups()[0].options<SGDOptions>().momentum(), 0.5);
  EXPECT_THROW(SGD({w}, -1.0), ValueError);
}
