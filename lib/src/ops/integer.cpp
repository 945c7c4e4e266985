// Ops on int64 and bool tensors (tapegrad/ops/integer.h): comparisons, logical ops,
// argmax/argmin, and the int64-tensor forms of the index ops. Nothing here is recorded: a
// bool or int64 output has no gradient.
#include <algorithm>
#include <cmath>
#include <functional>

#include <xtensor/xbuilder.hpp>

#include "ops/common.h"
#include "tapegrad/random.h"

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

// ---- masks and indices ------------------------------------------------------------------------

namespace {
Tensor reduce_mask(const Tensor& a, bool every, const char* op) {
  require_defined(a, op, "the input");
  const std::vector<uint8_t> v = values_as<uint8_t>(*a.impl());
  bool r = every;
  for (uint8_t b : v)
    if (bool(b) != every) {
      r = !every;
      break;
    }
  return make_bool({uint8_t(r)}, {});
}

Tensor reduce_mask(const Tensor& a, int64_t dim, bool keepdim, bool every, const char* op) {
  require_defined(a, op, "the input");
  Shape in = a.shape();
  const size_t ax = in.empty() ? (norm_axis(dim, 1, op), 0) : norm_axis(dim, in.size(), op);
  const AxisSplit s = split_at(in.empty() ? Shape{1} : in, ax);
  const std::vector<uint8_t> v = values_as<uint8_t>(*a.impl());
  std::vector<uint8_t> out(s.outer * s.inner, uint8_t(every));
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t i = 0; i < s.n; ++i)
      for (size_t j = 0; j < s.inner; ++j) {
        uint8_t& r = out[o * s.inner + j];
        r = every ? (r && v[(o * s.n + i) * s.inner + j]) : (r || v[(o * s.n + i) * s.inner + j]);
      }
  if (!in.empty()) {
    if (keepdim) in[ax] = 1;
    else in.erase(in.begin() + static_cast<long>(ax));
  }
  return make_bool(std::move(out), in);
}
}  // namespace

Tensor all(const Tensor& a) { return reduce_mask(a, true, "all"); }
Tensor any(const Tensor& a) { return reduce_mask(a, false, "any"); }
Tensor all(const Tensor& a, int64_t dim, bool keepdim) { return reduce_mask(a, dim, keepdim, true, "all"); }
Tensor any(const Tensor& a, int64_t dim, bool keepdim) { return reduce_mask(a, dim, keepdim, false, "any"); }

Tensor nonzero(const Tensor& a) {
  require_defined(a, "nonzero", "the input");
  const Shape s = a.shape();
  const std::vector<uint8_t> v = values_as<uint8_t>(*a.impl());
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> out;
  std::vector<int64_t> index(s.size(), 0);
  for (size_t flat = 0; flat < v.size(); ++flat) {
    if (v[flat]) out.insert(out.end(), index.begin(), index.end());
    for (size_t d = s.size(); d-- > 0;) {  // the next row-major index
      if (++index[d] < s[d]) break;
      index[d] = 0;
    }
  }
  const int64_t n = rank ? static_cast<int64_t>(out.size()) / rank : static_cast<int64_t>(v[0] != 0);
  return make_int64(std::move(out), {n, rank});
}

// y = a[mask] (broadcast together, row-major)      da = zeros with g put back at the selected places
Tensor masked_select(const Tensor& a_arg, const Tensor& mask) {
  Tensor a_copy;
  const Tensor& a = a_arg.defined() && a_arg.is_floating_point() ? dense(a_arg, a_copy) : a_arg;
  require_defined(a, "masked_select", "the input");
  require_defined(mask, "masked_select", "the mask");
  const Shape s = broadcast_shapes(a.shape(), mask.shape(), "masked_select");
  const std::vector<uint8_t> m = broadcast_values<uint8_t>(mask, s);
  std::vector<size_t> pos;
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i]) pos.push_back(i);
  const Shape out{static_cast<int64_t>(pos.size())};
  if (!a.is_floating_point()) {  // int64 or bool: a plain selection
    const std::vector<int64_t> x = broadcast_values<int64_t>(a, s);
    std::vector<int64_t> y(pos.size());
    for (size_t k = 0; k < pos.size(); ++k) y[k] = x[pos[k]];
    return a.dtype() == Dtype::Bool ? make_bool(std::vector<uint8_t>(y.begin(), y.end()), out)
                                    : make_int64(std::move(y), out);
  }
  const std::vector<float> x = broadcast_values<float>(a, s);
  Array y = Array::from_shape({pos.size()});
  for (size_t k = 0; k < pos.size(); ++k) y.data()[k] = x[pos[k]];
  return record("masked_select", std::move(y), {a}, [s, pos](BackwardContext& ctx) {
    Array g = xt::zeros<float>(to_xshape(s));  // the broadcast shape: the engine sums it down
    for (size_t k = 0; k < pos.size(); ++k) g.data()[pos[k]] = ctx.grad.data()[k];
    ctx.give(0, std::move(g));
  });
}

Tensor one_hot(const Tensor& ids, int64_t num_classes) {
  require_defined(ids, "one_hot", "the ids");
  if (ids.dtype() != Dtype::Int64)
    throw TypeError(std::string("one_hot: the ids must be an int64 tensor, got ") + to_string(ids.dtype()));
  const std::vector<int64_t> v = values_as<int64_t>(*ids.impl());
  int64_t K = num_classes;
  if (K < 0) {
    if (num_classes != -1)
      throw ValueError("one_hot: num_classes must be -1 (inferred) or >= 0, got " + std::to_string(num_classes));
    if (v.empty()) throw ValueError("one_hot: cannot infer num_classes from an empty tensor");
    K = *std::max_element(v.begin(), v.end()) + 1;
  }
  std::vector<int64_t> out(v.size() * static_cast<size_t>(K), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= K)
      throw IndexError("one_hot: id " + std::to_string(v[i]) + " at position " + std::to_string(i) +
                       " is out of range for " + std::to_string(K) + " classes");
    out[i * static_cast<size_t>(K) + static_cast<size_t>(v[i])] = 1;
  }
  Shape s = ids.shape();
  s.push_back(K);
  return make_int64(std::move(out), s);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape) {
  if (high <= low)
    throw ValueError("randint: expected low < high, got low " + std::to_string(low) + " and high " +
                     std::to_string(high));
  check_shape(shape, "randint");
  std::vector<int64_t> v(static_cast<size_t>(numel_of(shape)));
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  Generator& gen = default_generator();
  for (auto& x : v) x = static_cast<int64_t>(static_cast<uint64_t>(low) + gen.below(span));
  return make_int64(std::move(v), shape);
}
Tensor randint(int64_t high, const Shape& shape) { return randint(0, high, shape); }

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
  if (targets.dtype() == Dtype::Float32)  // class probabilities, as torch's
    return cross_entropy_probs(logits, targets, o);
  return cross_entropy(logits, indices_of(targets, "cross_entropy", "the target"), o);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const CrossEntropyOptions& o) {
  return nll_loss(log_probs, indices_of(targets, "nll_loss", "the target"), o);
}

}  // namespace tg
