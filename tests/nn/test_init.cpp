// tg::nn::init: fans and gains as PyTorch computes them (checked against
// tests/fixtures/nn/init.*.npy from tests/reference/make_nn.py), and statistical tests of every
// initializer on large tensors: bounds, mean and variance within tolerance.
//
// Tolerances: with n = 200,000 draws the sample mean has a standard error of σ/√n and the
// sample variance a relative one of √((κ - 1)/n) (κ = 1.8 uniform, 3 normal): 0.2-0.3 %.
// The tests allow 5 standard errors for the mean and 2 % for the variance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "reference.h"
#include "tapegrad/tapegrad.h"

using namespace tg;
namespace init = tg::nn::init;

namespace {

struct Stats {
  double mean = 0, var = 0, min = 0, max = 0, maxabs = 0;
  int64_t n = 0;
};

Stats stats(const Tensor& t) {
  Stats s;
  const auto v = t.to_vector();
  s.n = static_cast<int64_t>(v.size());
  s.min = s.max = v[0];
  double sum = 0, sum2 = 0;
  for (float x : v) {
    sum += x;
    s.min = std::min(s.min, double(x));
    s.max = std::max(s.max, double(x));
    s.maxabs = std::max(s.maxabs, std::abs(double(x)));
  }
  s.mean = sum / s.n;
  for (float x : v) sum2 += (x - s.mean) * (x - s.mean);
  s.var = sum2 / s.n;
  return s;
}

// U(-bound, bound): inside the bound, reaching near it, mean 0 and variance bound²/3.
void expect_uniform(const Tensor& t, double lo, double hi, const char* what) {
  SCOPED_TRACE(what);
  const Stats s = stats(t);
  const double width = hi - lo, sd = width / std::sqrt(12.0);
  EXPECT_GE(s.min, lo);
  EXPECT_LT(s.max, hi);
  EXPECT_LT(s.min, lo + 0.01 * width);  // reaches near both ends
  EXPECT_GT(s.max, hi - 0.01 * width);
  EXPECT_NEAR(s.mean, (lo + hi) / 2, 5 * sd / std::sqrt(double(s.n)));
  EXPECT_NEAR(s.var / (sd * sd), 1.0, 0.02);
}

void expect_normal(const Tensor& t, double mean, double std, const char* what) {
  SCOPED_TRACE(what);
  const Stats s = stats(t);
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(double(s.n)));
  EXPECT_NEAR(s.var / (std * std), 1.0, 0.02);
  // Normal tails: with 200,000 draws, some beyond 3σ and none beyond 6σ.
  EXPECT_GT(s.maxabs - std::abs(mean), 3 * std);
  EXPECT_LT(s.maxabs - std::abs(mean), 6 * std);
}

class NnInit : public ::testing::Test {
 protected:
  void SetUp() override { manual_seed(123); }
  Tensor big() const { return zeros({500, 400}); }  // fan_in 400, fan_out 500
};

// The same lists as INIT_SHAPES, GAINS and KAIMING in tests/reference/make_nn.py.
const std::vector<Shape> kShapes = {{300, 200}, {64, 32, 3, 3}, {40, 100, 5}, {128, 1000}};
const std::vector<std::pair<std::string, float>> kGains = {
    {"linear", 0.0f},     {"conv2d", 0.0f},      {"sigmoid", 0.0f},
    {"tanh", 0.0f},       {"relu", 0.0f},        {"leaky_relu", 0.01f},
    {"leaky_relu", 0.2f}, {"leaky_relu", std::sqrt(5.0f)}, {"selu", 0.0f}};
struct KaimingCase {
  float a;
  init::FanMode mode;
  const char* nonlinearity;
};
const std::vector<KaimingCase> kKaiming = {{0.0f, init::FanMode::FanIn, "relu"},
                                           {0.0f, init::FanMode::FanOut, "relu"},
                                           {0.1f, init::FanMode::FanIn, "leaky_relu"},
                                           {std::sqrt(5.0f), init::FanMode::FanIn, "leaky_relu"},
                                           {0.0f, init::FanMode::FanOut, "tanh"}};

}  // namespace

// ---- fans and gains ------------------------------------------------------------------------

TEST_F(NnInit, FansFollowPyTorchsFormula) {
  // 2-D (out, in): fan_in = in, fan_out = out.
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(zeros({500, 400})), (std::pair<int64_t, int64_t>(400, 500)));
  // 4-D conv weight (out, in, kh, kw): times the receptive field kh·kw.
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(zeros({16, 8, 3, 5})), (std::pair<int64_t, int64_t>(120, 240)));
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(zeros({7})), ValueError);
  EXPECT_THROW(init::xavier_uniform_(zeros({7})), ValueError);
  EXPECT_THROW(init::kaiming_normal_(zeros({})), ValueError);

  const Indices fans = ref::load_indices("nn/init.fans.npy");
  ASSERT_EQ(fans.shape, (Shape{int64_t(kShapes.size()), 2}));
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const auto [fi, fo] = init::calculate_fan_in_and_fan_out(zeros(kShapes[i]));
    EXPECT_EQ(fi, fans.values[2 * i]) << to_string(kShapes[i]);
    EXPECT_EQ(fo, fans.values[2 * i + 1]) << to_string(kShapes[i]);
  }
}

