// Views: ops whose output shares its input's storage, seen through a new shape, strides and
// offset (core/storage.h). Nothing is copied forward; each backward maps the view's gradient
// back to the input's shape. reshape() copies only when the strides allow no view, and
// contiguous() only when the tensor is not contiguous.
#include <numeric>
#include <optional>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>

#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {

using XShape = Array::shape_type;

XShape to_xs(const Shape& s) { return XShape(s.begin(), s.end()); }

/// A new impl over a's storage with the given geometry. Its base is a's base, or a itself:
/// what an in-place write through the view rebases (autograd/views.cpp).
std::shared_ptr<TensorImpl> view_of_input(const Tensor& a, XShape shape, Strides strides,
                                          int64_t offset) {
  const TensorImpl& src = *a.impl();
  auto v = new_impl();
  v->storage = src.storage;
  set_geometry(*v, std::move(shape), std::move(strides), offset);
  v->vi->base = src.base() ? *src.base() : a.impl();
  return v;
}

/// The gradient of a view that picks elements out of its input (narrow, select): zeros in the
/// input's shape with g written where the view's elements sit. `strides` and `offset` place
/// the view inside a row-major block of the input's shape.
Array embed(const XShape& in, const Array& g, const Strides& strides, int64_t offset) {
  Array out = xt::zeros<float>(in);
  scatter(out.data(), g.shape(), strides, offset, g.data());
  return out;
}

