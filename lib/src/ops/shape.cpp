// Shape ops and indexing: transpose/permute, reshape and friends, cat/narrow, gathers and
// masks. Shape ops copy into fresh row-major arrays (every tensor is contiguous).
#include <numeric>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xoperation.hpp>

#include "ops/common.h"

namespace tg {
using namespace detail;

// y = permute(x, dims)          dx = permute(g, inverse(dims))
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  require_defined(a, "permute", "the input");
  const Shape in = a.shape();
  if (dims.size() != in.size())
    shape_error("permute", "got " + std::to_string(dims.size()) + " dims for a tensor of shape " +
                               to_string(in));
  std::vector<size_t> perm(dims.size()), inv(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = norm_axis(dims[i], in.size(), "permute");
    if (used[perm[i]]) throw IndexError("permute: dim " + std::to_string(dims[i]) + " repeated");
    used[perm[i]] = true;
    inv[perm[i]] = i;
  }
  Array y = xt::transpose(val(a), perm);
  return record("permute", std::move(y), {a}, [inv](BackwardContext& ctx) {
    ctx.give(0, Array(xt::transpose(ctx.grad, inv)));
  });
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  require_defined(a, "transpose", "the input");
  const size_t r = static_cast<size_t>(a.dim());
  std::vector<int64_t> dims(r);
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[norm_axis(d0, r, "transpose")], dims[norm_axis(d1, r, "transpose")]);
  return permute(a, dims);
}

// y = x viewed with a new shape          dx = g viewed with x's shape
Tensor reshape(const Tensor& a, const Shape& shape_in) {
  require_defined(a, "reshape", "the input");
  const Shape in = a.shape();
  Shape shape = shape_in;
  int64_t known = 1, infer = -1, nonzero = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) shape_error("reshape", "only one dimension can be -1, got " + to_string(shape_in));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      shape_error("reshape", "invalid shape " + to_string(shape_in));
    } else {
      // Even with a zero dim, the other dims' product must not overflow (the strides).
      if (shape[i] > 0 && nonzero > (int64_t(1) << 62) / shape[i])
        shape_error("reshape", "shape " + to_string(shape_in) + " has too many elements");
      if (shape[i] > 0) nonzero *= shape[i];
      known *= shape[i];
    }
  }
  const int64_t n = numel_of(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      shape_error("reshape", "shape " + to_string(shape_in) + " is invalid for input of shape " +
                                 to_string(in));
    shape[static_cast<size_t>(infer)] = n / known;
  }
  if (numel_of(shape) != n)
    shape_error("reshape", "shape " + to_string(shape_in) + " is invalid for input of shape " +
                               to_string(in) + " (" + std::to_string(n) + " elements)");
  Array y = val(a);
  y.reshape(to_xshape(shape));
  return record("reshape", std::move(y), {a}, [in](BackwardContext& ctx) {
    Array g = ctx.take_grad();  // the same values in another shape: no copy
    g.reshape(to_xshape(in));
    ctx.give(0, std::move(g));
  });
}

Tensor flatten(const Tensor& a, int64_t start, int64_t end) {
  require_defined(a, "flatten", "the input");
  const Shape in = a.shape();
  if (in.empty()) return reshape(a, {1});
  const size_t s = norm_axis(start, in.size(), "flatten"), e = norm_axis(end, in.size(), "flatten");
  if (s > e) throw IndexError("flatten: start dim " + std::to_string(start) + " after end dim " + std::to_string(end));
  Shape out(in.begin(), in.begin() + static_cast<long>(s));
  int64_t merged = 1;
  for (size_t i = s; i <= e; ++i) merged *= in[i];
  out.push_back(merged);
  out.insert(out.end(), in.begin() + static_cast<long>(e) + 1, in.end());
  return reshape(a, out);
}

Tensor squeeze(const Tensor& a) {
  require_defined(a, "squeeze", "the input");
  Shape out;
  for (auto d : a.shape())
    if (d != 1) out.push_back(d);
  return reshape(a, out);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  require_defined(a, "squeeze", "the input");
  Shape s = a.shape();
  const size_t d = norm_axis(dim, s.size(), "squeeze");
  if (s[d] == 1) s.erase(s.begin() + static_cast<long>(d));
  return reshape(a, s);
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  require_defined(a, "unsqueeze", "the input");
  Shape s = a.shape();
  const size_t d = norm_axis(dim, s.size() + 1, "unsqueeze");
  s.insert(s.begin() + static_cast<long>(d), 1);
  return reshape(a, s);
}

