// Shape ops that copy, and indexing: cat, gathers and masks. The views (reshape, narrow,
// transpose and friends) are ops/views.cpp.
#include <numeric>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xoperation.hpp>

#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {
/// cat for int64 and bool tensors (no gradient): each input's rows of `widths[t] * inner`
/// elements, interleaved along the split.
template <class T>
std::vector<T> interleave(const std::vector<Tensor>& tensors, const AxisSplit& split,
                          const std::vector<int64_t>& widths) {
  const size_t row = split.n * split.inner;
  std::vector<T> y(split.outer * row);
  size_t offset = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t w = static_cast<size_t>(widths[t]) * split.inner;
    const std::vector<T> src = values_as<T>(*tensors[t].impl());
    for (size_t o = 0; o < split.outer; ++o)
      std::copy(src.begin() + o * w, src.begin() + (o + 1) * w, y.begin() + o * row + offset);
    offset += w;
  }
  return y;
}

Tensor cat_values(const std::vector<Tensor>& tensors, const Shape& out, const AxisSplit& split,
                  const std::vector<int64_t>& widths) {
  if (tensors[0].dtype() == Dtype::Bool)
    return make_bool(interleave<uint8_t>(tensors, split, widths), out);
  return make_int64(interleave<int64_t>(tensors, split, widths), out);
}
}  // namespace

// y = [x0 | x1 | ...] along axis        dxi = the slice of g that xi filled
Tensor cat(const std::vector<Tensor>& inputs, int64_t axis) {
  if (inputs.empty()) throw ValueError("cat: expected a non-empty list of tensors");
  for (size_t t = 0; t < inputs.size(); ++t)
    if (!inputs[t].defined()) throw ValueError("cat: tensor " + std::to_string(t) + " is undefined");
  for (size_t t = 0; t < inputs.size(); ++t)
    if (inputs[t].dim() == 0)
      shape_error("cat", "zero-dimensional tensor (at position " + std::to_string(t) +
                             ") cannot be concatenated; stack() joins them along a new dim");
  const Dtype dtype = inputs[0].dtype();
  for (size_t t = 1; t < inputs.size(); ++t)
    if (inputs[t].dtype() != dtype)
      throw TypeError("cat: tensor " + std::to_string(t) + " is " + to_string(inputs[t].dtype()) +
                      " but tensor 0 is " + to_string(dtype) + "; convert with .to() first");
  std::vector<Tensor> tensors;
  tensors.reserve(inputs.size());
  for (const Tensor& t : inputs) tensors.push_back(t.contiguous());
  const Shape first = tensors[0].shape();
  const size_t ax = norm_axis(axis, first.size(), "cat");
  Shape out = first;
  out[ax] = 0;
  std::vector<int64_t> widths;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Shape s = tensors[t].shape();
    bool ok = s.size() == first.size();
    for (size_t i = 0; ok && i < s.size(); ++i) ok = i == ax || s[i] == first[i];
    if (!ok)
      shape_error("cat", "tensor " + std::to_string(t) + " has shape " + to_string(s) +
                             ", expected " + to_string(first) + " except in dim " +
                             std::to_string(ax));
    out[ax] += s[ax];
    widths.push_back(s[ax]);
  }
  const AxisSplit split = split_at(out, ax);
  if (dtype != Dtype::Float32) return cat_values(tensors, out, split, widths);
  Array y = Array::from_shape(to_xshape(out));
  const size_t row = split.n * split.inner;
  size_t offset = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const size_t w = static_cast<size_t>(widths[t]) * split.inner;
    const float* src = val(tensors[t]).data();
    for (size_t o = 0; o < split.outer; ++o)
      std::copy(src + o * w, src + (o + 1) * w, y.data() + o * row + offset);
    offset += w;
  }
  return record("cat", std::move(y), tensors, [widths, split, out, ax](BackwardContext& ctx) {
    const size_t row = split.n * split.inner;
    size_t offset = 0;
    for (size_t t = 0; t < widths.size(); ++t) {
      const size_t w = static_cast<size_t>(widths[t]) * split.inner;
      if (ctx.needs(t)) {
        Shape piece = out;
        piece[ax] = widths[t];
        Array g = Array::from_shape(to_xshape(piece));
        for (size_t o = 0; o < split.outer; ++o)
          std::copy(ctx.grad.data() + o * row + offset, ctx.grad.data() + o * row + offset + w,
                    g.data() + o * w);
        ctx.give(t, std::move(g));
      }
      offset += w;
    }
  });
}

