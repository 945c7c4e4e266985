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
  const TensorImpl& gi = *g.impl();
  const bool whole = gi.contiguous() && gi.offset() == 0 && gi.shape() == gi.storage->data.shape();
  // A view (part of a larger storage, or strided) is copied: .grad() is a whole storage.
  impl_->grad = whole ? gi.storage : make_storage(dense_copy(gi));
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
  if (on && impl_->dtype() != DType::Float32)
    throw TypeError(std::string("requires_grad_: only tensors of floating point dtype can require "
                                "gradients, this one is ") + dtype_name(impl_->dtype()));
  impl_->requires_grad = on;
  return *this;
}

void Tensor::retain_grad() const {
  checked(impl_, "retain_grad");
  refresh_view(impl_);
  if (!impl_->requires_grad)
    throw AutogradError("retain_grad: the tensor does not require grad");
  impl_->retains_grad = true;
}

std::string Tensor::op_name() const {
  checked(impl_, "op_name");
  refresh_view(impl_);
  const auto& fn = impl_->grad_fn;
  return fn ? fn->name : "";
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  run_backward(*this, grad, retain_graph);
}

uint32_t Tensor::version() const { return version_of(*checked(impl_, "version").storage); }

// Each query first brings a view's history up to date (refresh_view): a write to its base may
// have given it one.
bool Tensor::requires_grad() const {
  checked(impl_, "requires_grad");
  refresh_view(impl_);
  return impl_->requires_grad;
}

bool Tensor::is_leaf() const {
  checked(impl_, "is_leaf");
  refresh_view(impl_);
  return !impl_->grad_fn;
}

}  // namespace tg
