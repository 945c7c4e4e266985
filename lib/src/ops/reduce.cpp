// Reductions and the softmax family. Reductions are evaluated immediately (xtensor's lazy
// reductions are ten times slower); softmax runs as plain loops over (outer, n, inner).
#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xreducer.hpp>

#include "backend/parallel.h"
#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {
// Normalised, sorted, de-duplicated axes; empty `axes` means all of them.
std::vector<size_t> reduce_axes(const std::vector<int64_t>& axes, size_t rank, const char* op) {
  std::vector<size_t> out;
  if (axes.empty()) {
    for (size_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (auto a : axes) out.push_back(norm_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw IndexError(std::string(op) + ": an axis appears twice");
  return out;
}

Shape keepdim_shape(const Shape& in, const std::vector<size_t>& axes) {
  Shape k = in;
  for (auto a : axes) k[a] = 1;
  return k;
}

Tensor sum_impl(const Tensor& a, const std::vector<int64_t>& axes_in, bool keepdim, float scale,
                const char* name) {
  require_defined(a, name, "the input");
  const Shape in = a.shape();
  const auto axes = reduce_axes(axes_in, in.size(), name);
  const Shape kshape = keepdim_shape(in, axes);
  // xtensor's immediate sum crashes on an empty input; a sum over no elements is 0.
  Array r = val(a).size() == 0 ? Array(xt::zeros<float>(to_xshape(kshape)))
                               : Array(xt::sum(val(a), axes, xt::evaluation_strategy::immediate));
  if (scale != 1.0f) r *= scale;
  if (val(a).size() == 0 && !keepdim) {  // drop the reduced dims, as the sum would
    Shape drop;
    for (size_t d = 0; d < in.size(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) drop.push_back(in[d]);
    r.reshape(to_xshape(drop));
  }
  if (keepdim) r.reshape(to_xshape(kshape));
  // dx = broadcast(g) * scale
  return record(name, std::move(r), {a}, [in, kshape, scale](BackwardContext& ctx) {
    Array gk = ctx.grad;
    gk.reshape(to_xshape(kshape));
    Array g = xt::broadcast(gk, to_xshape(in));
    if (scale != 1.0f) g *= scale;
    ctx.give(0, std::move(g));
  });
}

int64_t count_over(const Shape& in, const std::vector<int64_t>& axes_in, const char* op) {
  int64_t n = 1;
  for (auto a : reduce_axes(axes_in, in.size(), op)) n *= in[a];
  return n;
}
}  // namespace

Tensor sum(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  return sum_impl(a, {}, false, 1.0f, "sum");
}
Tensor sum(const Tensor& a_arg, const std::vector<int64_t>& axes, bool keepdim) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  return sum_impl(a, axes, keepdim, 1.0f, "sum");
}
Tensor mean(const Tensor& a) { return mean(a, {}, false); }
Tensor mean(const Tensor& a_arg, const std::vector<int64_t>& axes, bool keepdim) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "mean", "the input");
  const int64_t n = count_over(a.shape(), axes, "mean");
  if (n == 0) throw ShapeError("mean: reducing over zero elements (shape " + to_string(a.shape()) + ")");
  return sum_impl(a, axes, keepdim, 1.0f / static_cast<float>(n), "mean");
}