/// The strides that show a tensor of shape `old_shape` and strides `old` as `shape`, if any:
/// each run of old dims that sit in memory as one block (stride[i] = stride[i+1] * size[i+1])
/// must be split into whole new dims.
std::optional<Strides> view_strides(const XShape& old_shape, const Strides& old,
                                    const XShape& shape) {
  size_t numel = 1;
  for (auto d : old_shape) numel *= d;
  if (numel == 0 || old_shape.empty()) return contiguous_strides(shape);
  Strides out(shape.size(), 1);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_stride = old.back();  // the stride of the run's last dim
  size_t run = 1, covered = 1;        // elements in the run so far, and in the new dims
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    run *= old_shape[static_cast<size_t>(d)];
    const bool run_ends =
        d == 0 || (old_shape[static_cast<size_t>(d - 1)] != 1 &&
                   old[static_cast<size_t>(d - 1)] != static_cast<int64_t>(run) * chunk_stride);
    if (!run_ends) continue;
    while (view_d >= 0 && (covered < run || shape[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = static_cast<int64_t>(covered) * chunk_stride;
      covered *= shape[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (covered != run) return std::nullopt;
    if (d > 0) {
      chunk_stride = old[static_cast<size_t>(d - 1)];
      run = covered = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

/// `shape_in` with its -1 inferred from a's element count; ShapeError naming `op` otherwise.
Shape infer_shape(const Shape& in, const Shape& shape_in, const char* op) {
  Shape shape = shape_in;
  int64_t known = 1, infer = -1, nonzero = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) shape_error(op, "only one dimension can be -1, got " + to_string(shape_in));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      shape_error(op, "invalid shape " + to_string(shape_in));
    } else {
      // Even with a zero dim, the other dims' product must not overflow (the strides).
      if (shape[i] > 0 && nonzero > (int64_t(1) << 62) / shape[i])
        shape_error(op, "shape " + to_string(shape_in) + " has too many elements");
      if (shape[i] > 0) nonzero *= shape[i];
      known *= shape[i];
    }
  }
  const int64_t n = numel_of(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      shape_error(op, "shape " + to_string(shape_in) + " is invalid for input of shape " +
                          to_string(in));
    shape[static_cast<size_t>(infer)] = n / known;
  }
  if (numel_of(shape) != n)
    shape_error(op, "shape " + to_string(shape_in) + " is invalid for input of shape " +
                        to_string(in) + " (" + std::to_string(n) + " elements)");
  return shape;
}

// y = x seen with a new shape          dx = g seen with x's shape
Tensor reshape_view(const Tensor& a, const Shape& shape, const Strides& strides, const char* op) {
  const XShape in = a.impl()->shape();
  return record_view(op, view_of_input(a, to_xs(shape), strides, a.impl()->offset()), a,
                     [in](BackwardContext& ctx) {
                       Array g = ctx.take_grad();  // the same values in another shape: no copy
                       g.reshape(in);
                       ctx.give(0, std::move(g));
                     });
}

}  // namespace

Tensor view(const Tensor& a, const Shape& shape_in) {
  require_defined(a, "view", "the input");
  const Shape shape = infer_shape(a.shape(), shape_in, "view");
  const TensorImpl& x = *a.impl();
  const auto strides = x.contiguous() ? contiguous_strides(to_xs(shape))
                                      : view_strides(x.shape(), x.strides(), to_xs(shape));
  if (!strides)
    shape_error("view", "shape " + to_string(shape_in) + " is not compatible with the input's shape " +
                            to_string(a.shape()) + " and strides " + to_string(a.strides()) +
                            " (a dimension would span two separate blocks of memory); use "
                            "reshape(), which copies");
  return reshape_view(a, shape, *strides, "view");
}

Tensor reshape(const Tensor& a, const Shape& shape_in) {
  require_defined(a, "reshape", "the input");
  const Shape shape = infer_shape(a.shape(), shape_in, "reshape");
  const TensorImpl& x = *a.impl();
  auto strides = x.contiguous() ? contiguous_strides(to_xs(shape))
                                : view_strides(x.shape(), x.strides(), to_xs(shape));
  if (strides) return reshape_view(a, shape, *strides, "reshape");
  const Tensor c = a.contiguous();
  return reshape_view(c, shape, contiguous_strides(to_xs(shape)), "reshape");
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

namespace {
// Drops the dims for which drop[d] holds (each of size 1): a view with the other strides.
Tensor squeeze_dims(const Tensor& a, const std::vector<bool>& drop) {
  const TensorImpl& x = *a.impl();
  XShape shape;
  Strides strides;
  for (size_t d = 0; d < x.shape().size(); ++d)
    if (!drop[d]) {
      shape.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
    }
  return reshape_view(a, Shape(shape.begin(), shape.end()), strides, "squeeze");
}
}  // namespace

Tensor squeeze(const Tensor& a) {
  require_defined(a, "squeeze", "the input");
  std::vector<bool> drop;
  for (auto d : a.impl()->shape()) drop.push_back(d == 1);
  return squeeze_dims(a, drop);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  require_defined(a, "squeeze", "the input");
  const auto& shape = a.impl()->shape();
  const size_t d = norm_axis(dim, shape.size(), "squeeze");
  std::vector<bool> drop(shape.size(), false);
  drop[d] = shape[d] == 1;
  return squeeze_dims(a, drop);
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  require_defined(a, "unsqueeze", "the input");
  const TensorImpl& x = *a.impl();
  const size_t d = norm_axis(dim, x.shape().size() + 1, "unsqueeze");
  Shape shape = a.shape();
  Strides strides = x.strides();
  // The new dim's stride: what would step over the dims after it (any value works for size 1).
  const int64_t step = d < x.shape().size() ? x.strides()[d] * static_cast<int64_t>(x.shape()[d]) : 1;
  shape.insert(shape.begin() + static_cast<long>(d), 1);
  strides.insert(strides.begin() + static_cast<long>(d), step);
  return reshape_view(a, shape, strides, "unsqueeze");
}

// y = x[..., start:start+length, ...]      dx = zeros with g placed at the slice
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  require_defined(a, "narrow", "the input");
  const TensorImpl& x = *a.impl();
  if (x.shape().empty()) shape_error("narrow", "cannot narrow a 0-d tensor");
  const size_t ax = norm_axis(dim, x.shape().size(), "narrow");
  const int64_t n = static_cast<int64_t>(x.shape()[ax]);
  if (start < 0 && start >= -n) start += n;  // counts from the end, as in PyTorch
  if (start < 0 || length < 0 || start > n || length > n - start)  // no overflow
    throw IndexError("narrow: start " + std::to_string(start) + " and length " +
                     std::to_string(length) + " out of range for dim " + std::to_string(ax) +
                     " of shape " + to_string(a.shape()));
  XShape shape = x.shape();
  shape[ax] = static_cast<size_t>(length);
  const XShape in = x.shape();
  const Strides dense = contiguous_strides(in);
  const int64_t at = start * dense[ax];
  return record_view("narrow",
                     view_of_input(a, shape, x.strides(), x.offset() + start * x.strides()[ax]), a,
                     [in, dense, at](BackwardContext& ctx) {
                       ctx.give(0, embed(in, ctx.grad, dense, at));
                     });
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
  require_defined(a, "slice", "the input");
  const Shape shape = a.shape();
  if (shape.empty()) shape_error("slice", "cannot slice a 0-d tensor");
  const int64_t n = shape[norm_axis(dim, shape.size(), "slice")];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return narrow(a, dim, start, end - start);
}

// y = x[..., start:end:step, ...]      dx = zeros with g placed at every step-th entry
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  require_defined(a, "slice", "the input");
  if (step <= 0)
    throw ValueError("slice: step must be greater than zero, got " + std::to_string(step));
  if (step == 1) return slice(a, dim, start, end);
  const TensorImpl& x = *a.impl();
  if (x.shape().empty()) shape_error("slice", "cannot slice a 0-d tensor");
  const size_t ax = norm_axis(dim, x.shape().size(), "slice");
  const int64_t n = static_cast<int64_t>(x.shape()[ax]);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  const int64_t length = (end - start + step - 1) / step;
  XShape shape = x.shape();
  shape[ax] = static_cast<size_t>(length);
  Strides strides = x.strides();
  strides[ax] *= step;
  const XShape in = x.shape();
  Strides dense = contiguous_strides(in);
  const int64_t at = start * dense[ax];
  dense[ax] *= step;
  return record_view("slice", view_of_input(a, shape, strides, x.offset() + start * x.strides()[ax]),
                     a, [in, dense, at](BackwardContext& ctx) {
                       ctx.give(0, embed(in, ctx.grad, dense, at));
                     });
}

// y = x[..., index, ...] (that dim removed)      dx = zeros with g placed at the index
Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  require_defined(a, "select", "the input");
  const TensorImpl& x = *a.impl();
  if (x.shape().empty()) shape_error("select", "cannot select from a 0-d tensor");
  const size_t ax = norm_axis(dim, x.shape().size(), "select");
  const int64_t n = static_cast<int64_t>(x.shape()[ax]);
  if (index < -n || index >= n)
    throw IndexError("select: index " + std::to_string(index) + " is out of range for dim " +
                     std::to_string(ax) + " of shape " + to_string(a.shape()) + " (expected [" +
                     std::to_string(-n) + ", " + std::to_string(n - 1) + "])");
  if (index < 0) index += n;
  XShape shape = x.shape();
  Strides strides = x.strides();
  const XShape in = x.shape();
  Strides dense = contiguous_strides(in);
  const int64_t at = index * dense[ax];
  const int64_t offset = x.offset() + index * x.strides()[ax];
  shape.erase(shape.begin() + static_cast<long>(ax));
  strides.erase(strides.begin() + static_cast<long>(ax));
  dense.erase(dense.begin() + static_cast<long>(ax));
  return record_view("select", view_of_input(a, shape, strides, offset), a,
                     [in, dense, at](BackwardContext& ctx) {
                       ctx.give(0, embed(in, ctx.grad, dense, at));
                     });
}

