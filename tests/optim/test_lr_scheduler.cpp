// LR schedulers: lr sequences against PyTorch 1.13 (tests/reference/make_optim.py), saving
// and restoring mid-way, and option checks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include <xtensor/xnpy.hpp>

#include "reference.h"
#include "tapegrad/optim.h"

using namespace tg;
using namespace tg::optim;

namespace {

/// The float64 reference lrs: one row per epoch (from construction), one column per group.
std::vector<std::vector<double>> reference_lrs(const std::string& name) {
  auto a = xt::load_npy<double>(ref::path("optim/sched_" + name + ".lr.npy"));
  std::vector<std::vector<double>> rows(a.shape()[0]);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t g = 0; g < a.shape()[1]; ++g) rows[i].push_back(a(i, g));
  return rows;
}

/// The same optimizer as the script: two groups with lrs 0.1 and 0.02.
struct TwoGroups {
  Tensor a = zeros({2}, true), b = zeros({3}, true);
  SGD opt{std::vector<ParamGroup>{ParamGroup({a}), ParamGroup({b}, {{"lr", 0.02}})}, SGDOptions(0.1)};
};

using Make = std::function<std::unique_ptr<LRScheduler>(Optimizer&)>;

double lambda_09(int64_t e) { return std::pow(0.9, static_cast<double>(e)); }

std::map<std::string, Make> schedulers() {
  return {
      {"steplr", [](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }},
      {"cosine", [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 8, 1e-3); }},
      {"cosine_zero", [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 5); }},
      {"warmup_cosine", [](Optimizer& o) { return std::make_unique<WarmupCosineLR>(o, 4, 20, 0.1); }},
      {"lambda", [](Optimizer& o) { return std::make_unique<LambdaLR>(o, lambda_09); }},
  };
}

/// Exact: the same double operations in the same order as PyTorch's Python.
void expect_lrs(const LRScheduler& s, const Optimizer& opt, const std::vector<double>& expected,
                const std::string& where) {
  ASSERT_EQ(s.get_last_lr().size(), expected.size()) << where;
  for (size_t g = 0; g < expected.size(); ++g) {
    EXPECT_EQ(s.get_last_lr()[g], expected[g]) << where << " group " << g;
    EXPECT_EQ(opt.param_groups()[g].lr(), expected[g]) << where << " group " << g;
  }
}

class SchedReference : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(SchedReference, MatchesPyTorch) {
  const std::string name = GetParam();
  const auto lrs = reference_lrs(name);
  TwoGroups s;
  auto sched = schedulers().at(name)(s.opt);
  expect_lrs(*sched, s.opt, lrs[0], name + " at construction");
  for (size_t e = 1; e < lrs.size(); ++e) {
    s.opt.step();
    sched->step();
    EXPECT_EQ(sched->last_epoch(), static_cast<int64_t>(e));
    expect_lrs(*sched, s.opt, lrs[e], name + " epoch " + std::to_string(e));
  }
}

TEST_P(SchedReference, SaveAndRestoreMidway) {
  const std::string name = GetParam();
  const auto lrs = reference_lrs(name);
  const size_t k = lrs.size() / 2;
  StateDict opt_state, sched_state;
  {
    TwoGroups s;
    auto sched = schedulers().at(name)(s.opt);
    for (size_t e = 1; e <= k; ++e) sched->step();
    opt_state = s.opt.state_dict();
    sched_state = sched->state_dict();
    EXPECT_EQ(sched_state.strings.at("type"), sched->type_name());
    EXPECT_EQ(sched_state.numbers.at("last_epoch"), static_cast<double>(k));
  }
  // A fresh optimizer and scheduler (which take their own epoch-0 step), then both restored.
  TwoGroups s;
  auto sched = schedulers().at(name)(s.opt);
  s.opt.load_state_dict(opt_state);
  sched->load_state_dict(sched_state);
  EXPECT_EQ(sched->last_epoch(), static_cast<int64_t>(k));
  expect_lrs(*sched, s.opt, lrs[k], name + " restored");
  for (size_t e = k + 1; e < lrs.size(); ++e) {
    sched->step();
    expect_lrs(*sched, s.opt, lrs[e], name + " resumed epoch " + std::to_string(e));
  }
}

