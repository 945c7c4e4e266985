// Ops on int64 and bool tensors (tapegrad/ops/integer.h): comparisons, logical ops,
// argmax/argmin, and the int64-tensor forms of the index ops. Nothing here is recorded: a
// bool or int64 output has no gradient.
#include <cmath>
#include <functional>

#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {

void check_inputs(const Tensor& a, const Tensor& b, const char* op) {
  require_defined(a, op, "the first operand");
  require_defined(b, op, "the second operand");
}

/// a (cmp) b elementwise as a bool tensor: in int64 when neither operand is float, else in
/// float32 (PyTorch's type promotion).
template <class Cmp>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, Cmp cmp) {
  check_inputs(a, b, op);
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  std::vector<uint8_t> out(static_cast<size_t>(numel_of(s)));
  if (a.is_floating_point() || b.is_floating_point()) {
    const auto va = broadcast_values<float>(a, s), vb = broadcast_values<float>(b, s);
    for (size_t i = 0; i < out.size(); ++i) out[i] = cmp(va[i], vb[i]);
  } else {
    const auto va = broadcast_values<int64_t>(a, s), vb = broadcast_values<int64_t>(b, s);
    for (size_t i = 0; i < out.size(); ++i) out[i] = cmp(va[i], vb[i]);
  }
  return make_bool(std::move(out), s);
}

/// a (cmp) s elementwise: a float tensor compares in float32, an int64 or bool one in double
/// (exact for every int64 up to 2^53 and for any integral s).
template <class Cmp>
Tensor compare(const Tensor& a, double s, const char* op, Cmp cmp) {
  require_defined(a, op, "the input");
  std::vector<uint8_t> out(static_cast<size_t>(a.numel()));
  if (a.is_floating_point()) {
    const auto v = values_as<float>(*a.impl());
    const float f = static_cast<float>(s);
    for (size_t i = 0; i < out.size(); ++i) out[i] = cmp(v[i], f);
  } else {
    const auto v = values_as<int64_t>(*a.impl());
    for (size_t i = 0; i < out.size(); ++i) out[i] = cmp(static_cast<double>(v[i]), s);
  }
  return make_bool(std::move(out), a.shape());
}

template <class F>
Tensor logical(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_inputs(a, b, op);
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  const auto va = broadcast_values<uint8_t>(a, s), vb = broadcast_values<uint8_t>(b, s);
  std::vector<uint8_t> out(va.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = f(va[i] != 0, vb[i] != 0);
  return make_bool(std::move(out), s);
}

void require_bool(const Tensor& t, const char* op) {
  require_defined(t, op, "the operand");
  if (t.dtype() != Dtype::Bool)
    throw TypeError(std::string(op) + ": expected a bool tensor, got " + to_string(t.dtype()) +
                    " (use logical_and/logical_or/logical_not for numbers)");
}

}  // namespace

Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", std::greater<>()); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", std::less<>()); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", std::greater_equal<>()); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", std::less_equal<>()); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", std::equal_to<>()); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", std::not_equal_to<>()); }
Tensor gt(const Tensor& a, double s) { return compare(a, s, "gt", std::greater<>()); }
Tensor lt(const Tensor& a, double s) { return compare(a, s, "lt", std::less<>()); }
Tensor ge(const Tensor& a, double s) { return compare(a, s, "ge", std::greater_equal<>()); }
Tensor le(const Tensor& a, double s) { return compare(a, s, "le", std::less_equal<>()); }
Tensor eq(const Tensor& a, double s) { return compare(a, s, "eq", std::equal_to<>()); }
Tensor ne(const Tensor& a, double s) { return compare(a, s, "ne", std::not_equal_to<>()); }

Tensor logical_not(const Tensor& a) {
  require_defined(a, "logical_not", "the input");
  std::vector<uint8_t> v = values_as<uint8_t>(*a.impl());
  for (auto& b : v) b = !b;
  return make_bool(std::move(v), a.shape());
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical(a, b, "logical_and", [](bool x, bool y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical(a, b, "logical_or", [](bool x, bool y) { return x || y; });
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return logical(a, b, "logical_xor", [](bool x, bool y) { return x != y; });
}
Tensor operator~(const Tensor& a) {
  require_bool(a, "operator~");
  return logical_not(a);
}
Tensor operator&(const Tensor& a, const Tensor& b) {
  require_bool(a, "operator&");
  require_bool(b, "operator&");
  return logical_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  require_bool(a, "operator|");
  require_bool(b, "operator|");
  return logical_or(a, b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  require_bool(a, "operator^");
  require_bool(b, "operator^");
  return logical_xor(a, b);
}

// ---- argmax / argmin -------------------------------------------------------------------------

Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) { return std::get<1>(max(a, dim, keepdim)); }
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) { return std::get<1>(min(a, dim, keepdim)); }

namespace {
Tensor arg_extreme(const Tensor& a, bool largest, const char* op) {
  require_defined(a, op, "the input");
  if (a.numel() == 0)
    throw ShapeError(std::string(op) + ": the input is empty (shape " + to_string(a.shape()) + ")");
  Tensor flat = reshape(a.detach(), {-1});
  Tensor i = std::get<1>(largest ? max(flat, 0) : min(flat, 0));
  return i;
}
}  // namespace

Tensor argmax(const Tensor& a) { return arg_extreme(a, true, "argmax"); }
Tensor argmin(const Tensor& a) { return arg_extreme(a, false, "argmin"); }

// ---- the index ops with int64 tensors ----------------------------------------------------------

namespace {
/// The values of an int64 index tensor, or tg::TypeError naming the op.
Indices indices_of(const Tensor& t, const char* op, const char* what) {
  require_defined(t, op, what);
  if (t.dtype() != Dtype::Int64)
    throw TypeError(std::string(op) + ": " + what + " must be an int64 tensor, got " +
                    to_string(t.dtype()));
  return Indices(t);
}
}  // namespace

Tensor index_select(const Tensor& a, int64_t axis, const Tensor& index) {
  return index_select(a, axis, indices_of(index, "index_select", "the index"));
}

Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx) {
  return embedding(weight, indices_of(ids, "embedding", "the ids"), padding_idx);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  require_defined(targets, "cross_entropy", "the target");
  if (targets.dtype() == Dtype::Float32)
    // ---- MERGE POINT (ops16a): float targets are class probabilities. ----
    throw ValueError("cross_entropy: probability targets: see ops16a (not in this branch)");
  return cross_entropy(logits, indices_of(targets, "cross_entropy", "the target"), o);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const CrossEntropyOptions& o) {
  return nll_loss(log_probs, indices_of(targets, "nll_loss", "the target"), o);
}

}  // namespace tg