// y = permute(x, dims)          dx = permute(g, inverse(dims))
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  require_defined(a, "permute", "the input");
  const TensorImpl& x = *a.impl();
  const size_t rank = x.shape().size();
  if (dims.size() != rank)
    shape_error("permute", "got " + std::to_string(dims.size()) + " dims for a tensor of shape " +
                               to_string(a.shape()));
  std::vector<size_t> inv(rank);
  std::vector<bool> used(rank, false);
  XShape shape(rank);
  Strides strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t p = norm_axis(dims[i], rank, "permute");
    if (used[p]) throw IndexError("permute: dim " + std::to_string(dims[i]) + " repeated");
    used[p] = true;
    inv[p] = i;
    shape[i] = x.shape()[p];
    strides[i] = x.strides()[p];
  }
  return record_view("permute", view_of_input(a, shape, strides, x.offset()), a,
                     [inv](BackwardContext& ctx) {
                       ctx.give(0, Array(xt::transpose(ctx.grad, inv)));
                     });
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  require_defined(a, "transpose", "the input");
  const size_t r = static_cast<size_t>(a.dim());
  if (r == 0) {  // a 0-d tensor has dims 0 and -1, as in PyTorch: itself, as a view
    norm_axis(d0, 1, "transpose");
    norm_axis(d1, 1, "transpose");
    return permute(a, {});
  }
  const size_t i = norm_axis(d0, r, "transpose"), j = norm_axis(d1, r, "transpose");
  std::vector<int64_t> dims(r);
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[i], dims[j]);
  return permute(a, dims);
}

