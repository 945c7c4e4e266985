// Indexing and selection (tapegrad/ops/index.h): gather, scatter, scatter_add, index_add,
// sort/argsort/topk, multinomial, and the tensor indexing API (Tensor::index, index_put_).
//
// Every kernel here works on flat offsets: an index tensor of shape I names, for each of its
// elements, one place in a row-major tensor (its own coordinates, with the one along `dim`
// replaced by the index value). gather reads those places, scatter writes them, and each one's
// backward is the other. The in-place forms (scatter_, index_put_, ...) compute the new values
// out of place and write them with copy_, so versions, views and the tape are copy_'s.
//
// Legend: S = x's shape, I = the index's shape, d = dim, B = the broadcast shape of the
// advanced indices.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <xtensor/xbuilder.hpp>

#include "ops/common.h"
#include "tapegrad/random.h"

namespace tg {
using namespace detail;

namespace {

/// The values of an int64 index tensor, or tg::TypeError naming the op.
std::vector<int64_t> index_values(const Tensor& index, const char* op) {
  require_defined(index, op, "the index");
  if (index.dtype() != Dtype::Int64)
    throw TypeError(std::string(op) + ": the index must be an int64 tensor, got " + to_string(index.dtype()));
  return values_as<int64_t>(*index.impl());
}

/// The row-major strides of a shape, as plain integers.
std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * std::max<int64_t>(s[d], 1);
  return st;
}

/// For each element of an index of shape I (row-major), its flat offset in a row-major tensor
/// of shape `target`: its own coordinates, the one along `dim` replaced by idx (when given;
/// each checked to lie in [0, target[dim]): tg::IndexError naming op, dim, index and size).
std::vector<size_t> offsets(const Shape& I, const Shape& target, size_t dim,
                            const std::vector<int64_t>* idx, const char* op) {
  const std::vector<int64_t> st = row_major_strides(target);
  const size_t n = static_cast<size_t>(numel_of(I));
  std::vector<size_t> out(n);
  std::vector<int64_t> c(I.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < I.size(); ++d) {
      int64_t v = c[d];
      if (idx && d == dim) {
        v = (*idx)[k];
        if (v < 0 || v >= target[d])
          throw IndexError(std::string(op) + ": index " + std::to_string(v) + " is out of bounds for dim " +
                           std::to_string(dim) + " with size " + std::to_string(target[d]));
      }
      off += v * st[d];
    }
    out[k] = static_cast<size_t>(off);
    for (size_t d = I.size(); d-- > 0;) {  // the next row-major coordinate
      if (++c[d] < I[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

/// PyTorch's shape rule for gather and scatter: index has x's rank, and no dim of it is larger
/// than x's (except along dim) nor than src's (when given).
void check_index_shape(const Shape& x, const Shape& index, const Shape* src, size_t dim, const char* op) {
  if (index.size() != x.size())
    shape_error(op, "index " + to_string(index) + " must have the same number of dims as the input " + to_string(x));
  for (size_t d = 0; d < x.size(); ++d) {
    if (d != dim && index[d] > x[d])
      shape_error(op, "index " + to_string(index) + " is larger than the input " + to_string(x) + " at dim " +
                          std::to_string(d) + " (it may be larger only along dim " + std::to_string(dim) + ")");
    if (src && index[d] > (*src)[d])
      shape_error(op, "index " + to_string(index) + " is larger than src " + to_string(*src) + " at dim " +
                          std::to_string(d));
  }
  if (src && src->size() != x.size())
    shape_error(op, "src " + to_string(*src) + " must have the same number of dims as the input " + to_string(x));
}

/// A 0-d tensor counts as 1-D of size 1 (as PyTorch's gather/scatter).
Shape at_least_1d(Shape s) { return s.empty() ? Shape{1} : s; }

enum class Write { Assign, Add };

/// out = x with out[at[k]] ← (or +=) alpha·src[from[k]] (or value when src is undefined).
///   Assign: dx = g with zeros at the written places    Add: dx = g
///   dsrc[from[k]] = alpha·g[at[k]] (zeros elsewhere)
Tensor write_at(const char* op, const Tensor& x_arg, const Tensor& src_arg, float value, float alpha,
                std::shared_ptr<const std::vector<size_t>> at, std::shared_ptr<const std::vector<size_t>> from,
                Write mode) {
  Tensor x_copy, src_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& src = dense(src_arg, src_copy);
  Array y = Array(val(x));
  float* py = y.data();
  if (src.defined()) {
    const float* ps = val(src).data();
    for (size_t k = 0; k < at->size(); ++k) {
      const float v = alpha * ps[(*from)[k]];
      if (mode == Write::Add) py[(*at)[k]] += v;
      else py[(*at)[k]] = v;
    }
  } else {
    for (size_t k = 0; k < at->size(); ++k) py[(*at)[k]] = value;
  }
  const auto src_shape = src.defined() ? src.impl()->shape() : Array::shape_type{};
  return record(op, std::move(y), {x, src}, [at, from, alpha, mode, src_shape](BackwardContext& ctx) {
    if (ctx.needs(1)) {
      Array ds = xt::zeros<float>(src_shape);
      for (size_t k = 0; k < at->size(); ++k) ds.data()[(*from)[k]] += alpha * ctx.grad.data()[(*at)[k]];
      ctx.give(1, std::move(ds));
    }
    if (ctx.needs(0)) {
      Array dx = ctx.take_grad();
      if (mode == Write::Assign)
        for (size_t k : *at) dx.data()[k] = 0.0f;
      ctx.give(0, std::move(dx));
    }
  });
}

/// 0, 1, ..., n-1: src read in its own order (index_add, index_put_).
std::shared_ptr<const std::vector<size_t>> identity(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return std::make_shared<const std::vector<size_t>>(std::move(v));
}

/// The checks and offsets scatter and scatter_add share: where each index element writes in x
/// and reads in src.
struct ScatterPlan {
  std::shared_ptr<const std::vector<size_t>> at, from;
};
ScatterPlan plan_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const char* op) {
  require_defined(x, op, "the input");
  const std::vector<int64_t> idx = index_values(index, op);
  const Shape xs = at_least_1d(x.shape()), is = at_least_1d(index.shape());
  const size_t ax = norm_axis(dim, xs.size(), op);
  Shape ss;
  if (src.defined()) ss = at_least_1d(src.shape());
  check_index_shape(xs, is, src.defined() ? &ss : nullptr, ax, op);
  ScatterPlan p;
  p.at = std::make_shared<const std::vector<size_t>>(offsets(is, xs, ax, &idx, op));
  if (src.defined()) p.from = std::make_shared<const std::vector<size_t>>(offsets(is, ss, ax, nullptr, op));
  return p;
}

}  // namespace

// ---- gather / scatter ----------------------------------------------------------------------------

// y[i][j][k] = x[i][index[i][j][k]][k]      dx = scatter_add(zeros, dim, index, g)
Tensor gather(const Tensor& x_arg, int64_t dim, const Tensor& index) {
  require_defined(x_arg, "gather", "the input");
  const std::vector<int64_t> idx = index_values(index, "gather");
  const Shape xs = at_least_1d(x_arg.shape()), is = at_least_1d(index.shape());
  const size_t ax = norm_axis(dim, xs.size(), "gather");
  check_index_shape(xs, is, nullptr, ax, "gather");
  auto at = std::make_shared<const std::vector<size_t>>(offsets(is, xs, ax, &idx, "gather"));
  if (!x_arg.is_floating_point()) {  // int64 or bool: a plain selection
    const std::vector<int64_t> v = values_as<int64_t>(*x_arg.impl());
    std::vector<int64_t> y(at->size());
    for (size_t k = 0; k < y.size(); ++k) y[k] = v[(*at)[k]];
    if (x_arg.dtype() == Dtype::Bool) return make_bool(std::vector<uint8_t>(y.begin(), y.end()), index.shape());
    return make_int64(std::move(y), index.shape());
  }
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  Array y = Array::from_shape(to_xshape(index.shape()));
  const float* px = val(x).data();
  for (size_t k = 0; k < at->size(); ++k) y.data()[k] = px[(*at)[k]];
  const auto in = x.impl()->shape();
  return record("gather", std::move(y), {x}, [at, in](BackwardContext& ctx) {
    Array dx = xt::zeros<float>(in);
    for (size_t k = 0; k < at->size(); ++k) dx.data()[(*at)[k]] += ctx.grad.data()[k];
    ctx.give(0, std::move(dx));
  });
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  require_defined(src, "scatter", "src");
  const ScatterPlan p = plan_scatter(x, dim, index, src, "scatter");
  return write_at("scatter", x, src, 0.0f, 1.0f, p.at, p.from, Write::Assign);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, float value) {
  const ScatterPlan p = plan_scatter(x, dim, index, Tensor(), "scatter");
  return write_at("scatter", x, Tensor(), value, 1.0f, p.at, nullptr, Write::Assign);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  require_defined(src, "scatter_add", "src");
  const ScatterPlan p = plan_scatter(x, dim, index, src, "scatter_add");
  return write_at("scatter_add", x, src, 0.0f, 1.0f, p.at, p.from, Write::Add);
}

// y = x; y.select(d, index[i]) += alpha · source.select(d, i)
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, float alpha) {
  const char* op = "index_add";
  require_defined(x, op, "the input");
  require_defined(source, op, "the source");
  const std::vector<int64_t> idx = index_values(index, op);
  if (index.dim() > 1) shape_error(op, "the index must be 1-D, got " + to_string(index.shape()));
  const Shape xs = at_least_1d(x.shape()), ss = at_least_1d(source.shape());
  const size_t ax = norm_axis(dim, xs.size(), op);
  bool fits = ss.size() == xs.size() && ss[ax] == static_cast<int64_t>(idx.size());
  for (size_t d = 0; fits && d < xs.size(); ++d) fits = d == ax || ss[d] == xs[d];
  if (!fits)
    shape_error(op, "source " + to_string(source.shape()) + " must have the input's shape " + to_string(x.shape()) +
                        " with the index's length " + std::to_string(idx.size()) + " along dim " + std::to_string(ax));
  // Every source element's index: index[its coordinate along dim].
  const AxisSplit s = split_at(ss, ax);
  std::vector<int64_t> full(static_cast<size_t>(numel_of(ss)));
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t i = 0; i < s.n; ++i)
      std::fill_n(full.begin() + static_cast<long>((o * s.n + i) * s.inner), s.inner, idx[i]);
  auto at = std::make_shared<const std::vector<size_t>>(offsets(ss, xs, ax, &full, op));
  return write_at(op, x, source, 0.0f, alpha, at, identity(at->size()), Write::Add);
}

// ---- sorting --------------------------------------------------------------------------------------

namespace {

/// For each lane along `dim` (of a row-major copy of x's values), its positions in sorted order
/// (a stable sort; NaN is the largest): int64, x's shape.
template <class T>
Tensor sort_positions(const std::vector<T>& v, const Shape& shape, size_t ax, bool descending) {
  const AxisSplit s = split_at(shape, ax);
  std::vector<int64_t> out(v.size());
  std::vector<int64_t> lane(s.n);
  auto is_nan = [](T a) { return a != a; };
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t j = 0; j < s.inner; ++j) {
      auto at = [&](int64_t i) { return v[(o * s.n + static_cast<size_t>(i)) * s.inner + j]; };
      std::iota(lane.begin(), lane.end(), 0);
      if (descending)
        std::stable_sort(lane.begin(), lane.end(), [&](int64_t a, int64_t b) {
          const T x = at(a), y = at(b);
          return !is_nan(y) && (is_nan(x) || x > y);
        });
      else
        std::stable_sort(lane.begin(), lane.end(), [&](int64_t a, int64_t b) {
          const T x = at(a), y = at(b);
          return !is_nan(x) && (is_nan(y) || x < y);
        });
      for (size_t i = 0; i < s.n; ++i) out[(o * s.n + i) * s.inner + j] = lane[i];
    }
  return make_int64(std::move(out), shape);
}

Tensor sorted_indices(const Tensor& x, int64_t dim, bool descending, const char* op) {
  require_defined(x, op, "the input");
  const Shape shape = at_least_1d(x.shape());
  const size_t ax = norm_axis(dim, shape.size(), op);
  Tensor i = x.is_floating_point()
                 ? sort_positions(values_as<float>(*x.impl()), shape, ax, descending)
                 : sort_positions(values_as<int64_t>(*x.impl()), shape, ax, descending);
  return x.dim() == 0 ? reshape(i, {}) : i;
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  Tensor i = sorted_indices(x, dim, descending, "sort");
  return {gather(x, dim, i), i};  // the values' gradient is gather's: back to where each came from
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return sorted_indices(x, dim, descending, "argsort");
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  require_defined(x, "topk", "the input");
  const Shape shape = at_least_1d(x.shape());
  const size_t ax = norm_axis(dim, shape.size(), "topk");
  if (k < 0 || k > shape[ax])
    throw IndexError("topk: k " + std::to_string(k) + " is out of range for dim " + std::to_string(ax) +
                     " with size " + std::to_string(shape[ax]));
  Tensor i = sorted_indices(x, dim, largest, "topk");
  if (x.dim() > 0) i = narrow(i, static_cast<int64_t>(ax), 0, k);
  i = dense_clone(*i.impl());
  if (!sorted && x.dim() > 0)  // the chosen ones in the order they sit in x
    i = gather(i, dim, sort_positions(values_as<int64_t>(*i.impl()), i.shape(), ax, false));
  return {gather(x, dim, i), i};
}

// ---- sampling ---------------------------------------------------------------------------------

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  require_defined(probs, op, "probs");
  if (!probs.is_floating_point())
    throw TypeError(std::string(op) + ": probs must be a float32 tensor, got " + to_string(probs.dtype()));
  if (probs.dim() != 1 && probs.dim() != 2)
    shape_error(op, "probs must be 1-D or 2-D, got " + to_string(probs.shape()));
  if (num_samples <= 0)
    throw ValueError(std::string(op) + ": num_samples must be positive, got " + std::to_string(num_samples));
  const int64_t K = probs.size(-1), N = probs.dim() == 2 ? probs.size(0) : 1;
  if (K == 0) throw ValueError(std::string(op) + ": probs has no categories (shape " + to_string(probs.shape()) + ")");
  if (!replacement && num_samples > K)
    throw ValueError(std::string(op) + ": cannot sample " + std::to_string(num_samples) + " > " +
                     std::to_string(K) + " categories without replacement");
  const std::vector<float> p = values_as<float>(*probs.impl());
  Generator& gen = default_generator();
  std::vector<int64_t> out(static_cast<size_t>(N * num_samples));
  std::vector<double> w(static_cast<size_t>(K)), cum(static_cast<size_t>(K));
  for (int64_t r = 0; r < N; ++r) {
    int64_t positive = 0;
    for (int64_t c = 0; c < K; ++c) {
      const float v = p[static_cast<size_t>(r * K + c)];
      if (!std::isfinite(v) || v < 0)
        throw ValueError(std::string(op) + ": probs must be finite and non-negative, got " + std::to_string(v) +
                         " at row " + std::to_string(r) + ", category " + std::to_string(c));
      w[static_cast<size_t>(c)] = v;
      positive += v > 0;
    }
    if (positive == 0)
      throw ValueError(std::string(op) + ": row " + std::to_string(r) + " of probs sums to zero");
    if (!replacement && positive < num_samples)
      throw ValueError(std::string(op) + ": row " + std::to_string(r) + " has " + std::to_string(positive) +
                       " categories of nonzero probability, too few for " + std::to_string(num_samples) +
                       " draws without replacement");
    std::partial_sum(w.begin(), w.end(), cum.begin());
    for (int64_t s = 0; s < num_samples; ++s) {
      // One draw: the first category whose running sum exceeds u · total.
      if (!replacement && s > 0) std::partial_sum(w.begin(), w.end(), cum.begin());
      const double u = (static_cast<double>(gen.next_u64() >> 11) * 0x1.0p-53) * cum.back();
      int64_t c = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
      while (c > 0 && (c >= K || w[static_cast<size_t>(c)] == 0)) --c;  // rounding at the top end
      out[static_cast<size_t>(r * num_samples + s)] = c;
      if (!replacement) w[static_cast<size_t>(c)] = 0;  // drawn: it cannot come again
    }
  }
  return make_int64(std::move(out), probs.dim() == 2 ? Shape{N, num_samples} : Shape{num_samples});
}

