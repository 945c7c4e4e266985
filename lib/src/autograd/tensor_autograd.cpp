// The gradient half of tg::Tensor (tapegrad/tensor.h): requires_grad, .grad(), backward().
// The storage half (shape, data, copies, factories) is core/tensor.cpp.
#include "autograd/node.h"
#include "core/shape.h"
#include "core/storage.h"

namespace tg {
using namespace detail;

Tensor Tensor::grad() const {
  const auto& g = checked(impl_, "grad").grad;
  if (!g) return Tensor();
  return Tensor(impl_over(g));  // shares the buffer: writes through .grad().data() are seen
}

void Tensor::set_grad(const Tensor& g) const {
  checked(impl_, "set_grad");
  if (!g.defined()) {
    impl_->grad.reset();
    return;
  }
  if (g.shape() != shape())
    throw ShapeError("set_grad: gradient shape " + tg::to_string(g.shape()) +
                     " does not match the tensor's shape " + tg::to_string(shape()));
  impl_->grad = g.impl()->storage;
}

void Tensor::zero_grad() const {
  if (!checked(impl_, "zero_grad").grad) return;
  impl_->grad->data.fill(0.0f);
  bump_version(*impl_->grad);
}

const Tensor& Tensor::requires_grad_(bool on) const {
  if (checked(impl_, "requires_grad_").grad_fn)
    throw AutogradError("requires_grad_: only leaf tensors can change requires_grad (this one "
                        "came out of '" + op_name() + "'); use detach() first");
  impl_->requires_grad = on;
  return *this;
}

void Tensor::retain_grad() const {
  if (!checked(impl_, "retain_grad").requires_grad)
    throw AutogradError("retain_grad: the tensor does not require grad");
  impl_->retains_grad = true;
}

std::string Tensor::op_name() const {
  const auto& fn = checked(impl_, "op_name").grad_fn;
  return fn ? fn->name : "";
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

uint32_t Tensor::version() const { return version_of(*checked(impl_, "version").storage); }

bool Tensor::requires_grad() const { return checked(impl_, "requires_grad").requires_grad; }

bool Tensor::is_leaf() const { return !checked(impl_, "is_leaf").grad_fn; }

}  // namespace tg
