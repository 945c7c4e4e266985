// Optimizers: PyTorch 1.13 trajectories (tests/reference/make_optim.py), option checks,
// parameter groups, state-dict round trips and rejection of state that does not fit; and
// gradient clipping against PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "reference.h"
#include "tapegrad/optim.h"

using namespace tg;
using namespace tg::optim;

namespace {

/// Row t of a stacked tensor (S, ...) as a tensor of shape (...).
Tensor row(const Tensor& stacked, int64_t t) {
  const Shape full_shape = stacked.shape();
  const Shape shape(full_shape.begin() + 1, full_shape.end());
  const int64_t n = stacked.numel() / stacked.size(0);
  std::vector<float> v(stacked.data_ptr() + t * n, stacked.data_ptr() + (t + 1) * n);
  return tensor(v, shape);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), sizeof(float) * a.numel()) == 0;
}

using Factory = std::function<std::unique_ptr<Optimizer>(Tensor, Tensor)>;

/// The same configurations as make_optim.py.
std::map<std::string, Factory> cases() {
  std::map<std::string, Factory> c;
  auto one = [](auto make) { return make; };
  c["sgd_plain"] = one([](Tensor a, Tensor b) {
    return std::make_unique<SGD>(std::vector<Tensor>{a, b}, SGDOptions(0.1));
  });
  c["sgd_momentum"] = [](Tensor a, Tensor b) {
    return std::make_unique<SGD>(std::vector<Tensor>{a, b}, SGDOptions(0.05).momentum(0.9));
  };
  c["sgd_dampening_wd"] = [](Tensor a, Tensor b) {
    return std::make_unique<SGD>(std::vector<Tensor>{a, b},
                                 SGDOptions(0.05).momentum(0.8).dampening(0.3).weight_decay(0.05));
  };
  c["sgd_nesterov"] = [](Tensor a, Tensor b) {
    return std::make_unique<SGD>(std::vector<Tensor>{a, b},
                                 SGDOptions(0.05).momentum(0.7).nesterov(true).weight_decay(0.01));
  };
  c["sgd_maximize"] = [](Tensor a, Tensor b) {
    return std::make_unique<SGD>(std::vector<Tensor>{a, b},
                                 SGDOptions(0.02).momentum(0.5).maximize(true));
  };
  c["sgd_groups"] = [](Tensor a, Tensor b) {
    return std::make_unique<SGD>(
        std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b}, {{"lr", 0.01}, {"momentum", 0.5}})},
        SGDOptions(0.1).momentum(0.9));
  };
  c["adam_default"] = [](Tensor a, Tensor b) {
    return std::make_unique<Adam>(std::vector<Tensor>{a, b}, AdamOptions(1e-2));
  };
  c["adam_betas_eps_wd"] = [](Tensor a, Tensor b) {
    return std::make_unique<Adam>(std::vector<Tensor>{a, b},
                                  AdamOptions(5e-3).betas({0.8, 0.95}).eps(1e-3).weight_decay(0.1));
  };
  c["adam_amsgrad"] = [](Tensor a, Tensor b) {
    return std::make_unique<Adam>(std::vector<Tensor>{a, b},
                                  AdamOptions(1e-2).amsgrad(true).weight_decay(0.01));
  };
  c["adam_maximize"] = [](Tensor a, Tensor b) {
    return std::make_unique<Adam>(std::vector<Tensor>{a, b}, AdamOptions(1e-2).maximize(true));
  };
  c["adam_groups"] = [](Tensor a, Tensor b) {
    // Typed options for the second group (the whole options, PyTorch C++ style).
    return std::make_unique<Adam>(
        std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b}, AdamOptions(0.05).weight_decay(0.2))},
        AdamOptions(1e-2));
  };
  c["adamw_default"] = [](Tensor a, Tensor b) {
    return std::make_unique<AdamW>(std::vector<Tensor>{a, b}, AdamWOptions(1e-2));
  };
  c["adamw_wd_amsgrad"] = [](Tensor a, Tensor b) {
    return std::make_unique<AdamW>(
        std::vector<Tensor>{a, b},
        AdamWOptions(2e-2).betas({0.85, 0.99}).eps(1e-6).weight_decay(0.3).amsgrad(true));
  };
  c["adamw_groups"] = [](Tensor a, Tensor b) {
    return std::make_unique<AdamW>(
        std::vector<ParamGroup>{ParamGroup({a}, {{"weight_decay", 0.0}}), ParamGroup({b}, {{"lr", 0.03}})},
        AdamWOptions(1e-2));
  };
  c["rmsprop_default"] = [](Tensor a, Tensor b) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{a, b}, RMSpropOptions(1e-2));
  };
  c["rmsprop_alpha_eps_wd"] = [](Tensor a, Tensor b) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{a, b},
                                     RMSpropOptions(1e-2).alpha(0.9).eps(1e-4).weight_decay(0.1));
  };
  c["rmsprop_momentum"] = [](Tensor a, Tensor b) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{a, b}, RMSpropOptions(5e-3).momentum(0.9));
  };
  c["rmsprop_centered"] = [](Tensor a, Tensor b) {
    return std::make_unique<RMSprop>(std::vector<Tensor>{a, b},
                                     RMSpropOptions(5e-3).centered(true).momentum(0.5));
  };
  c["rmsprop_maximize_groups"] = [](Tensor a, Tensor b) {
    return std::make_unique<RMSprop>(
        std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b}, {{"lr", 0.02}, {"centered", 1}})},
        RMSpropOptions(1e-2).maximize(true));
  };
  return c;
}