// y = [x0 | x1 | ...] along axis        dxi = the slice of g that xi filled
Tensor cat(const std::vector<Tensor>& tensors, int64_t axis) {
  if (tensors.empty()) throw ValueError("cat: expected a non-empty list of tensors");
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!tensors[t].defined()) throw ValueError("cat: tensor " + std::to_string(t) + " is undefined");
  const Shape first = tensors[0].shape();
  if (first.empty()) shape_error("cat", "zero-dimensional tensors cannot be concatenated");
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

// y = x[..., start:start+length, ...]      dx = zeros with g placed at the slice
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  require_defined(a, "narrow", "the input");
  const Shape in = a.shape();
  if (in.empty()) shape_error("narrow", "cannot narrow a 0-d tensor");
  const size_t ax = norm_axis(dim, in.size(), "narrow");
  if (start < 0 || length < 0 || start > in[ax] || length > in[ax] - start)  // no overflow
    throw IndexError("narrow: start " + std::to_string(start) + " and length " +
                     std::to_string(length) + " out of range for dim " + std::to_string(ax) +
                     " of shape " + to_string(in));
  const AxisSplit s = split_at(in, ax);
  Shape out = in;
  out[ax] = length;
  Array y = Array::from_shape(to_xshape(out));
  const size_t w = static_cast<size_t>(length) * s.inner, row = s.n * s.inner,
               off = static_cast<size_t>(start) * s.inner;
  for (size_t o = 0; o < s.outer; ++o)
    std::copy(val(a).data() + o * row + off, val(a).data() + o * row + off + w, y.data() + o * w);
  return record("narrow", std::move(y), {a}, [in, s, w, row, off](BackwardContext& ctx) {
    Array g = xt::zeros<float>(to_xshape(in));
    for (size_t o = 0; o < s.outer; ++o)
      std::copy(ctx.grad.data() + o * w, ctx.grad.data() + (o + 1) * w, g.data() + o * row + off);
    ctx.give(0, std::move(g));
  });
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
  require_defined(a, "slice", "the input");
  const Shape shape = a.shape();
  const int64_t n = shape[norm_axis(dim, shape.size(), "slice")];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return narrow(a, dim, start, end - start);
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

Tensor index_select(const Tensor& a, int64_t axis, const Indices& index) {
  require_defined(a, "index_select", "the input");
  const Shape in = a.shape();
  const size_t ax = norm_axis(axis, in.size(), "index_select");
  if (index.shape.size() != 1)
    shape_error("index_select", "indices must be 1-D, got shape " + to_string(index.shape));
  Shape out = in;
  out[ax] = index.numel();
  return gather_rows(a, ax, index, out, "index_select", -1);
}

Tensor embedding(const Tensor& weight, const Indices& ids, int64_t padding_idx) {
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
Tensor masked_fill(const Tensor& a, const Tensor& mask, float value) {
  require_defined(a, "masked_fill", "the input");
  require_defined(mask, "masked_fill", "the mask");
  const Shape in = a.shape();
  if (broadcast_shapes(in, mask.shape(), "masked_fill") != in)
    shape_error("masked_fill", "mask of shape " + to_string(mask.shape()) +
                                   " does not broadcast to the input's shape " + to_string(in));
  auto keep = std::make_shared<Array>(xt::broadcast(xt::equal(val(mask), 0.0f), to_xshape(in)));
  Array y = xt::where(*keep > 0.0f, val(a), value);
  return record("masked_fill", std::move(y), {a, mask}, [keep](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, Array(ctx.grad * *keep));
  });
}

// y = cond ? a : b              da = g * cond, db = g * !cond
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  require_defined(cond, "where", "the condition");
  require_defined(a, "where", "a");
  require_defined(b, "where", "b");
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"),
                                   b.shape(), "where");
  auto c = std::make_shared<Array>(xt::broadcast(xt::not_equal(val(cond), 0.0f), to_xshape(s)));
  Array y = xt::where(*c > 0.0f, val(a), val(b));
  return record("where", std::move(y), {cond, a, b}, [c](BackwardContext& ctx) {
    if (ctx.needs(1)) ctx.give(1, Array(ctx.grad * *c));
    if (ctx.needs(2)) ctx.give(2, Array(ctx.grad * (1.0f - *c)));
  });
}

}  // namespace tg