Tensor t(const Tensor& a) {
  require_defined(a, "t", "the input");
  const int64_t r = a.dim();
  if (r > 2)
    shape_error("t", "expects a tensor with at most 2 dims, got shape " + to_string(a.shape()) +
                         "; use transpose(a, d0, d1)");
  return r == 2 ? transpose(a, 0, 1) : reshape_view(a, a.shape(), a.impl()->strides(), "t");
}

// y = x repeated along its size-1 dims (stride 0)      dx = g summed over them (the engine)
Tensor expand(const Tensor& a, const Shape& sizes) {
  require_defined(a, "expand", "the input");
  const TensorImpl& x = *a.impl();
  const size_t rank = x.shape().size();
  if (sizes.size() < rank)
    shape_error("expand", "the number of sizes (" + std::to_string(sizes.size()) +
                              ") must be at least the tensor's rank, shape " + to_string(a.shape()));
  const size_t lead = sizes.size() - rank;
  XShape shape(sizes.size());
  Strides strides(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t want = sizes[i];
    if (i < lead) {
      if (want < 0)
        shape_error("expand", "size " + std::to_string(want) + " is not allowed for the new leading dim " +
                                  std::to_string(i) + " of " + to_string(sizes));
      shape[i] = static_cast<size_t>(want);
      strides[i] = 0;
      continue;
    }
    const size_t d = i - lead;
    const int64_t have = static_cast<int64_t>(x.shape()[d]);
    if (want == -1 || want == have) {
      shape[i] = x.shape()[d];
      strides[i] = x.strides()[d];
    } else if (have == 1 && want >= 0) {
      shape[i] = static_cast<size_t>(want);
      strides[i] = 0;
    } else {
      shape_error("expand", "the expanded size " + std::to_string(want) + " must match the existing size " +
                                std::to_string(have) + " at dim " + std::to_string(i) + " (shape " +
                                to_string(a.shape()) + " to " + to_string(sizes) +
                                "); only size-1 dims can be expanded");
    }
  }
  check_shape(Shape(shape.begin(), shape.end()), "expand");
  return record_view("expand", view_of_input(a, shape, strides, x.offset()), a,
                     [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
}

// y = x, contiguous              dx = g
Tensor Tensor::contiguous() const {
  if (checked(impl_, "contiguous").contiguous()) return *this;
  if (impl_->dtype() != DType::Float32)  // no gradient to carry: a plain copy
    return row_major(*impl_) ? *this : dense_clone(*impl_);
  return record("contiguous", dense_copy(*impl_), {*this},
                [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
}

}  // namespace tg