/// One reference case: parameters, gradients and the PyTorch trajectory.
struct Trajectory {
  Tensor p[2], g[2], has[2], traj[2];
  int64_t steps = 0;
  explicit Trajectory(const std::string& name) {
    for (int k = 0; k < 2; ++k) {
      const std::string base = "optim/" + name + ".";
      p[k] = ref::load(base + "p" + std::to_string(k) + ".npy", true);
      g[k] = ref::load(base + "g" + std::to_string(k) + ".npy");
      has[k] = ref::load(base + "has" + std::to_string(k) + ".npy");
      traj[k] = ref::load(base + "traj" + std::to_string(k) + ".npy");
    }
    steps = g[0].size(0);
  }
  /// Sets the gradients of step t on (a, b) as the reference did.
  void set_grads(int64_t t, const Tensor& a, const Tensor& b) const {
    const Tensor* ps[2] = {&a, &b};
    for (int k = 0; k < 2; ++k)
      ps[k]->set_grad(has[k].data_ptr()[t] != 0 ? row(g[k], t) : Tensor());
  }
};

class OptimTrajectory : public ::testing::TestWithParam<std::string> {};

}  // namespace

// With FMA the loops round exactly as ATen's AVX2 kernels did when the references were made,
// so the trajectories must agree to the bit; without it, to about 1e-6 relative.
#ifdef __FMA__
constexpr double kAtol = 0, kRtol = 0;
#else
constexpr double kAtol = 1e-7, kRtol = 1e-6;
#endif