TEST_F(NnInit, GainsMatchPyTorch) {
  EXPECT_FLOAT_EQ(init::calculate_gain("linear"), 1.0f);
  EXPECT_FLOAT_EQ(init::calculate_gain("tanh"), 5.0f / 3.0f);
  EXPECT_FLOAT_EQ(init::calculate_gain("relu"), std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0f / (1.0f + 0.01f * 0.01f)));
  EXPECT_FLOAT_EQ(init::calculate_gain("leaky_relu", 0.2f), std::sqrt(2.0f / 1.04f));
  EXPECT_FLOAT_EQ(init::calculate_gain("selu"), 0.75f);
  EXPECT_THROW(init::calculate_gain("swish"), ValueError);

  const Tensor ref_gains = ref::load("nn/init.gains.npy");
  ASSERT_EQ(ref_gains.numel(), int64_t(kGains.size()));
  for (size_t i = 0; i < kGains.size(); ++i)
    EXPECT_NEAR(init::calculate_gain(kGains[i].first, kGains[i].second), ref_gains.data()[i], 1e-6)
        << kGains[i].first << " " << kGains[i].second;
}

// ---- statistical tests, 500 x 400 ----------------------------------------------------------

TEST_F(NnInit, UniformNormalConstant) {
  Tensor t = big();
  expect_uniform(init::uniform_(t), 0.0, 1.0, "uniform_()");
  expect_uniform(init::uniform_(t, -3.0f, 0.5f), -3.0, 0.5, "uniform_(-3, 0.5)");
  expect_normal(init::normal_(t), 0.0, 1.0, "normal_()");
  expect_normal(init::normal_(t, 2.0f, 0.1f), 2.0, 0.1, "normal_(2, 0.1)");
  EXPECT_THROW(init::uniform_(t, 1.0f, 0.0f), ValueError);
  EXPECT_THROW(init::normal_(t, 0.0f, -1.0f), ValueError);

  const auto all = [](const Tensor& x, float v) {
    const auto xs = x.to_vector();
    return std::all_of(xs.begin(), xs.end(), [v](float e) { return e == v; });
  };
  EXPECT_TRUE(all(init::constant_(t, -0.25f), -0.25f));
  EXPECT_TRUE(all(init::zeros_(t), 0.0f));
  EXPECT_TRUE(all(init::ones_(t), 1.0f));
}

TEST_F(NnInit, Xavier) {
  Tensor t = big();
  const double b1 = std::sqrt(6.0 / 900.0);  // gain·√(6 / (fan_in + fan_out))
  expect_uniform(init::xavier_uniform_(t), -b1, b1, "xavier_uniform_");
  expect_uniform(init::xavier_uniform_(t, 2.0f), -2 * b1, 2 * b1, "xavier_uniform_(gain 2)");
  const double s1 = std::sqrt(2.0 / 900.0);  // gain·√(2 / (fan_in + fan_out))
  expect_normal(init::xavier_normal_(t), 0.0, s1, "xavier_normal_");
  expect_normal(init::xavier_normal_(t, 5.0f / 3.0f), 0.0, s1 * 5 / 3, "xavier_normal_(gain 5/3)");
}

TEST_F(NnInit, KaimingBothFanModes) {
  Tensor t = big();  // fan_in 400, fan_out 500
  const double relu = std::sqrt(2.0), leaky = std::sqrt(2.0 / (1.0 + 0.2 * 0.2));
  auto ubound = [](double gain, double fan) { return gain * std::sqrt(3.0 / fan); };
  double b = ubound(relu, 400);
  expect_uniform(init::kaiming_uniform_(t, 0.0f, init::FanMode::FanIn, "relu"), -b, b, "ku relu fan_in");
  b = ubound(relu, 500);
  expect_uniform(init::kaiming_uniform_(t, 0.0f, init::FanMode::FanOut, "relu"), -b, b, "ku relu fan_out");
  b = ubound(leaky, 400);
  expect_uniform(init::kaiming_uniform_(t, 0.2f), -b, b, "ku leaky_relu(0.2) fan_in (defaults)");
  b = ubound(leaky, 500);
  expect_uniform(init::kaiming_uniform_(t, 0.2f, init::FanMode::FanOut), -b, b, "ku leaky_relu(0.2) fan_out");

  expect_normal(init::kaiming_normal_(t, 0.0f, init::FanMode::FanIn, "relu"), 0.0, relu / 20.0,
                "kn relu fan_in");
  expect_normal(init::kaiming_normal_(t, 0.0f, init::FanMode::FanOut, "relu"), 0.0,
                relu / std::sqrt(500.0), "kn relu fan_out");
  expect_normal(init::kaiming_normal_(t, 0.2f), 0.0, leaky / 20.0, "kn leaky_relu(0.2) fan_in");
  expect_normal(init::kaiming_normal_(t, 0.2f, init::FanMode::FanOut, "leaky_relu"), 0.0,
                leaky / std::sqrt(500.0), "kn leaky_relu(0.2) fan_out");
}