namespace {
// values = max (min) over `dim`, idx = its first position      dx = g at idx, 0 elsewhere
// NaN wins over any number (the first NaN), as in PyTorch.
std::tuple<Tensor, Tensor> extreme(const Tensor& a_arg, int64_t dim, bool keepdim, bool largest,
                                   const char* op) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, op, "the input");
  const Shape in = a.shape();
  const size_t ax = in.empty() ? (norm_axis(dim, 1, op), 0) : norm_axis(dim, in.size(), op);
  const Shape in_nd = in.empty() ? Shape{1} : in;  // a 0-d tensor reduces as [1]
  if (in_nd[ax] == 0)
    throw ShapeError(std::string(op) + ": reducing over an empty dim (shape " + to_string(in) + ")");
  const AxisSplit s = split_at(in_nd, ax);
  Shape out = in;
  if (!in.empty()) {
    if (keepdim) out[ax] = 1;
    else out.erase(out.begin() + static_cast<long>(ax));
  }
  Array v = Array::from_shape(to_xshape(out));
  std::vector<int64_t> idx(s.outer * s.inner);
  const float* x = val(a).data();
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t j = 0; j < s.inner; ++j) {
      const float* p = x + o * s.n * s.inner + j;
      size_t best = 0;
      for (size_t i = 1; i < s.n && !std::isnan(p[best * s.inner]); ++i) {
        const float c = p[i * s.inner], b = p[best * s.inner];
        if ((largest ? c > b : c < b) || std::isnan(c)) best = i;
      }
      v.data()[o * s.inner + j] = p[best * s.inner];
      idx[o * s.inner + j] = static_cast<int64_t>(best);
    }
  Tensor indices = make_int64(idx, out);
  Tensor values = record(op, std::move(v), {a}, [in, s, idx](BackwardContext& ctx) {
    Array g = xt::zeros<float>(to_xshape(in));
    const float* gy = ctx.grad.data();
    for (size_t o = 0; o < s.outer; ++o)
      for (size_t j = 0; j < s.inner; ++j)
        g.data()[(o * s.n + static_cast<size_t>(idx[o * s.inner + j])) * s.inner + j] +=
            gy[o * s.inner + j];
    ctx.give(0, std::move(g));
  });
  return {values, indices};
}
}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, true, "max");
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme(a, dim, keepdim, false, "min");
}

namespace {
// Row-wise stable softmax (log = false) or log-softmax (log = true) over (outer, n, inner),
// the outer rows split across tapegrad's threads.
Array softmax_forward(const View& x, const AxisSplit& s, bool log) {
  Array y = Array::from_shape(x.shape());
  const float* px = x.data();
  float* py = y.data();
  for_each_row(s.outer, s.n * s.inner, kGrain / 8, [&](size_t o) {
    for (size_t j = 0; j < s.inner; ++j) {
      const size_t base = o * s.n * s.inner + j;
      float m = -std::numeric_limits<float>::infinity();
      for (size_t i = 0; i < s.n; ++i) m = std::max(m, px[base + i * s.inner]);
      if (!std::isfinite(m)) m = 0.0f;  // all -inf (or +inf): let the arithmetic speak
      double z = 0;
      for (size_t i = 0; i < s.n; ++i) z += std::exp(static_cast<double>(px[base + i * s.inner] - m));
      if (log) {
        // (x - m) - log z, not x - (m + log z): near |x| = 1000 the float m + log z would
        // round to a step of 6e-5.
        const float lz = static_cast<float>(std::log(z));
        for (size_t i = 0; i < s.n; ++i) py[base + i * s.inner] = (px[base + i * s.inner] - m) - lz;
      } else {
        const double inv = 1.0 / z;
        for (size_t i = 0; i < s.n; ++i)
          py[base + i * s.inner] =
              static_cast<float>(std::exp(static_cast<double>(px[base + i * s.inner] - m)) * inv);
      }
    }
  });
  return y;
}
}  // namespace

// y = e^x / Σe^x            dx = y (g - Σ g y)
Tensor softmax(const Tensor& a_arg, int64_t axis) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "softmax", "the input");
  const Shape in = a.shape();
  const AxisSplit s = split_at(in, norm_axis(axis, in.size(), "softmax"));
  auto y = make_storage(softmax_forward(val(a), s, false));
  return record("softmax", y, {a}, [sy = Saved(y), s](BackwardContext& ctx) {
    ctx.give(0, softmax_backward(ctx.read(sy), ctx.grad, s, false));
  });
}

// y = x - log Σe^x          dx = g - softmax(x) Σ g
Tensor log_softmax(const Tensor& a_arg, int64_t axis) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "log_softmax", "the input");
  const Shape in = a.shape();
  const AxisSplit s = split_at(in, norm_axis(axis, in.size(), "log_softmax"));
  auto y = make_storage(softmax_forward(val(a), s, true));
  return record("log_softmax", y, {a}, [sy = Saved(y), s](BackwardContext& ctx) {
    ctx.give(0, softmax_backward(ctx.read(sy), ctx.grad, s, true));
  });
}

}  // namespace tg