TEST_P(OptimTrajectory, MatchesPyTorch) {
  const std::string name = GetParam();
  Trajectory r(name);
  ASSERT_GE(r.steps, 5);
  auto opt = cases().at(name)(r.p[0], r.p[1]);
  for (int64_t t = 0; t < r.steps; ++t) {
    r.set_grads(t, r.p[0], r.p[1]);
    opt->step();
    for (int k = 0; k < 2; ++k)
      EXPECT_TRUE(ref::close(r.p[k], row(r.traj[k], t), kAtol, kRtol))
          << name << ": parameter " << k << " after step " << t + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, OptimTrajectory,
    ::testing::Values("sgd_plain", "sgd_momentum", "sgd_dampening_wd", "sgd_nesterov",
                      "sgd_maximize", "sgd_groups", "adam_default", "adam_betas_eps_wd",
                      "adam_amsgrad", "adam_maximize", "adam_groups", "adamw_default",
                      "adamw_wd_amsgrad", "adamw_groups", "rmsprop_default", "rmsprop_alpha_eps_wd",
                      "rmsprop_momentum", "rmsprop_centered", "rmsprop_maximize_groups"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- options and groups ----------------------------------------------------------------------

TEST(Optim, BadOptionsAreValueErrors) {
  Tensor w = zeros({2}, true);
  std::vector<Tensor> ps{w};
  EXPECT_THROW(SGD(ps, SGDOptions(-0.1)), ValueError);
  EXPECT_THROW(SGD(ps, SGDOptions(NAN)), ValueError);
  EXPECT_THROW(SGD(ps, SGDOptions(0.1).momentum(-0.5)), ValueError);
  EXPECT_THROW(SGD(ps, SGDOptions(0.1).weight_decay(-1)), ValueError);
  EXPECT_THROW(SGD(ps, SGDOptions(0.1).nesterov(true)), ValueError);  // no momentum
  EXPECT_THROW(SGD(ps, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)), ValueError);
  EXPECT_THROW(Adam(ps, AdamOptions(-1e-3)), ValueError);
  EXPECT_THROW(Adam(ps, AdamOptions().betas({1.0, 0.999})), ValueError);
  EXPECT_THROW(Adam(ps, AdamOptions().betas({0.9, 1.0})), ValueError);
  EXPECT_THROW(Adam(ps, AdamOptions().betas({-0.1, 0.9})), ValueError);
  EXPECT_THROW(Adam(ps, AdamOptions().eps(-1e-8)), ValueError);
  EXPECT_THROW(AdamW(ps, AdamWOptions().weight_decay(-0.01)), ValueError);
  EXPECT_THROW(RMSprop(ps, RMSpropOptions().alpha(-0.9)), ValueError);
  EXPECT_THROW(RMSprop(ps, RMSpropOptions().momentum(-0.9)), ValueError);
  EXPECT_THROW(RMSprop(ps, RMSpropOptions().eps(-1)), ValueError);
  try {
    Adam(ps, AdamOptions().betas({0.9, 1.5}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("beta2"), std::string::npos) << e.what();
  }
  // A bad override in one group names the group.
  try {
    SGD(std::vector<ParamGroup>{ParamGroup({w}, {{"lr", -1.0}})}, SGDOptions(0.1));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("param group 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SGD(std::vector<ParamGroup>{ParamGroup({w}, {{"betas", 0.5}})}, SGDOptions(0.1)),
               ValueError);
}

TEST(Optim, DefaultsAsPyTorch) {
  Tensor w = zeros({2}, true);
  AdamW adamw({w});
  const auto& o = static_cast<const AdamWOptions&>(adamw.param_groups()[0].options());
  EXPECT_EQ(o.weight_decay(), 1e-2);
  EXPECT_EQ(o.lr(), 1e-3);
  EXPECT_EQ(o.betas().first, 0.9);
  EXPECT_EQ(o.betas().second, 0.999);
  EXPECT_EQ(o.eps(), 1e-8);
  Adam adam({w});
  EXPECT_EQ(static_cast<const AdamOptions&>(adam.param_groups()[0].options()).weight_decay(), 0.0);
  RMSprop rms({w});
  const auto& r = static_cast<const RMSpropOptions&>(rms.param_groups()[0].options());
  EXPECT_EQ(r.lr(), 1e-2);
  EXPECT_EQ(r.alpha(), 0.99);
}

TEST(Optim, GroupsAreChecked) {
  Tensor a = zeros({2}, true), b = zeros({3}, true);
  // Options of another optimizer.
  EXPECT_THROW(SGD(std::vector<ParamGroup>{ParamGroup({a}, AdamOptions())}, SGDOptions(0.1)), ValueError);
  EXPECT_THROW(Adam(std::vector<ParamGroup>{ParamGroup({a}, AdamWOptions())}), ValueError);
  // A parameter in two groups, or twice in one.
  EXPECT_THROW(SGD(std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b, a})}, SGDOptions(0.1)),
               ValueError);
  EXPECT_THROW(SGD(std::vector<Tensor>{a, a}, SGDOptions(0.1)), ValueError);
  // Not a leaf, undefined, nothing at all.
  EXPECT_THROW(SGD(std::vector<Tensor>{a * 2.0f}, SGDOptions(0.1)), ValueError);
  EXPECT_THROW(SGD(std::vector<Tensor>{Tensor()}, SGDOptions(0.1)), ValueError);
  EXPECT_THROW(SGD(std::vector<ParamGroup>{}, SGDOptions(0.1)), ValueError);

  SGD opt(std::vector<Tensor>{a}, SGDOptions(0.1));
  opt.add_param_group(ParamGroup({b}, {{"lr", 0.5}}));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.5);
  EXPECT_THROW(opt.add_param_group(ParamGroup({b})), ValueError);
  // The lr is mutable through the groups (what schedulers do).
  opt.param_groups()[0].set_lr(0.25);
  a.set_grad(ones({2}));
  opt.step();
  EXPECT_FLOAT_EQ(a.data()[0], -0.25f);
}