namespace {
void check_indices(const Indices& index, int64_t limit, const char* op) {
  for (size_t i = 0; i < index.values.size(); ++i) {
    const int64_t v = index.values[i];
    if (v < 0 || v >= limit)
      throw IndexError(std::string(op) + ": index " + std::to_string(v) + " at position " +
                       std::to_string(i) + " is out of range [0, " + std::to_string(limit) + ")");
  }
}

// Gathers rows along `ax` of `x` (shape `in`) by `idx`, giving `n_idx` rows in their place.
// The gradient scatter-adds back, so repeated indices accumulate.
Tensor gather_rows(const Tensor& a, size_t ax, const Indices& index, Shape out, const char* op,
                   int64_t padding_idx) {
  const Shape in = a.shape();
  check_indices(index, in[ax], op);
  const AxisSplit s = split_at(in, ax);
  const size_t k = index.values.size();
  Array y = Array::from_shape(to_xshape(out));
  const float* x = val(a).data();
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t i = 0; i < k; ++i) {
      const float* src = x + (o * s.n + static_cast<size_t>(index.values[i])) * s.inner;
      std::copy(src, src + s.inner, y.data() + (o * k + i) * s.inner);
    }
  auto idx = index.values;
  return record(op, std::move(y), {a}, [in, s, idx, padding_idx](BackwardContext& ctx) {
    Array g = xt::zeros<float>(to_xshape(in));
    const size_t k = idx.size();
    for (size_t o = 0; o < s.outer; ++o)
      for (size_t i = 0; i < k; ++i) {
        if (idx[i] == padding_idx) continue;  // the padding row gets no gradient
        float* dst = g.data() + (o * s.n + static_cast<size_t>(idx[i])) * s.inner;
        const float* src = ctx.grad.data() + (o * k + i) * s.inner;
        for (size_t j = 0; j < s.inner; ++j) dst[j] += src[j];
      }
    ctx.give(0, std::move(g));
  });
}
}  // namespace

Tensor index_select(const Tensor& a_arg, int64_t axis, const Indices& index) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "index_select", "the input");
  const Shape in = a.shape();
  const size_t ax = norm_axis(axis, in.size(), "index_select");
  if (index.shape.size() != 1)
    shape_error("index_select", "indices must be 1-D, got shape " + to_string(index.shape));
  Shape out = in;
  out[ax] = index.numel();
  return gather_rows(a, ax, index, out, "index_select", -1);
}

Tensor embedding(const Tensor& weight_arg, const Indices& ids, int64_t padding_idx) {
  Tensor weight_copy;
  const Tensor& weight = dense(weight_arg, weight_copy);
  require_defined(weight, "embedding", "the weight");
  const Shape ws = weight.shape();
  if (ws.size() != 2) shape_error("embedding", "weight must be 2-D (V, C), got " + to_string(ws));
  if (padding_idx >= ws[0])
    throw IndexError("embedding: padding_idx " + std::to_string(padding_idx) + " is out of range for " +
                     std::to_string(ws[0]) + " rows (negative: none)");
  Shape out = ids.shape;
  out.push_back(ws[1]);
  return gather_rows(weight, 0, ids, out, "embedding", padding_idx);
}

// y = mask ? value : x          dx = g * !mask
Tensor masked_fill(const Tensor& a_arg, const Tensor& mask, float value) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "masked_fill", "the input");
  require_defined(mask, "masked_fill", "the mask");
  const Shape in = a.shape();
  if (broadcast_shapes(in, mask.shape(), "masked_fill") != in)
    shape_error("masked_fill", "mask of shape " + to_string(mask.shape()) +
                                   " does not broadcast to the input's shape " + to_string(in));
  const std::vector<uint8_t> m = broadcast_values<uint8_t>(mask, in);  // bool, or float != 0
  auto keep = std::make_shared<Array>(Array::from_shape(to_xshape(in)));
  Array y = Array::from_shape(to_xshape(in));
  const float* x = val(a).data();
  for (size_t i = 0; i < m.size(); ++i) {
    keep->data()[i] = m[i] ? 0.0f : 1.0f;
    y.data()[i] = m[i] ? value : x[i];
  }
  return record("masked_fill", std::move(y), {a, mask}, [keep](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad * *keep));
  });
}

// y = cond ? a : b              da = g * cond, db = g * !cond
Tensor where(const Tensor& cond, const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  require_defined(cond, "where", "the condition");
  require_defined(a, "where", "a");
  require_defined(b, "where", "b");
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"),
                                   b.shape(), "where");
  const std::vector<uint8_t> m = broadcast_values<uint8_t>(cond, s);  // bool, or float != 0
  auto c = std::make_shared<Array>(Array::from_shape(to_xshape(s)));
  for (size_t i = 0; i < m.size(); ++i) c->data()[i] = m[i] ? 1.0f : 0.0f;
  Array y = xt::where(*c > 0.0f, val(a), val(b));
  return record("where", std::move(y), {cond, a, b}, [c](BackwardContext& ctx) {
    if (ctx.needs(1)) ctx.give(1, Array(ctx.grad * *c));
    if (ctx.needs(2)) ctx.give(2, Array(ctx.grad * (1.0f - *c)));
  });
}

}  // namespace tg
