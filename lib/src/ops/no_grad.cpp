// In-place kernels for the inference path (ops/no_grad.h).
#include "ops/no_grad.h"

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>

#include "backend/vec.h"
#include "tapegrad/autograd.h"

namespace tg {
namespace detail {

// What tg::gelu computes (ops/elementwise.cpp), written into the input's buffer.
void gelu_no_grad_(const Tensor& t, bool approximate) {
  if (is_grad_enabled())
    throw AutogradError("gelu_no_grad_: an in-place activation for inference, called with grad mode on");
  if (!t.impl()->contiguous()) throw ValueError("gelu_no_grad_: the tensor must be contiguous");
  View& x = mutable_val(t);
  if (approximate)
    xt::noalias(x) = 0.5f * x * (1.0f + xt::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  else  // the vector kernel tg::gelu runs (backend/vec.h), in place: the same values
    vec::kernels().gelu(x.data(), x.data(), nullptr, x.size());
  bump_version(t);
}

}  // namespace detail
}  // namespace tg
