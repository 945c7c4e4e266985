// In-place kernels for the inference path (ops/no_grad.h).
#include "ops/no_grad.h"

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "tapegrad/autograd.h"

namespace tg {
namespace detail {

// The same expressions as tg::gelu (ops/elementwise.cpp), evaluated into the input's buffer.
void gelu_no_grad_(const Tensor& t, bool approximate) {
  if (is_grad_enabled())
    throw AutogradError("gelu_no_grad_: an in-place activation for inference, called with grad mode on");
  if (!t.impl()->contiguous()) throw ValueError("gelu_no_grad_: the tensor must be contiguous");
  View& x = mutable_val(t);
  if (approximate)
    xt::noalias(x) = 0.5f * x * (1.0f + xt::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  else
    xt::noalias(x) = x * (0.5f * (1.0f + xt::erf(x * 0.7071067811865476f)));
  bump_version(t);
}

}  // namespace detail
}  // namespace tg