// ---- the tensor indexing API --------------------------------------------------------------------

indexing::TensorIndex::TensorIndex(const char* s) : kind_(Kind::Ellipsis) {
  if (!s || std::string(s) != "...")
    throw ValueError(std::string("index: a string index must be \"...\" (Ellipsis), got \"") + (s ? s : "") + "\"");
}

namespace {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

/// One advanced index after basic indexing: the dim (of the basic result) it indexes and its
/// int64 values (a bool mask has become one such index per masked dim).
struct Advanced {
  size_t dim;
  Tensor index;  // int64
};

/// x.index({...}) for the basic entries (integers, slices, None, Ellipsis, true/false): a view
/// of x. The tensors are collected in `adv`, against the dims of that view.
Tensor apply_basic(const Tensor& x, std::initializer_list<TensorIndex> indices, std::vector<Advanced>& adv) {
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case Kind::Integer: case Kind::Slice: ++consumed; break;
      case Kind::Tensor:
        require_defined(i.tensor(), "index", "an index tensor");
        consumed += i.tensor().dtype() == Dtype::Bool ? i.tensor().dim() : 1;
        break;
      case Kind::Ellipsis: ++ellipses; break;
      default: break;
    }
  }
  if (ellipses > 1) throw IndexError("index: an index can only have a single ellipsis ('...')");
  if (consumed > x.dim())
    throw IndexError("index: too many indices for tensor of dimension " + std::to_string(x.dim()) + " (got " +
                     std::to_string(consumed) + ")");
  Tensor y = x;
  int64_t d = 0;
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case Kind::Integer: {
        const int64_t n = y.size(d);
        if (i.integer() < -n || i.integer() >= n)
          throw IndexError("index: index " + std::to_string(i.integer()) + " is out of bounds for dimension " +
                           std::to_string(d) + " with size " + std::to_string(n));
        y = select(y, d, i.integer());
        break;
      }
      case Kind::Slice: {
        const indexing::Slice& s = i.slice();
        y = slice(y, d, s.start().value_or(0), s.stop().value_or(std::numeric_limits<int64_t>::max()),
                  s.step().value_or(1));
        ++d;
        break;
      }
      case Kind::None: y = unsqueeze(y, d++); break;
      case Kind::Boolean:
        y = unsqueeze(y, d);
        if (!i.boolean()) y = narrow(y, d, 0, 0);
        ++d;
        break;
      case Kind::Ellipsis: d += x.dim() - consumed; break;
      case Kind::Tensor: {
        const Tensor& t = i.tensor();
        if (t.dtype() == Dtype::Bool) {  // a mask over the next t.dim() dims: their nonzero coordinates
          if (t.dim() == 0) {
            y = unsqueeze(y, d);
            if (!t.item<bool>()) y = narrow(y, d, 0, 0);
            ++d;
            break;
          }
          for (int64_t m = 0; m < t.dim(); ++m)
            if (t.size(m) != y.size(d + m))
              throw IndexError("index: the shape of the mask " + to_string(t.shape()) + " at index " +
                               std::to_string(m) + " does not match the shape of the indexed tensor " +
                               to_string(y.shape()) + " at index " + std::to_string(d + m));
          const Tensor nz = nonzero(t);  // (n, t.dim())
          for (int64_t m = 0; m < t.dim(); ++m) adv.push_back({static_cast<size_t>(d + m), select(nz, 1, m)});
          d += t.dim();
        } else if (t.dtype() == Dtype::Int64) {
          adv.push_back({static_cast<size_t>(d++), t});
        } else {
          throw TypeError("index: tensors used as indices must be int64 or bool, got " + std::string(to_string(t.dtype())));
        }
        break;
      }
    }
  }
  return y;
}