TEST_F(NnInit, FillsInPlaceWithoutRecording) {
  const Tensor w = zeros({30, 20}, /*requires_grad=*/true);
  const Tensor same = init::xavier_uniform_(w);
  EXPECT_TRUE(same.is_same(w));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.op_name(), "");
  EXPECT_GT(stats(w).maxabs, 0.0);
  // Reproducible under one seed.
  manual_seed(5);
  const auto a = init::kaiming_normal_(zeros({10, 10})).to_vector();
  manual_seed(5);
  EXPECT_EQ(init::kaiming_normal_(zeros({10, 10})).to_vector(), a);
}

// ---- against PyTorch's numbers for several shapes ------------------------------------------

TEST_F(NnInit, BoundsAndStdsMatchPyTorchForSeveralShapes) {
  const Tensor xavier = ref::load("nn/init.xavier.npy");   // (shapes, [b, std, b·5/3, std·5/3])
  const Tensor kaiming = ref::load("nn/init.kaiming.npy"); // (shapes, [b, std] per case)
  const Tensor maxabs = ref::load("nn/init.maxabs.npy");   // PyTorch's own draws: max |w|
  ASSERT_EQ(xavier.shape(), (Shape{int64_t(kShapes.size()), 4}));
  ASSERT_EQ(kaiming.shape(), (Shape{int64_t(kShapes.size()), int64_t(2 * kKaiming.size())}));
  for (size_t i = 0; i < kShapes.size(); ++i) {
    SCOPED_TRACE(to_string(kShapes[i]));
    const Tensor t = zeros(kShapes[i]);
    const double n = double(t.numel());
    // Uniform: within PyTorch's bound and reaching it (to 1 %); variance bound²/3.
    auto check_uniform = [&](const Tensor& w, double bound) {
      const Stats s = stats(w);
      EXPECT_LE(s.maxabs, bound * (1 + 1e-6));
      EXPECT_GT(s.maxabs, 0.99 * bound);
      EXPECT_NEAR(s.var / (bound * bound / 3), 1.0, 0.03);
    };
    auto check_std = [&](const Tensor& w, double std) {
      const Stats s = stats(w);
      EXPECT_NEAR(s.mean, 0.0, 5 * std / std::sqrt(n));
      EXPECT_NEAR(std::sqrt(s.var) / std, 1.0, 0.03);
    };
    check_uniform(init::xavier_uniform_(t), xavier.data()(i, 0));
    check_std(init::xavier_normal_(t), xavier.data()(i, 1));
    check_uniform(init::xavier_uniform_(t, 5.0f / 3.0f), xavier.data()(i, 2));
    check_std(init::xavier_normal_(t, 5.0f / 3.0f), xavier.data()(i, 3));
    for (size_t k = 0; k < kKaiming.size(); ++k) {
      const auto& c = kKaiming[k];
      SCOPED_TRACE(std::string(c.nonlinearity) + " a=" + std::to_string(c.a));
      check_uniform(init::kaiming_uniform_(t, c.a, c.mode, c.nonlinearity), kaiming.data()(i, 2 * k));
      check_std(init::kaiming_normal_(t, c.a, c.mode, c.nonlinearity), kaiming.data()(i, 2 * k + 1));
    }
    // PyTorch's own xavier_uniform_ and kaiming_uniform_(relu) draws reach the same bounds.
    EXPECT_LE(maxabs.data()(i, 0), xavier.data()(i, 0) * (1 + 1e-6));
    EXPECT_GT(maxabs.data()(i, 0), 0.99 * xavier.data()(i, 0));
    EXPECT_LE(maxabs.data()(i, 1), kaiming.data()(i, 0) * (1 + 1e-6));
    EXPECT_GT(maxabs.data()(i, 1), 0.99 * kaiming.data()(i, 0));
  }
}

TEST_F(NnInit, LinearDefaultInitIsXavierUniformWithZeroBias) {
  nn::Linear lin(400, 500);
  const double b = std::sqrt(6.0 / 900.0);
  expect_uniform(lin.weight, -b, b, "Linear weight");
  EXPECT_EQ(stats(lin.bias).maxabs, 0.0);
}
