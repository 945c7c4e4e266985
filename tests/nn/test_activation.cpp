// The activation modules of tapegrad/nn/activation.h (SiLU, LeakyReLU, ELU, Softplus): PyTorch
// 1.13 reference values and gradients (tests/reference/make_pointwise_loss.py, the module_* cases),
// gradient checks, options and their errors, and use inside a Sequential.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "reference.h"
#include "tapegrad/tapegrad.h"
#include "test_util.h"

using namespace tg;

namespace {

std::string file(const std::string& name, const std::string& key) {
  return "pointwise_loss/" + name + "." + key + ".npy";
}

/// forward(x) and x's gradient against case `name`.
void check_module(const std::string& name, nn::UnaryModule& m) {
  SCOPED_TRACE("case " + name);
  const Tensor x = ref::load(file(name, "x"), true);
  const Tensor y = m(x);
  EXPECT_TRUE(ref::close(y, ref::load(file(name, "y")))) << "forward";
  y.backward(ref::load(file(name, "g")));
  EXPECT_TRUE(ref::close(x.grad(), ref::load(file(name, "dx")))) << "gradient";
}

}  // namespace

TEST(NnActivation, MatchPyTorch) {
  nn::SiLU silu;
  nn::LeakyReLU leaky(nn::LeakyReLUOptions().negative_slope(0.2f));
  nn::ELU elu(nn::ELUOptions().alpha(0.5f));
  nn::Softplus softplus(nn::SoftplusOptions().beta(2.0f).threshold(5.0f));
  check_module("module_silu", silu);
  check_module("module_leaky_relu", leaky);
  check_module("module_elu", elu);
  check_module("module_softplus", softplus);
}

TEST(NnActivation, Gradcheck) {
  manual_seed(7);
  std::vector<std::shared_ptr<nn::UnaryModule>> ms = {
      std::make_shared<nn::SiLU>(), std::make_shared<nn::LeakyReLU>(),
      std::make_shared<nn::ELU>(nn::ELUOptions().alpha(1.3f)),
      std::make_shared<nn::Softplus>(nn::SoftplusOptions().beta(0.5f).threshold(0.5f))};
  for (auto& m : ms) {
    const auto r = gradcheck([&](const std::vector<Tensor>& v) { return m->forward(v[0]); },
                             {test_util::random_input({3, 4}, -3.0f, 3.0f)});
    EXPECT_TRUE(r.ok) << m->type_name() << ": " << r.message;
  }
}

TEST(NnActivation, OptionsAndRepr) {
  EXPECT_FLOAT_EQ(nn::LeakyReLU().options.negative_slope(), 0.01f);
  EXPECT_FLOAT_EQ(nn::ELU().options.alpha(), 1.0f);
  EXPECT_FLOAT_EQ(nn::Softplus().options.beta(), 1.0f);
  EXPECT_FLOAT_EQ(nn::Softplus().options.threshold(), 20.0f);
  EXPECT_EQ(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2f)).extra_repr(), "negative_slope=0.2");
  EXPECT_EQ(nn::ELU().extra_repr(), "alpha=1");
  EXPECT_EQ(nn::Softplus(nn::SoftplusOptions().beta(2.0f)).extra_repr(), "beta=2, threshold=20");
  EXPECT_EQ(nn::SiLU().repr(), "SiLU()\nTotal parameters: 0");
  EXPECT_EQ(nn::SiLU().parameters().size(), 0u);
}

TEST(NnActivation, BadOptionsNameTheModule) {
  try {
    nn::Softplus(nn::SoftplusOptions().beta(0.0f));
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Softplus"), std::string::npos) << msg;
    EXPECT_NE(msg.find("beta"), std::string::npos) << msg;
  }
  EXPECT_THROW(nn::Softplus(nn::SoftplusOptions().beta(-2.0f)), ValueError);
  EXPECT_THROW(nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(NAN)), ValueError);
  EXPECT_THROW(nn::ELU(nn::ELUOptions().alpha(NAN)), ValueError);
}

// In a Sequential, they are modules like any other: the same values as the ops.
TEST(NnActivation, InSequential) {
  nn::Sequential seq(std::make_shared<nn::LeakyReLU>(nn::LeakyReLUOptions().negative_slope(0.1f)),
                     std::make_shared<nn::ELU>(), std::make_shared<nn::Softplus>(),
                     std::make_shared<nn::SiLU>());
  const Tensor x = tensor({-2.0f, -0.5f, 0.0f, 0.5f, 2.0f});
  EXPECT_TRUE(ref::close(seq.forward(x), silu(softplus(elu(leaky_relu(x, 0.1f)))), 0, 0));
  EXPECT_NE(seq.repr().find("(0): LeakyReLU(negative_slope=0.1)"), std::string::npos) << seq.repr();
}