TEST(Optim, ZeroGradAndSkipsParamsWithoutGrad) {
  Tensor a = ones({2}, true), b = ones({2}, true);
  Adam opt(std::vector<Tensor>{a, b}, AdamOptions(0.1));
  a.set_grad(full({2}, 3.0f));
  opt.step();
  EXPECT_NE(a.data()[0], 1.0f);
  EXPECT_EQ(b.data()[0], 1.0f);          // no gradient: untouched
  EXPECT_EQ(opt.state(b), nullptr);      // and no state
  ASSERT_NE(opt.state(a), nullptr);
  EXPECT_EQ(opt.state(a)->numbers.at("step"), 1.0);
  EXPECT_TRUE(a.is_leaf());
  opt.zero_grad();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().data()[1], 0.0f);
  opt.zero_grad(/*set_to_none=*/true);
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optim, StepRecordsNothing) {
  Tensor w = ones({3}, true);
  SGD opt(std::vector<Tensor>{w}, SGDOptions(0.1).momentum(0.9));
  sum(w * w).backward();
  opt.step();
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_FLOAT_EQ(w.data()[0], 1.0f - 0.1f * 2.0f);
}

// ---- state dicts ----------------------------------------------------------------------------

namespace {

/// Runs `name` for k steps, saves, loads into a fresh optimizer over copies of the
/// parameters, and checks that both continue bitwise identically.
void check_round_trip(const std::string& name, int64_t k) {
  Trajectory r(name);
  Tensor a = r.p[0].clone().requires_grad_(), b = r.p[1].clone().requires_grad_();
  auto opt = cases().at(name)(a, b);
  for (int64_t t = 0; t < k; ++t) {
    r.set_grads(t, a, b);
    opt->step();
  }
  const StateDict saved = opt->state_dict();
  Tensor a2 = a.clone().requires_grad_(), b2 = b.clone().requires_grad_();
  Tensor fa = r.p[0].clone().requires_grad_(), fb = r.p[1].clone().requires_grad_();
  auto fresh = cases().at(name)(a2, b2);
  fresh->load_state_dict(saved);
  for (int64_t t = k; t < r.steps; ++t) {
    r.set_grads(t, a, b);
    r.set_grads(t, a2, b2);
    opt->step();
    fresh->step();
    EXPECT_TRUE(bitwise_equal(a, a2)) << name << " step " << t;
    EXPECT_TRUE(bitwise_equal(b, b2)) << name << " step " << t;
  }
  // The saved dict is a snapshot: the steps after saving did not change it.
  const StateDict again = cases().at(name)(fa, fb)->state_dict();
  EXPECT_TRUE(again.tensors.empty());
  for (const auto& [key, t] : saved.tensors) {
    (void)t;
    EXPECT_FALSE(bitwise_equal(saved.tensors.at(key), opt->state_dict().tensors.at(key))) << key;
  }
}

}  // namespace

TEST(OptimState, RoundTripContinuesBitwise) {
  for (const char* name : {"sgd_groups", "sgd_nesterov", "adam_amsgrad", "adam_groups",
                           "adamw_wd_amsgrad", "rmsprop_centered", "rmsprop_maximize_groups"})
    check_round_trip(name, 3);
}

TEST(OptimState, KeysAsDocumented) {
  Tensor a = zeros({3, 4}, true), b = zeros({5}, true);
  Adam opt(std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b}, {{"lr", 0.5}})},
           AdamOptions(0.1).amsgrad(true));
  b.set_grad(ones({5}));
  opt.step();
  const StateDict d = opt.state_dict();
  EXPECT_EQ(d.strings.at("type"), "Adam");
  EXPECT_EQ(d.numbers.at("num_param_groups"), 2.0);
  EXPECT_EQ(d.numbers.at("param_groups.0.num_params"), 1.0);
  EXPECT_EQ(d.numbers.at("param_groups.0.lr"), 0.1);
  EXPECT_EQ(d.numbers.at("param_groups.1.lr"), 0.5);
  EXPECT_EQ(d.numbers.at("param_groups.1.amsgrad"), 1.0);
  EXPECT_EQ(d.numbers.at("state.1.step"), 1.0);
  EXPECT_EQ(d.tensors.at("state.1.exp_avg").shape(), (Shape{5}));
  EXPECT_EQ(d.tensors.at("state.1.max_exp_avg_sq").shape(), (Shape{5}));
  EXPECT_EQ(d.tensors.count("state.0.exp_avg"), 0u);  // a never got a gradient
}