INSTANTIATE_TEST_SUITE_P(All, SchedReference,
                         ::testing::Values("steplr", "cosine", "cosine_zero", "warmup_cosine", "lambda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(Sched, WarmupCosineFormula) {
  // W = 4, T = 20, r = 0.1: rises (e + 1) / 5 to the peak at e = 4, decays to r at e = 20.
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(0, 4, 20, 0.1), 0.2);
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(3, 4, 20, 0.1), 0.8);
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(4, 4, 20, 0.1), 1.0);
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(12, 4, 20, 0.1), 0.55);  // half way: r + (1 - r) / 2
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(20, 4, 20, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(100, 4, 20, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(WarmupCosineLR::factor(0, 0, 10, 0.0), 1.0);  // no warmup
}

TEST(Sched, BadArgumentsAreValueErrors) {
  TwoGroups s;
  EXPECT_THROW(StepLR(s.opt, 0), ValueError);
  EXPECT_THROW(StepLR(s.opt, 3, -0.5), ValueError);
  EXPECT_THROW(CosineAnnealingLR(s.opt, 0), ValueError);
  EXPECT_THROW(CosineAnnealingLR(s.opt, 10, -1e-3), ValueError);
  EXPECT_THROW(WarmupCosineLR(s.opt, 10, 10), ValueError);
  EXPECT_THROW(WarmupCosineLR(s.opt, -1, 10), ValueError);
  EXPECT_THROW(WarmupCosineLR(s.opt, 2, 10, 1.5), ValueError);
  EXPECT_THROW(LambdaLR(s.opt, nullptr), ValueError);
}

TEST(Sched, MismatchedStateIsRejected) {
  TwoGroups s;
  StepLR sched(s.opt, 3, 0.5);
  sched.step();
  const StateDict good = sched.state_dict();
  auto rejected = [&](const std::function<void(StateDict&)>& corrupt, const std::string& word) {
    StateDict bad = good;
    corrupt(bad);
    TwoGroups t;
    StepLR target(t.opt, 3, 0.5);
    target.step();
    target.step();
    try {
      target.load_state_dict(bad);
      ADD_FAILURE() << "no error for " << word;
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
    EXPECT_EQ(target.last_epoch(), 2);  // unchanged
    target.step();
    target.step();  // epoch 4: no decay; epoch 3 decayed once
    EXPECT_DOUBLE_EQ(target.get_last_lr()[0], 0.05);
  };
  rejected([](StateDict& d) { d.strings["type"] = "CosineAnnealingLR"; }, "type");
  rejected([](StateDict& d) { d.numbers["num_groups"] = 3; }, "num_groups");
  rejected([](StateDict& d) { d.numbers.erase("base_lrs.1"); }, "base_lrs.1");
  rejected([](StateDict& d) { d.numbers["step_size"] = 0; }, "step_size");
  rejected([](StateDict& d) { d.numbers["last_epoch"] = -2; }, "last_epoch");
  rejected([](StateDict& d) { d.numbers["T_max"] = 4; }, "T_max");
  // A state loads into a scheduler with other options and takes them over, as in PyTorch.
  TwoGroups t;
  StepLR other(t.opt, 7, 0.9);
  other.load_state_dict(good);
  EXPECT_EQ(other.state_dict().numbers.at("step_size"), 3.0);
  EXPECT_EQ(other.state_dict().numbers.at("gamma"), 0.5);
}

TEST(Sched, FollowsLrChangedThroughGroups) {
  // StepLR's chainable form scales whatever the lr is now.
  TwoGroups s;
  StepLR sched(s.opt, 2, 0.5);
  s.opt.param_groups()[0].set_lr(1.0);
  sched.step();
  sched.step();
  EXPECT_DOUBLE_EQ(s.opt.param_groups()[0].lr(), 0.5);
}
