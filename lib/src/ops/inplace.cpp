// In-place ops: Tensor::copy_, add_, sub_, mul_, div_, fill_, zero_, clamp_, masked_fill_ and
// the operators += -= *= /=. Each checks that it may write (check_inplace: not a leaf that
// requires grad, outside no-grad), writes self's values, bumps their version, then records
// itself with record_inplace: self's history continues from the write, and input 0 of the
// node stands for self as it was before it.
//
// The operand broadcasts to self's shape, which never changes. An operand that shares self's
// storage (x.mul_(x), or a view of self) is read as it was before the write. self may be a
// view: the write goes through its strides to the base, whose history records it
// (autograd/views.cpp).
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>

#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {

void check_operand(const Tensor& self, const Tensor& other, const char* op) {
  require_defined(other, op, "the operand");
  if (other.impl()->shape() == self.impl()->shape()) return;
  const Shape s = self.shape(), o = other.shape();
  if (!broadcasts_to(o, s))
    shape_error(op, "the operand's shape " + to_string(o) + " does not broadcast to the tensor's shape " +
                        to_string(s) + " (an in-place op keeps the tensor's shape)");
}

/// check_inplace, and a tensor whose elements are distinct: writing an expand() would write
/// one storage element several times (PyTorch refuses it too).
void check_writable(const Tensor& self, const char* op) {
  check_inplace(self, op);
  if (overlaps(*self.impl()))
    throw ValueError(std::string(op) + ": unsupported operation: more than one element of the "
                     "written-to tensor (shape " + to_string(self.shape()) + ", strides " +
                     to_string(self.strides()) +
                     ") refers to a single memory location (an expand()); clone() it first");
}

bool aliases(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

/// An operand as the write reads it: its own values when they are contiguous and not part of
/// self's storage, else a copy (x.mul_(x), a view of self, a strided view), which is also
/// what a backward then reads.
class Operand {
 public:
  Operand(const Tensor& other, const Tensor& self) {
    const TensorImpl& o = *other.impl();
    if (o.view && !aliases(other, self)) {
      tensor_ = other;
    } else {
      copy_ = make_storage(dense_copy(o));
    }
  }
  const View& values() const { return copy_ ? copy_->data : val(tensor_); }
  Saved saved() const { return copy_ ? Saved(copy_) : Saved(tensor_); }

 private:
  Tensor tensor_;
  std::shared_ptr<Storage> copy_;
};

/// Runs f on self's values as one dense block: its own when self is contiguous, else a copy
/// that is then written back through self's strides.
template <class F>
void write_values(const Tensor& self, F&& f) {
  TensorImpl& s = *self.impl();
  if (s.view) {
    f(*s.view);
    return;
  }
  Array values = dense_copy(s);
  View v = view_of(values);
  f(v);
  write_dense(s, values.data());
}

/// Whether the write will be recorded, so an op saves only what a recorded backward reads.
bool recorded(const Tensor& self, const Tensor& other = Tensor()) {
  return will_record(self, other);
}

}  // namespace

// self ← src (broadcast)      dself = 0, dsrc = g (summed down to src's shape)
const Tensor& Tensor::copy_(const Tensor& src) const {
  check_writable(*this, "copy_");
  check_operand(*this, src, "copy_");
  const TensorImpl &me = *impl_, &from = *src.impl();
  const bool same = me.storage == from.storage && me.offset() == from.offset() &&
                    me.shape() == from.shape() && me.strides() == from.strides();  // x.copy_(x)
  if (!same) {
    const Operand s(src, *this);
    write_values(*this, [&](View& out) {
      if (s.values().shape() == out.shape())
        std::copy(s.values().begin(), s.values().end(), out.begin());
      else
        xt::noalias(out) = xt::broadcast(s.values(), out.shape());
    });
  }
  bump_version(*this);
  record_inplace("copy_", *this, {*this, src}, [](BackwardContext& ctx) {
    if (ctx.needs(1)) ctx.give(1, ctx.take_grad());
  });
  return *this;
}

// self ← self + other         dself = g, dother = g
const Tensor& Tensor::add_(const Tensor& other) const {
  check_writable(*this, "add_");
  check_operand(*this, other, "add_");
  const Operand o(other, *this);
  write_values(*this, [&](View& x) { xt::noalias(x) += o.values(); });
  bump_version(*this);
  record_inplace("add_", *this, {*this, other}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? Array(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, ctx.take_grad());
  });
  return *this;
}

// self ← self - other         dself = g, dother = -g
const Tensor& Tensor::sub_(const Tensor& other) const {
  check_writable(*this, "sub_");
  check_operand(*this, other, "sub_");
  const Operand o(other, *this);
  write_values(*this, [&](View& x) { xt::noalias(x) -= o.values(); });
  bump_version(*this);
  record_inplace("sub_", *this, {*this, other}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? Array(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, Array(-ctx.grad));
  });
  return *this;
}

// self ← self * other         dself = g * other, dother = g * self_old
const Tensor& Tensor::mul_(const Tensor& other) const {
  check_writable(*this, "mul_");
  check_operand(*this, other, "mul_");
  const bool rec = recorded(*this, other);
  const Operand o(other, *this);
  Saved so = rec ? o.saved() : Saved();
  // self's old values, only if other's gradient will need them
  Saved old = rec && other.requires_grad() ? Saved(make_storage(dense_copy(*impl_))) : Saved();
  write_values(*this, [&](View& x) { xt::noalias(x) *= o.values(); });
  bump_version(*this);
  record_inplace("mul_", *this, {*this, other}, [so, old](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad * ctx.read(so)));
    if (ctx.needs(1)) ctx.give(1, Array(ctx.grad * ctx.read(old)));
  });
  return *this;
}

