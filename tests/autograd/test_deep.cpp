// Graphs of any depth: tearing down 200,000 custom ops whose closures hold their input (as
// autograd.h's own example writes them) and a reentrant backward 8,193 levels deep (a custom
// op whose backward runs backward() on a graph of its own, LibTorch's
// CustomAutogradTest.DeepReentrant) both run with a bounded stack: no recursion per node.
#include <gtest/gtest.h>

#include <functional>

#include "tapegrad/tapegrad.h"

using namespace tg;

namespace {
/// y = x³, written as autograd.h's example: the closure captures its input.
Tensor cube(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard ng;
    y = x * x * x;
  }
  return custom_op("cube", y, {x}, [x](const Tensor& g) { return std::vector<Tensor>{g * 3.0f * x * x}; });
}

/// Passes its input through; its backward first runs a backward of its own, one level
/// shallower, until the value reaches 0 (then the gradient is the identity's).
Tensor deep_reenter(const Tensor& x) {
  Tensor y;
  {
    NoGradGuard ng;
    y = x * 1.0f;
  }
  return custom_op("deep_reenter", y, {x}, [x](const Tensor& g) {
    const float v = x.item();
    if (v > 0) {
      const bool was = is_grad_enabled();
      set_grad_enabled(true);  // a graph inside a backward, as LibTorch's AutoGradMode
      const Tensor inner = full({}, v - 1.0f, true);
      sum(deep_reenter(inner)).backward();
      set_grad_enabled(was);
    }
    return std::vector<Tensor>{g};
  });
}
}  // namespace

TEST(Deep, TearingDownCustomOpsThatCaptureTheirInputs) {
  Tensor x = full({1}, 1.0f, true);
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = cube(y);
  y = Tensor();  // the whole chain dies here; the test passes if the stack holds
  x = Tensor();
  SUCCEED();
}

TEST(Deep, BackwardThroughTwoHundredThousandCustomOps) {
  const Tensor x = full({1}, 1.0f, true);
  Tensor y = x;
  for (int i = 0; i < 200000; ++i) y = cube(y);
  sum(y).backward();  // 1³ = 1 all the way: dy/dx = 3^n overflows to inf, but finishes
  EXPECT_TRUE(x.grad().defined());
}

TEST(Deep, ReentrantBackwardEightThousandLevelsDeep) {
  const Tensor v = full({}, 8193.0f, true);
  sum(deep_reenter(v)).backward();
  EXPECT_FLOAT_EQ(v.grad().item(), 1.0f);
}

TEST(Deep, AnErrorDeepInsideAReentrantBackwardReachesTheCaller) {
  // At level 300 (past the first change of thread) a backward without a graph throws.
  std::function<Tensor(const Tensor&)> f = [&](const Tensor& x) {
    Tensor y;
    {
      NoGradGuard ng;
      y = x * 1.0f;
    }
    return custom_op("reenter_or_fail", y, {x}, [x, &f](const Tensor& g) {
      const float v = x.item();
      set_grad_enabled(true);
      if (v > 0) sum(f(full({}, v - 1.0f, true))).backward();
      else zeros({}).backward();  // does not require grad: AutogradError
      return std::vector<Tensor>{g};
    });
  };
  EXPECT_THROW(sum(f(full({}, 300.0f, true))).backward(), AutogradError);
  set_grad_enabled(true);
}