/// Advanced indexing of y (a row-major shape Y): the output's shape, and for each output
/// element its flat offset in y. The index tensors broadcast together to B; the output is
/// B in place of the indexed dims when they are adjacent, else B first (numpy's rule).
std::pair<Shape, std::vector<size_t>> advanced_offsets(const Shape& Y, const std::vector<Advanced>& adv) {
  Shape B = adv[0].index.shape();
  for (size_t j = 1; j < adv.size(); ++j) B = broadcast_shapes(B, adv[j].index.shape(), "index");
  const std::vector<int64_t> st = row_major_strides(Y);
  // Each element of B: its offset from the indexed dims.
  std::vector<int64_t> base(static_cast<size_t>(numel_of(B)), 0);
  std::vector<bool> indexed(Y.size(), false);
  for (const Advanced& a : adv) {
    indexed[a.dim] = true;
    const int64_t n = Y[a.dim];
    const std::vector<int64_t> v = broadcast_values<int64_t>(a.index, B);
    for (size_t k = 0; k < v.size(); ++k) {
      int64_t i = v[k];
      if (i < -n || i >= n)
        throw IndexError("index: index " + std::to_string(i) + " is out of bounds for dimension " +
                         std::to_string(a.dim) + " with size " + std::to_string(n));
      base[k] += (i < 0 ? i + n : i) * st[a.dim];
    }
  }
  bool adjacent = true;
  for (size_t j = 1; j < adv.size(); ++j) adjacent = adjacent && adv[j].dim == adv[j - 1].dim + 1;
  // The output's dims: the plain dims of Y around one block that stands for B.
  const size_t first = adjacent ? adv[0].dim : 0;
  std::vector<size_t> rest;  // the dims of Y left, in order
  for (size_t d = 0; d < Y.size(); ++d)
    if (!indexed[d]) rest.push_back(d);
  Shape out;
  size_t before = 0;  // how many plain dims come before the block
  for (size_t d : rest)
    if (d < first) ++before;
  for (size_t r = 0; r < before; ++r) out.push_back(Y[rest[r]]);
  out.push_back(numel_of(B));
  for (size_t r = before; r < rest.size(); ++r) out.push_back(Y[rest[r]]);
  // Walk the output with B as one dim of numel(B) entries.
  const size_t total = static_cast<size_t>(numel_of(out));
  std::vector<size_t> offs(total);
  std::vector<int64_t> c(out.size(), 0);
  for (size_t k = 0; k < total; ++k) {
    int64_t off = 0;
    for (size_t p = 0, r = 0; p < out.size(); ++p) {
      if (p == before) off += base[static_cast<size_t>(c[p])];
      else off += c[p] * st[rest[r++]];
    }
    offs[k] = static_cast<size_t>(off);
    for (size_t p = out.size(); p-- > 0;) {
      if (++c[p] < out[p]) break;
      c[p] = 0;
    }
  }
  Shape shape(out.begin(), out.begin() + static_cast<long>(before));
  shape.insert(shape.end(), B.begin(), B.end());
  shape.insert(shape.end(), out.begin() + static_cast<long>(before) + 1, out.end());
  return {shape, offs};
}

