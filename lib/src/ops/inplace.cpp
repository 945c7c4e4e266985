// In-place ops: Tensor::copy_, add_, sub_, mul_, div_, fill_, zero_, clamp_, masked_fill_ and
// the operators += -= *= /=. Each checks that it may write (check_inplace: not a leaf that
// requires grad, outside no-grad), writes self's values, bumps their version, then records
// itself with record_inplace: self's history continues from the write, and input 0 of the
// node stands for self as it was before it.
//
// The operand broadcasts to self's shape, which never changes. An operand that shares self's
// values (x.mul_(x)) is read as it was before the write.
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
  if (val(other).shape() == val(self).shape()) return;
  const Shape s = shape_of(val(self)), o = shape_of(val(other));
  if (!broadcasts_to(o, s))
    shape_error(op, "the operand's shape " + to_string(o) + " does not broadcast to the tensor's shape " +
                        to_string(s) + " (an in-place op keeps the tensor's shape)");
}

bool aliases(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

/// The operand for the backward: itself, or a copy of it when it is self's own storage (which
/// the write is about to change).
Saved save_operand(const Tensor& other, const Tensor& self) {
  return aliases(other, self) ? Saved(make_storage(Array(val(other)))) : Saved(other);
}

/// Whether the write will be recorded, so an op saves only what a recorded backward reads.
bool recorded(const Tensor& self, const Tensor& other = Tensor()) {
  return is_grad_enabled() &&
         (self.requires_grad() || (other.defined() && other.requires_grad()));
}

}  // namespace

// self ← src (broadcast)      dself = 0, dsrc = g (summed down to src's shape)
const Tensor& Tensor::copy_(const Tensor& src) const {
  check_inplace(*this, "copy_");
  check_operand(*this, src, "copy_");
  if (!aliases(*this, src)) {
    View& out = mutable_val(*this);
    if (val(src).shape() == out.shape())
      std::copy(val(src).begin(), val(src).end(), out.begin());
    else
      xt::noalias(out) = xt::broadcast(val(src), out.shape());
  }
  bump_version(*this);
  record_inplace("copy_", *this, {*this, src}, [](BackwardContext& ctx) {
    if (ctx.needs(1)) ctx.give(1, ctx.take_grad());
  });
  return *this;
}

// self ← self + other         dself = g, dother = g
const Tensor& Tensor::add_(const Tensor& other) const {
  check_inplace(*this, "add_");
  check_operand(*this, other, "add_");
  xt::noalias(mutable_val(*this)) += val(other);
  bump_version(*this);
  record_inplace("add_", *this, {*this, other}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? Array(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, ctx.take_grad());
  });
  return *this;
}

// self ← self - other         dself = g, dother = -g
const Tensor& Tensor::sub_(const Tensor& other) const {
  check_inplace(*this, "sub_");
  check_operand(*this, other, "sub_");
  xt::noalias(mutable_val(*this)) -= val(other);
  bump_version(*this);
  record_inplace("sub_", *this, {*this, other}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? Array(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, Array(-ctx.grad));
  });
  return *this;
}

// self ← self * other         dself = g * other, dother = g * self_old
const Tensor& Tensor::mul_(const Tensor& other) const {
  check_inplace(*this, "mul_");
  check_operand(*this, other, "mul_");
  const bool rec = recorded(*this, other);
  Saved so = rec ? save_operand(other, *this) : Saved();
  // self's old values, only if other's gradient will need them
  Saved old = rec && other.requires_grad() ? Saved(make_storage(Array(val(*this)))) : Saved();
  xt::noalias(mutable_val(*this)) *= val(other);
  bump_version(*this);
  record_inplace("mul_", *this, {*this, other}, [so, old](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad * ctx.read(so)));
    if (ctx.needs(1)) ctx.give(1, Array(ctx.grad * ctx.read(old)));
  });
  return *this;
}

// self ← self / other         dself = g / other, dother = -g * self_new / other
const Tensor& Tensor::div_(const Tensor& other) const {
  check_inplace(*this, "div_");
  check_operand(*this, other, "div_");
  const bool rec = recorded(*this, other);
  Saved so = rec ? save_operand(other, *this) : Saved();
  xt::noalias(mutable_val(*this)) /= val(other);
  bump_version(*this);
  Saved out = rec && other.requires_grad() ? Saved(*this) : Saved();  // at the new version
  record_inplace("div_", *this, {*this, other}, [so, out](BackwardContext& ctx) {
    const View& b = ctx.read(so);
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad / b));
    if (ctx.needs(1)) ctx.give(1, Array(-ctx.grad * ctx.read(out) / b));
  });
  return *this;
}

// self ← self + s             dself = g
const Tensor& Tensor::add_(float s) const {
  check_inplace(*this, "add_");
  mutable_val(*this) += s;
  bump_version(*this);
  record_inplace("add_scalar_", *this, {*this},
                 [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
  return *this;
}

// self ← self - s             dself = g
const Tensor& Tensor::sub_(float s) const {
  check_inplace(*this, "sub_");
  mutable_val(*this) -= s;
  bump_version(*this);
  record_inplace("sub_scalar_", *this, {*this},
                 [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
  return *this;
}

// self ← self * s             dself = g * s
const Tensor& Tensor::mul_(float s) const {
  check_inplace(*this, "mul_");
  mutable_val(*this) *= s;
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
  check_inplace(*this, "div_");
  mutable_val(*this) /= s;
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
  check_inplace(*this, "fill_");
  mutable_val(*this).fill(value);
  bump_version(*this);
  record_inplace("fill_", *this, {*this}, [](BackwardContext&) {});
  return *this;
}

const Tensor& Tensor::zero_() const {
  check_inplace(*this, "zero_");
  mutable_val(*this).fill(0.0f);
  bump_version(*this);
  record_inplace("zero_", *this, {*this}, [](BackwardContext&) {});
  return *this;
}

// self ← min(max(self, lo), hi)      dself = g where lo <= self_old <= hi, else 0
const Tensor& Tensor::clamp_(float min, float max) const {
  check_inplace(*this, "clamp_");
  if (std::isnan(min) || std::isnan(max) || min > max)
    throw ValueError("clamp_: expected min <= max, got min " + std::to_string(min) + ", max " +
                     std::to_string(max));
  View& x = mutable_val(*this);
  std::shared_ptr<Array> pass;  // 1 where the gradient passes
  if (recorded(*this)) pass = std::make_shared<Array>(Array::from_shape(x.shape()));
  float* p = x.data();
  for (size_t i = 0; i < x.size(); ++i) {
    if (pass) pass->data()[i] = p[i] >= min && p[i] <= max ? 1.0f : 0.0f;
    p[i] = p[i] < min ? min : p[i] > max ? max : p[i];  // NaN stays NaN
  }
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
  check_inplace(*this, "masked_fill_");
  check_operand(*this, mask, "masked_fill_");
  View& x = mutable_val(*this);
  auto keep = std::make_shared<Array>(xt::broadcast(xt::equal(val(mask), 0.0f), x.shape()));
  xt::noalias(x) = xt::where(*keep > 0.0f, x, value);
  bump_version(*this);
  record_inplace("masked_fill_", *this, {*this}, [keep](BackwardContext& ctx) {
    Array g = ctx.take_grad();
    xt::noalias(g) *= *keep;
    ctx.give(0, std::move(g));
  });
  return *this;
}

}  // namespace tg