// self ← self / other         dself = g / other, dother = -g * self_new / other
const Tensor& Tensor::div_(const Tensor& other) const {
  check_writable(*this, "div_");
  check_operand(*this, other, "div_");
  const bool rec = recorded(*this, other);
  const Operand o(other, *this);
  Saved so = rec ? o.saved() : Saved();
  write_values(*this, [&](View& x) { xt::noalias(x) /= o.values(); });
  bump_version(*this);
  // The result, copied: a later write elsewhere in the storage (another slice) must not
  // invalidate it.
  Saved out = rec && other.requires_grad() ? Saved(make_storage(dense_copy(*impl_))) : Saved();
  record_inplace("div_", *this, {*this, other}, [so, out](BackwardContext& ctx) {
    const View& b = ctx.read(so);
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad / b));
    if (ctx.needs(1)) ctx.give(1, Array(-ctx.grad * ctx.read(out) / b));
  });
  return *this;
}

// self ← self + s             dself = g
const Tensor& Tensor::add_(float s) const {
  check_writable(*this, "add_");
  write_values(*this, [s](View& x) { x += s; });
  bump_version(*this);
  record_inplace("add_scalar_", *this, {*this},
                 [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
  return *this;
}

// self ← self - s             dself = g
const Tensor& Tensor::sub_(float s) const {
  check_writable(*this, "sub_");
  write_values(*this, [s](View& x) { x -= s; });
  bump_version(*this);
  record_inplace("sub_scalar_", *this, {*this},
                 [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
  return *this;
}

// self ← self * s             dself = g * s
const Tensor& Tensor::mul_(float s) const {
  check_writable(*this, "mul_");
  write_values(*this, [s](View& x) { x *= s; });
  bump_version(*this);
  record_inplace("mul_scalar_", *this, {*this}, [s](BackwardContext& ctx) {
    Array g = ctx.take_grad();
    g *= s;
    ctx.give(0, std::move(g));
  });
  return *this;
}

// self ← self / s             dself = g / s
const Tensor& Tensor::div_(float s) const {
  check_writable(*this, "div_");
  write_values(*this, [s](View& x) { x /= s; });
  bump_version(*this);
  record_inplace("div_scalar_", *this, {*this}, [s](BackwardContext& ctx) {
    Array g = ctx.take_grad();
    g /= s;
    ctx.give(0, std::move(g));
  });
  return *this;
}

// self ← value                dself = 0
const Tensor& Tensor::fill_(float value) const {
  check_writable(*this, "fill_");
  write_values(*this, [value](View& x) { x.fill(value); });
  bump_version(*this);
  record_inplace("fill_", *this, {*this}, [](BackwardContext&) {});
  return *this;
}

const Tensor& Tensor::zero_() const {
  check_writable(*this, "zero_");
  write_values(*this, [](View& x) { x.fill(0.0f); });
  bump_version(*this);
  record_inplace("zero_", *this, {*this}, [](BackwardContext&) {});
  return *this;
}

// self ← min(max(self, lo), hi)      dself = g where lo <= self_old <= hi, else 0
const Tensor& Tensor::clamp_(float min, float max) const {
  check_writable(*this, "clamp_");
  if (std::isnan(min) || std::isnan(max) || min > max)
    throw ValueError("clamp_: expected min <= max, got min " + std::to_string(min) + ", max " +
                     std::to_string(max));
  std::shared_ptr<Array> pass;  // 1 where the gradient passes
  if (recorded(*this)) pass = std::make_shared<Array>(Array::from_shape(impl_->shape()));
  write_values(*this, [&](View& x) {
    float* p = x.data();
    for (size_t i = 0; i < x.size(); ++i) {
      if (pass) pass->data()[i] = p[i] >= min && p[i] <= max ? 1.0f : 0.0f;
      p[i] = p[i] < min ? min : p[i] > max ? max : p[i];  // NaN stays NaN
    }
  });
  bump_version(*this);
  record_inplace("clamp_", *this, {*this}, [pass](BackwardContext& ctx) {
    Array g = ctx.take_grad();
    xt::noalias(g) *= *pass;
    ctx.give(0, std::move(g));
  });
  return *this;
}

// self ← value where mask     dself = g where not mask
const Tensor& Tensor::masked_fill_(const Tensor& mask, float value) const {
  check_writable(*this, "masked_fill_");
  check_operand(*this, mask, "masked_fill_");
  const std::vector<uint8_t> m = broadcast_values<uint8_t>(mask, shape());  // bool, or float != 0
  auto keep = std::make_shared<Array>(Array::from_shape(impl_->shape()));
  for (size_t i = 0; i < m.size(); ++i) keep->data()[i] = m[i] ? 0.0f : 1.0f;
  write_values(*this, [&](View& x) { xt::noalias(x) = xt::where(*keep > 0.0f, x, value); });
  bump_version(*this);
  record_inplace("masked_fill_", *this, {*this}, [keep](BackwardContext& ctx) {
    Array g = ctx.take_grad();
    xt::noalias(g) *= *keep;
    ctx.give(0, std::move(g));
  });
  return *this;
}

}  // namespace tg