// y = x[offsets] (advanced indexing)      dx[offsets[k]] += g[k]
Tensor take(const Tensor& x_arg, const Shape& shape, std::shared_ptr<const std::vector<size_t>> at) {
  if (!x_arg.is_floating_point()) {
    const std::vector<int64_t> v = values_as<int64_t>(*x_arg.impl());
    std::vector<int64_t> y(at->size());
    for (size_t k = 0; k < y.size(); ++k) y[k] = v[(*at)[k]];
    if (x_arg.dtype() == Dtype::Bool) return make_bool(std::vector<uint8_t>(y.begin(), y.end()), shape);
    return make_int64(std::move(y), shape);
  }
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  Array y = Array::from_shape(to_xshape(shape));
  const float* px = val(x).data();
  for (size_t k = 0; k < at->size(); ++k) y.data()[k] = px[(*at)[k]];
  const auto in = x.impl()->shape();
  return record("index", std::move(y), {x}, [at, in](BackwardContext& ctx) {
    Array dx = xt::zeros<float>(in);
    for (size_t k = 0; k < at->size(); ++k) dx.data()[(*at)[k]] += ctx.grad.data()[k];
    ctx.give(0, std::move(dx));
  });
}

/// The flat (row-major) positions in x of the elements x.index(indices) picks, in its shape.
Tensor positions(const Tensor& x, std::initializer_list<TensorIndex> indices) {
  Tensor place = make_int64([&] {
    std::vector<int64_t> v(static_cast<size_t>(x.numel()));
    std::iota(v.begin(), v.end(), 0);
    return v;
  }(), x.shape());
  return place.index(indices);
}

}  // namespace

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  require_defined(*this, "index", "the input");
  std::vector<Advanced> adv;
  Tensor y = apply_basic(*this, indices, adv);
  if (adv.empty()) return y;
  auto [shape, offs] = advanced_offsets(y.shape(), adv);
  return take(y, shape, std::make_shared<const std::vector<size_t>>(std::move(offs)));
}