TEST(OptimState, LoadRestoresGroupOptions) {
  Tensor a = zeros({2}, true);
  SGD src(std::vector<Tensor>{a}, SGDOptions(0.3).momentum(0.5));
  Tensor b = zeros({2}, true);
  SGD dst(std::vector<Tensor>{b}, SGDOptions(0.1).momentum(0.9));
  dst.load_state_dict(src.state_dict());
  const auto& o = static_cast<const SGDOptions&>(dst.param_groups()[0].options());
  EXPECT_EQ(o.lr(), 0.3);
  EXPECT_EQ(o.momentum(), 0.5);
}

namespace {

/// A fresh Adam over (3, 4) and (5,) parameters after two steps, and its state.
struct Setup {
  Tensor a = ones({3, 4}, true), b = ones({5}, true);
  std::unique_ptr<Adam> opt;
  Setup() {
    opt = std::make_unique<Adam>(std::vector<Tensor>{a, b}, AdamOptions(0.1).amsgrad(true));
    for (int t = 0; t < 2; ++t) {
      a.set_grad(full({3, 4}, 0.5f * (t + 1)));
      b.set_grad(full({5}, -1.0f));
      opt->step();
    }
  }
};

bool same_state(const StateDict& x, const StateDict& y) {
  if (x.numbers != y.numbers || x.strings != y.strings || x.tensors.size() != y.tensors.size())
    return false;
  for (const auto& [k, t] : x.tensors)
    if (!y.tensors.count(k) || !bitwise_equal(t, y.tensors.at(k))) return false;
  return true;
}

/// Loading `bad` must throw CheckpointError mentioning every string in `words`, and leave
/// the optimizer exactly as it was.
void expect_rejected(const std::function<void(StateDict&)>& corrupt,
                     const std::vector<std::string>& words) {
  Setup s;
  StateDict bad = Setup().opt->state_dict();
  corrupt(bad);
  // Make the target differ from the source so that a partial load would show.
  s.a.set_grad(full({3, 4}, 2.0f));
  s.opt->step();
  const StateDict before = s.opt->state_dict();
  try {
    s.opt->load_state_dict(bad);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << "'" << w << "' not in: " << e.what();
  }
  EXPECT_TRUE(same_state(before, s.opt->state_dict()));
}

}  // namespace

TEST(OptimState, MismatchedStateIsRejectedAndChangesNothing) {
  // A state tensor of the wrong shape: the key and both shapes are named.
  expect_rejected([](StateDict& d) { d.tensors["state.1.exp_avg"] = zeros({4}); },
                  {"state.1.exp_avg", "[5]", "[4]"});
  expect_rejected([](StateDict& d) { d.tensors["state.0.max_exp_avg_sq"] = zeros({4, 3}); },
                  {"state.0.max_exp_avg_sq", "[3, 4]", "[4, 3]"});
  // Another optimizer type.
  expect_rejected([](StateDict& d) { d.strings["type"] = "SGD"; }, {"type", "SGD", "Adam"});
  // Group structure.
  expect_rejected([](StateDict& d) { d.numbers["num_param_groups"] = 2; }, {"num_param_groups"});
  expect_rejected([](StateDict& d) { d.numbers["param_groups.0.num_params"] = 3; },
                  {"param_groups.0.num_params", "3"});
  // A state entry for a parameter that does not exist, a missing one, an unknown one.
  expect_rejected([](StateDict& d) { d.tensors["state.2.exp_avg"] = zeros({5}); }, {"state.2.exp_avg"});
  expect_rejected([](StateDict& d) { d.tensors.erase("state.1.exp_avg_sq"); }, {"state.1.exp_avg_sq"});
  expect_rejected([](StateDict& d) { d.numbers.erase("state.0.step"); }, {"state.0.step"});
  expect_rejected([](StateDict& d) { d.tensors["state.0.momentum_buffer"] = zeros({3, 4}); },
                  {"state.0.momentum_buffer"});
  expect_rejected([](StateDict& d) { d.numbers["foo"] = 1; }, {"foo"});
  // Options: missing, out of range, or inconsistent with the state (no amsgrad buffer).
  expect_rejected([](StateDict& d) { d.numbers.erase("param_groups.0.eps"); }, {"param_groups.0.eps"});
  expect_rejected([](StateDict& d) { d.numbers["param_groups.0.lr"] = -1; }, {"lr"});
  expect_rejected([](StateDict& d) { d.numbers["param_groups.0.amsgrad"] = 0; },
                  {"max_exp_avg_sq"});
  expect_rejected([](StateDict& d) { d.numbers["state.0.step"] = 1.5; }, {"state.0.step"});
}

