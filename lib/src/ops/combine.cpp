// Combining and splitting (tapegrad/ops/combine.h). Most are compositions of views and cat,
// so their gradients come for free: stack = unsqueeze + cat; chunk, split and unbind are
// narrow/select views; repeat copies an expand view once; roll = cat of two narrows per dim.
// flip is its own kernel: a copy through negated strides.
#include <cstring>
#include <numeric>

#include "ops/common.h"
#include "ops/packed.h"

namespace tg {
using namespace detail;

namespace {
std::string sizes_string(const std::vector<int64_t>& v) { return to_string(Shape(v.begin(), v.end())); }

/// The dim of a splitting op, normalised; a 0-d input has none.
size_t split_dim(const Tensor& x, int64_t dim, const char* op) {
  require_defined(x, op, "the input");
  if (x.dim() == 0) shape_error(op, "expects a tensor with at least one dim, got a 0-d tensor");
  return norm_axis(dim, static_cast<size_t>(x.dim()), op);
}
}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) throw ValueError("stack: expected a non-empty list of tensors");
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!tensors[t].defined()) throw ValueError("stack: tensor " + std::to_string(t) + " is undefined");
  const Shape first = tensors[0].shape();
  for (size_t t = 1; t < tensors.size(); ++t)
    if (tensors[t].shape() != first)
      shape_error("stack", "expects each tensor to be equal size, but got " + to_string(first) +
                               " at entry 0 and " + to_string(tensors[t].shape()) + " at entry " +
                               std::to_string(t));
  const size_t d = norm_axis(dim, first.size() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, static_cast<int64_t>(d)));
  return cat(parts, static_cast<int64_t>(d));
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const size_t d = split_dim(x, dim, "split_with_sizes");
  const int64_t n = x.size(static_cast<int64_t>(d));
  int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0)
      throw ValueError("split_with_sizes: split sizes must be non-negative, got " + sizes_string(sizes));
    total += s;
  }
  if (total != n)
    shape_error("split_with_sizes", "expects split_sizes to sum exactly to " + std::to_string(n) +
                                        " (the size of dim " + std::to_string(d) + " of shape " +
                                        to_string(x.shape()) + "), but got split_sizes=" + sizes_string(sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (auto s : sizes) {
    out.push_back(narrow(x, static_cast<int64_t>(d), start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const size_t d = split_dim(x, dim, "split");
  const int64_t n = x.size(static_cast<int64_t>(d));
  if (split_size < 0) throw ValueError("split: split_size must be non-negative, got " + std::to_string(split_size));
  if (split_size == 0 && n != 0)
    throw ValueError("split: split_size can only be 0 if the dim's size is 0, but dim " + std::to_string(d) +
                     " of shape " + to_string(x.shape()) + " has size " + std::to_string(n));
  std::vector<int64_t> sizes;
  if (split_size == 0) {
    sizes.push_back(0);
  } else {
    for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
    if (sizes.empty()) sizes.push_back(0);  // n = 0: one empty piece, as PyTorch
  }
  return split_with_sizes(x, sizes, static_cast<int64_t>(d));
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const size_t d = split_dim(x, dim, "chunk");
  if (chunks <= 0) throw ValueError("chunk: chunks must be greater than 0, got " + std::to_string(chunks));
  const int64_t n = x.size(static_cast<int64_t>(d));
  if (n == 0) return split_with_sizes(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), static_cast<int64_t>(d));
  return split(x, (n + chunks - 1) / chunks, static_cast<int64_t>(d));
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const size_t d = split_dim(x, dim, "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(static_cast<int64_t>(d)); ++i) out.push_back(select(x, static_cast<int64_t>(d), i));
  return out;
}

// y = x tiled: x (s0, s1) seen as (1, s0, 1, s1), expanded to (r0, s0, r1, s1), copied and
// seen as (r0·s0, r1·s1)            dx = g summed over the tiles (expand's backward)
Tensor repeat(const Tensor& x, const Shape& repeats) {
  require_defined(x, "repeat", "the input");
  const Shape in = x.shape();
  if (repeats.size() < in.size())
    shape_error("repeat", "the number of repeats (" + std::to_string(repeats.size()) +
                              ") cannot be smaller than the number of dims of the input, shape " + to_string(in));
  for (auto r : repeats)
    if (r < 0) shape_error("repeat", "repeats must be non-negative, got " + to_string(repeats));
  Shape padded(repeats.size() - in.size(), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  Shape pairs, tiled, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    pairs.insert(pairs.end(), {1, padded[i]});
    tiled.insert(tiled.end(), {repeats[i], padded[i]});
    out.push_back(repeats[i] * padded[i]);
  }
  const Tensor e = expand(reshape(x, pairs), tiled);
  // One copy of the expanded view (a fresh storage even when every repeat is 1), then a view.
  const Tensor copy = record("repeat", dense_copy(*e.impl()), {e},
                             [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
  return view(copy, out);
}

namespace {
/// Where each element of flip(x) comes from in x (row-major), for x of shape `in`: the
/// row-major strides, negated (and the start moved to the end) along the flipped dims.
std::vector<int64_t> flip_sources(const Shape& in, const std::vector<bool>& flipped) {
  std::vector<int64_t> strides(in.size());
  int64_t stride = 1, offset = 0;
  for (size_t d = in.size(); d-- > 0;) {
    strides[d] = flipped[d] ? -stride : stride;
    if (flipped[d] && in[d] > 0) offset += (in[d] - 1) * stride;
    stride *= std::max<int64_t>(in[d], 1);
  }
  std::vector<int64_t> src = strided_offsets(in, strides);
  for (auto& s : src) s += offset;
  return src;
}
}  // namespace

// y[i] = x[n-1-i] along each flipped dim       dx = g flipped back (the same permutation)
Tensor flip(const Tensor& x_arg, const std::vector<int64_t>& dims) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "flip", "the input");
  const Shape in = x.shape();
  std::vector<bool> flipped(in.size(), false);
  for (auto dim : dims) {
    const size_t d = norm_axis(dim, std::max<size_t>(in.size(), 1), "flip");
    if (in.empty()) continue;
    if (flipped[d]) throw IndexError("flip: dim " + std::to_string(d) + " appears multiple times in the dims " + sizes_string(dims));
    flipped[d] = true;
  }
  const std::vector<int64_t> src = flip_sources(in, flipped);
  Array y = Array::from_shape(val(x).shape());
  for (size_t i = 0; i < src.size(); ++i) y.data()[i] = val(x).data()[src[i]];
  return record("flip", std::move(y), {x}, [in, flipped](BackwardContext& ctx) {
    const std::vector<int64_t> src = flip_sources(in, flipped);
    Array g = Array::from_shape(ctx.grad.shape());
    for (size_t i = 0; i < src.size(); ++i) g.data()[src[i]] = ctx.grad.data()[i];
    ctx.give(0, std::move(g));
  });
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  require_defined(x, "roll", "the input");
  if (dims.empty()) {
    if (shifts.size() != 1)
      shape_error("roll", "without dims, expects one shift (the flattened tensor's), got " + sizes_string(shifts));
    return reshape(roll(flatten(x), shifts, {0}), x.shape());
  }
  if (shifts.size() != dims.size())
    shape_error("roll", "shifts and dims must align: " + std::to_string(shifts.size()) + " shifts " +
                            sizes_string(shifts) + " for " + std::to_string(dims.size()) + " dims " + sizes_string(dims));
  Tensor y = x;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = static_cast<int64_t>(split_dim(y, dims[k], "roll"));
    const int64_t n = y.size(d);
    const int64_t s = n == 0 ? 0 : ((shifts[k] % n) + n) % n;
    // y = [the last s entries | the first n - s]: a copy even when s = 0, as PyTorch.
    y = cat({narrow(y, d, n - s, s), narrow(y, d, 0, n - s)}, d);
  }
  return y;
}

Tensor roll(const Tensor& x, int64_t shift, int64_t dim) {
  return roll(x, std::vector<int64_t>{shift}, std::vector<int64_t>{dim});
}

}  // namespace tg

// ---- packed parameters (ops/packed.h) ----------------------------------------------------------

namespace tg {
namespace detail {

std::shared_ptr<Storage> pack_rows(const std::vector<Tensor>& parts) {
  Shape shape = parts.at(0).shape();
  shape[0] = 0;
  for (const Tensor& p : parts) shape[0] += p.shape()[0];
  Array packed = Array::from_shape(to_xshape(shape));
  float* at = packed.data();
  for (const Tensor& p : parts) {
    const TensorImpl& impl = *p.impl();
    if (impl.contiguous()) {
      at = std::copy_n(impl.ptr(), impl.numel(), at);
    } else {
      const Array rows = dense_copy(impl);
      at = std::copy(rows.begin(), rows.end(), at);
    }
  }
  return make_storage(std::move(packed));
}

bool still_packed(const Storage& packed, const std::vector<Tensor>& parts) {
  const float* at = packed.data.data();
  for (const Tensor& p : parts) {
    const TensorImpl& impl = *p.impl();
    const size_t n = impl.numel();
    if (impl.contiguous() ? std::memcmp(impl.ptr(), at, n * sizeof(float)) != 0
                          : std::memcmp(dense_copy(impl).data(), at, n * sizeof(float)) != 0)
      return false;
    at += n;
  }
  return true;
}

// y = cat(parts, 0) (already packed)       d(part i) = g's rows of part i
Tensor packed_rows(const std::shared_ptr<Storage>& packed, const std::vector<Tensor>& parts) {
  std::vector<size_t> sizes;  // elements per part
  for (const Tensor& p : parts) sizes.push_back(p.numel());
  std::vector<Shape> shapes;
  for (const Tensor& p : parts) shapes.push_back(p.shape());
  return record("packed_rows", packed, parts, [sizes, shapes](BackwardContext& ctx) {
    const float* g = ctx.grad.data();
    for (size_t i = 0; i < sizes.size(); g += sizes[i], ++i) {
      if (!ctx.needs(i)) continue;
      Array gi = Array::from_shape(to_xshape(shapes[i]));
      std::copy(g, g + sizes[i], gi.data());
      ctx.give(i, std::move(gi));
    }
  });
}

}  // namespace detail
}  // namespace tg