// x[indices] ← value: out = x with out[pos] ← value (broadcast), then x.copy_(out)
//   dx_old = g with zeros at pos, dvalue = g[pos] (summed down to value's shape by the engine)
const Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value) const {
  require_defined(*this, "index_put_", "the input");
  require_defined(value, "index_put_", "the value");
  check_inplace(*this, "index_put_");
  if (!is_floating_point())
    throw TypeError(std::string("index_put_: only float32 tensors can be written, got ") + tg::to_string(dtype()));
  const Tensor pos = positions(*this, indices);
  const Shape target = pos.shape();
  if (!broadcasts_to(value.shape(), target))
    shape_error("index_put_", "the value's shape " + tg::to_string(value.shape()) +
                                  " does not broadcast to the indexed shape " + tg::to_string(target));
  const std::vector<int64_t> p = values_as<int64_t>(*pos.impl());
  auto at = std::make_shared<const std::vector<size_t>>(p.begin(), p.end());
  const Tensor v = value.shape() == target ? value : tg::expand(value, target);
  return copy_(write_at("index_put_", *this, v, 0.0f, 1.0f, at, identity(at->size()), Write::Assign));
}

const Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices, float value) const {
  return index_put_(indices, full({}, value));
}

// ---- Tensor methods --------------------------------------------------------------------------------

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return tg::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tg::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, float value) const {
  return tg::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return tg::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, float alpha) const {
  return tg::index_add(*this, dim, index, source, alpha);
}
// The in-place forms: the new values out of place, then copy_ (which records the write).
const Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) const {
  check_inplace(*this, "scatter_");
  return copy_(tg::scatter(*this, dim, index, src));
}
const Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, float value) const {
  check_inplace(*this, "scatter_");
  return copy_(tg::scatter(*this, dim, index, value));
}
const Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const {
  check_inplace(*this, "scatter_add_");
  return copy_(tg::scatter_add(*this, dim, index, src));
}
const Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source, float alpha) const {
  check_inplace(*this, "index_add_");
  return copy_(tg::index_add(*this, dim, index, source, alpha));
}
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return tg::topk(*this, k, dim, largest, sorted);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const { return tg::sort(*this, dim, descending); }
Tensor Tensor::argsort(int64_t dim, bool descending) const { return tg::argsort(*this, dim, descending); }

}  // namespace tg