// ---- clipping ---------------------------------------------------------------------------------

namespace {
std::vector<Tensor> clip_params(const std::string& name) {
  std::vector<Tensor> ps;
  for (int k = 0; k < 3; ++k) {
    Tensor g = ref::load("optim/" + name + ".in" + std::to_string(k) + ".npy");
    Tensor p = zeros(g.shape(), true);
    p.set_grad(g);
    ps.push_back(p);
  }
  return ps;
}
}  // namespace

TEST(Clip, GradNormMatchesPyTorch) {
  const std::vector<std::pair<std::string, double>> runs = {
      {"norm2", 2.0}, {"norm2_noclip", 2.0}, {"norm1", 1.0}, {"norm3", 3.0},
      {"inf", INFINITY}, {"nan", 2.0}, {"infgrad", 2.0}, {"nan_infnorm", INFINITY}};
  const std::map<std::string, double> max_norm = {
      {"norm2", 1.0}, {"norm2_noclip", 100.0}, {"norm1", 2.0}, {"norm3", 0.5},
      {"inf", 0.5}, {"nan", 1.0}, {"infgrad", 1.0}, {"nan_infnorm", 1.0}};
  for (const auto& [name, p] : runs) {
    SCOPED_TRACE(name);
    auto ps = clip_params("clip_" + name);
    const double total = nn::utils::clip_grad_norm_(ps, max_norm.at(name), p);
    const float expected = ref::load("optim/clip_" + name + ".norm.npy").item();
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(total));
    else if (std::isinf(expected)) EXPECT_EQ(total, expected);
    else EXPECT_NEAR(total, expected, 1e-6 * std::abs(expected));
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(ref::close(ps[k].grad(), ref::load("optim/clip_" + name + ".out" + std::to_string(k) + ".npy"),
                             1e-7, 2e-6)) << "gradient " << k;
  }
}

TEST(Clip, ClippedNormIsMaxNorm) {
  auto ps = clip_params("clip_norm2");
  const double before = nn::utils::clip_grad_norm_(ps, 1.0);
  EXPECT_GT(before, 1.0);
  const double after = nn::utils::clip_grad_norm_(ps, 1e9);  // measures only
  EXPECT_NEAR(after, 1.0, 1e-5);
}

TEST(Clip, ErrorIfNonfiniteThrowsAndChangesNothing) {
  for (const char* name : {"clip_nan", "clip_infgrad"}) {
    auto ps = clip_params(name);
    const auto before = ps[1].grad().to_vector();
    EXPECT_THROW(nn::utils::clip_grad_norm_(ps, 1.0, 2.0, /*error_if_nonfinite=*/true), ValueError);
    const auto after = ps[1].grad().to_vector();
    EXPECT_EQ(std::memcmp(before.data(), after.data(), sizeof(float) * before.size()), 0);
  }
  auto ps = clip_params("clip_norm2");
  EXPECT_NO_THROW(nn::utils::clip_grad_norm_(ps, 1.0, 2.0, true));
  EXPECT_THROW(nn::utils::clip_grad_norm_(ps, 1.0, 0.0), ValueError);
  EXPECT_THROW(nn::utils::clip_grad_norm_(ps, -1.0), ValueError);
  // Parameters without gradients are skipped; none at all gives 0.
  EXPECT_EQ(nn::utils::clip_grad_norm_({zeros({2}, true)}, 1.0), 0.0);
}

TEST(Clip, GradValueMatchesPyTorch) {
  auto ps = clip_params("clipvalue");
  nn::utils::clip_grad_value_(ps, 0.5);
  for (int k = 0; k < 3; ++k)
    EXPECT_TRUE(ref::close(ps[k].grad(), ref::load("optim/clipvalue.out" + std::to_string(k) + ".npy"), 0, 0))
        << "gradient " << k;
  EXPECT_TRUE(std::isnan(ps[0].grad().data()[0]));
  EXPECT_THROW(nn::utils::clip_grad_value_(ps, -0.5), ValueError);
}
