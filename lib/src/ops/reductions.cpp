// The reductions of tapegrad/ops/reduce.h: max/min of a whole tensor, amax/amin, cumsum,
// logsumexp, var/std, norm and prod (sum, mean, max along a dim and softmax are reduce.cpp).
//
// Each reduction over a set of dims walks the input once in row-major order, with a map from
// every input element to the output element it lands in (ReduceMap); sums accumulate in
// double. Legend: i = an input element, o = to[i] its output element, n = elements per output.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/common.h"

namespace tg {
using namespace detail;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// The output element of every input element (row-major), for an input of shape `in`
/// reduced to `kept` (the reduced dims as 1). Backward closures keep the two shapes and
/// call this again, rather than holding an index per element.
std::vector<int64_t> targets(const Shape& in, const Shape& kept) {
  return strided_offsets(in, broadcast_strides(kept, in));
}

/// Where each input element goes in a reduction over some dims.
struct ReduceMap {
  Shape in, kept, out;       // the input's shape; with the reduced dims as 1; the result's
  std::vector<int64_t> to;   // input element (row-major) -> output element
  size_t n_out = 1;          // output elements
  int64_t count = 1;         // input elements per output element (n)
};

ReduceMap reduce_map(const Shape& in, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  ReduceMap m;
  m.in = in;
  std::vector<bool> reduced(in.size(), dims.empty());
  for (auto d : dims) {
    const size_t a = norm_axis(d, std::max<size_t>(in.size(), 1), op);  // a 0-d x has dim 0 (or -1)
    if (in.empty()) continue;
    if (reduced[a]) throw IndexError(std::string(op) + ": dim " + std::to_string(d) + " appears twice in the dims");
    reduced[a] = true;
  }
  Shape& kept = m.kept;
  kept = in;
  for (size_t i = 0; i < in.size(); ++i)
    if (reduced[i]) {
      m.count *= in[i];
      kept[i] = 1;
    } else if (!keepdim) {
      m.out.push_back(in[i]);
    }
  if (keepdim) m.out = kept;
  m.n_out = static_cast<size_t>(numel_of(kept));
  m.to = targets(in, kept);
  return m;
}

/// The contiguous input, checked, and its reduce map.
struct ReduceInput {
  Tensor copy;
  const Tensor* x;
  ReduceMap m;
  ReduceInput(const Tensor& x_arg, const std::vector<int64_t>& dims, bool keepdim, const char* op)
      : x(&dense(x_arg, copy)) {
    require_defined(*x, op, "the input");
    m = reduce_map(x->shape(), dims, keepdim, op);
  }
};

// y = max (or min) over dims                dx = g / (number of ties) where x = y, else 0
// whole: torch.max(x) (a NaN max sends g to the NaNs); else torch.amax (a NaN row gives NaN).
Tensor extreme(const Tensor& x_arg, const std::vector<int64_t>& dims, bool keepdim, bool is_max,
               bool whole, const char* op) {
  const ReduceInput r(x_arg, dims, keepdim, op);
  const ReduceMap& m = r.m;
  if (m.count == 0 && m.n_out > 0)
    shape_error(op, "reducing over zero elements (shape " + to_string(m.in) + "); PyTorch refuses too");
  Array y = Array::from_shape(to_xshape(m.out));
  y.fill(is_max ? -kInf : kInf);
  const float* px = val(*r.x).data();
  float* py = y.data();
  for (size_t i = 0; i < m.to.size(); ++i) {
    float& best = py[m.to[i]];
    const float v = px[i];
    if (!std::isnan(best) && (std::isnan(v) || (is_max ? v > best : v < best))) best = v;
  }
  auto ys = make_storage(std::move(y));
  return record(op, ys, {*r.x},
                [sx = Saved(*r.x), sy = Saved(ys), in = m.in, kept = m.kept, n_out = m.n_out, whole](BackwardContext& ctx) {
                  const std::vector<int64_t> to = targets(in, kept);
                  const float* x = ctx.read(sx).data();
                  const float* y = ctx.read(sy).data();
                  auto tie = [&](size_t i) {
                    const float yo = y[to[i]];
                    return whole && std::isnan(yo) ? std::isnan(x[i]) : x[i] == yo;
                  };
                  std::vector<float> ties(n_out, 0.0f);
                  for (size_t i = 0; i < to.size(); ++i) ties[to[i]] += tie(i) ? 1.0f : 0.0f;
                  Array g = Array::from_shape(ctx.read(sx).shape());
                  for (size_t i = 0; i < to.size(); ++i) {
                    const float share = ctx.grad.data()[to[i]] / ties[to[i]];
                    // amax multiplies by the mask (a row without ties gets NaN, as PyTorch);
                    // max fills only the ties.
                    g.data()[i] = whole ? (tie(i) ? share : 0.0f) : share * (tie(i) ? 1.0f : 0.0f);
                  }
                  ctx.give(0, std::move(g));
                });
}

}  // namespace

Tensor max(const Tensor& x) {
  require_defined(x, "max", "the input");
  if (x.numel() == 0) shape_error("max", "the input is empty (shape " + to_string(x.shape()) + ")");
  return extreme(x, {}, false, true, true, "max");
}
Tensor min(const Tensor& x) {
  require_defined(x, "min", "the input");
  if (x.numel() == 0) shape_error("min", "the input is empty (shape " + to_string(x.shape()) + ")");
  return extreme(x, {}, false, false, true, "min");
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme(x, dims, keepdim, true, false, "amax");
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme(x, dims, keepdim, false, false, "amin");
}

// y[i] = Σ_{k<=i} x[k] along dim            dx[k] = Σ_{i>=k} g[i] (the reversed cumsum of g)
Tensor cumsum(const Tensor& x_arg, int64_t dim) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "cumsum", "the input");
  const Shape in = x.shape();
  const AxisSplit s = split_at(in, norm_axis(dim, std::max<size_t>(in.size(), 1), "cumsum"));
  auto scan = [s](const float* src, float* dst, bool reversed) {
    for (size_t o = 0; o < s.outer; ++o)
      for (size_t j = 0; j < s.inner; ++j) {
        double acc = 0;
        for (size_t step = 0; step < s.n; ++step) {
          const size_t i = reversed ? s.n - 1 - step : step;
          const size_t k = (o * s.n + i) * s.inner + j;
          acc += src[k];
          dst[k] = static_cast<float>(acc);
        }
      }
  };
  Array y = Array::from_shape(val(x).shape());
  scan(val(x).data(), y.data(), false);
  return record("cumsum", std::move(y), {x}, [scan](BackwardContext& ctx) {
    Array g = Array::from_shape(ctx.grad.shape());
    scan(ctx.grad.data(), g.data(), true);
    ctx.give(0, std::move(g));
  });
}

// y = m + log Σ exp(x - m), m = max (0 where it is ±inf)        dx = g · exp(x - y)
Tensor logsumexp(const Tensor& x_arg, const std::vector<int64_t>& dims, bool keepdim) {
  const ReduceInput r(x_arg, dims, keepdim, "logsumexp");
  const ReduceMap& m = r.m;
  const float* px = val(*r.x).data();
  std::vector<float> mx(m.n_out, -kInf);
  for (size_t i = 0; i < m.to.size(); ++i)
    if (!std::isnan(mx[m.to[i]]) && (std::isnan(px[i]) || px[i] > mx[m.to[i]])) mx[m.to[i]] = px[i];
  for (float& v : mx)
    if (std::isinf(v)) v = 0.0f;  // a row of -inf gives log 0 = -inf; one +inf gives +inf
  std::vector<double> z(m.n_out, 0.0);
  for (size_t i = 0; i < m.to.size(); ++i) z[m.to[i]] += std::exp(static_cast<double>(px[i] - mx[m.to[i]]));
  Array y = Array::from_shape(to_xshape(m.out));
  for (size_t o = 0; o < m.n_out; ++o) y.data()[o] = static_cast<float>(std::log(z[o])) + mx[o];
  auto ys = make_storage(std::move(y));
  return record("logsumexp", ys, {*r.x},
                [sx = Saved(*r.x), sy = Saved(ys), in = m.in, kept = m.kept](BackwardContext& ctx) {
                  const std::vector<int64_t> to = targets(in, kept);
                  const View& x = ctx.read(sx);
                  const float* y = ctx.read(sy).data();
                  Array g = Array::from_shape(x.shape());
                  for (size_t i = 0; i < to.size(); ++i)
                    g.data()[i] = ctx.grad.data()[to[i]] * std::exp(x.data()[i] - y[to[i]]);
                  ctx.give(0, std::move(g));
                });
}

namespace {
// var: y = Σ (x - x̄)² / (n - c), c = 1 if unbiased       dx = 2 / (n - c) · g · (x - x̄)
// std: y = √var                                          dx = the same with g / (2y) (0 where y = 0)
Tensor variance(const Tensor& x_arg, const std::vector<int64_t>& dims, bool unbiased, bool keepdim,
                bool root, const char* op) {
  const ReduceInput r(x_arg, dims, keepdim, op);
  const ReduceMap& m = r.m;
  const float* px = val(*r.x).data();
  std::vector<double> mean(m.n_out, 0.0), ss(m.n_out, 0.0);
  for (size_t i = 0; i < m.to.size(); ++i) mean[m.to[i]] += px[i];
  for (double& v : mean) v /= static_cast<double>(m.count);  // 0/0 = NaN for no elements
  for (size_t i = 0; i < m.to.size(); ++i) {
    const double d = px[i] - mean[m.to[i]];
    ss[m.to[i]] += d * d;
  }
  // PyTorch divides by max(0, n - c): 0/0 = NaN for n = 1 unbiased (and for n = 0).
  const double denom = std::max<double>(0.0, static_cast<double>(m.count) - (unbiased ? 1.0 : 0.0));
  Array y = Array::from_shape(to_xshape(m.out));
  for (size_t o = 0; o < m.n_out; ++o) {
    const double v = ss[o] / denom;
    y.data()[o] = static_cast<float>(root ? std::sqrt(v) : v);
  }
  std::vector<float> meanf(mean.begin(), mean.end());
  auto ys = make_storage(std::move(y));
  return record(op, ys, {*r.x},
                [sx = Saved(*r.x), sy = Saved(ys), in = m.in, kept = m.kept, meanf, denom, root](BackwardContext& ctx) {
                  const std::vector<int64_t> to = targets(in, kept);
                  const View& x = ctx.read(sx);
                  const float* y = ctx.read(sy).data();
                  const float scale = static_cast<float>(2.0 / denom);
                  Array g = Array::from_shape(x.shape());
                  for (size_t i = 0; i < to.size(); ++i) {
                    const size_t o = static_cast<size_t>(to[i]);
                    float go = ctx.grad.data()[o];
                    if (root) go = y[o] == 0.0f ? 0.0f : go / (2.0f * y[o]);
                    g.data()[i] = scale * go * (x.data()[i] - meanf[o]);
                  }
                  ctx.give(0, std::move(g));
                });
}
}  // namespace

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  return variance(x, dims, unbiased, keepdim, false, "var");
}
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  return variance(x, dims, unbiased, keepdim, true, "std");
}

// y = (Σ |x|^p)^(1/p)          dx = g · sgn(x) |x|^(p-1) / y^(p-1)       (0 where y = 0)
//   p = 2: g x / y     p = 1: g sgn(x)     p = ±inf: g sgn(x) / (ties) where |x| = y
//   p < 1: g sgn(x) |x|^(p-1) y^(1-p), 0 where x = 0      p = 0 (a count): no gradient (0)
Tensor norm(const Tensor& x_arg, double p, const std::vector<int64_t>& dims, bool keepdim) {
  if (std::isnan(p)) throw ValueError("norm: p is NaN");
  const ReduceInput r(x_arg, dims, keepdim, "norm");
  const ReduceMap& m = r.m;
  const bool inf = std::isinf(p);
  if (inf && m.count == 0 && m.n_out > 0)
    shape_error("norm", "the infinity norm of zero elements (shape " + to_string(m.in) + ") is undefined; PyTorch refuses too");
  const float* px = val(*r.x).data();
  std::vector<double> acc(m.n_out, inf ? (p > 0 ? 0.0 : INFINITY) : 0.0);
  for (size_t i = 0; i < m.to.size(); ++i) {
    const double a = std::abs(static_cast<double>(px[i]));
    double& s = acc[m.to[i]];
    if (inf) s = std::isnan(s) || std::isnan(a) ? NAN : (p > 0 ? std::max(s, a) : std::min(s, a));
    else if (p == 0) s += a != 0.0 ? 1.0 : 0.0;
    else if (p == 1) s += a;
    else if (p == 2) s += a * a;
    else s += std::pow(a, p);
  }
  Array y = Array::from_shape(to_xshape(m.out));
  for (size_t o = 0; o < m.n_out; ++o) {
    const double s = acc[o];
    y.data()[o] = static_cast<float>(inf || p == 0 || p == 1 ? s : p == 2 ? std::sqrt(s) : std::pow(s, 1.0 / p));
  }
  auto ys = make_storage(std::move(y));
  return record("norm", ys, {*r.x},
                [sx = Saved(*r.x), sy = Saved(ys), in = m.in, kept = m.kept, n_out = m.n_out, p, inf](BackwardContext& ctx) {
                  const std::vector<int64_t> to = targets(in, kept);
                  const View& xv = ctx.read(sx);
                  const float* x = xv.data();
                  const float* y = ctx.read(sy).data();
                  const float* gy = ctx.grad.data();
                  auto sgn = [](float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f; };
                  const float pf = static_cast<float>(p);
                  std::vector<float> ties;
                  if (inf) {
                    ties.assign(n_out, 0.0f);
                    for (size_t i = 0; i < to.size(); ++i)
                      ties[to[i]] += std::abs(x[i]) == y[to[i]] || std::isnan(x[i]) ? 1.0f : 0.0f;
                  }
                  Array g = Array::from_shape(xv.shape());
                  for (size_t i = 0; i < to.size(); ++i) {
                    const size_t o = static_cast<size_t>(to[i]);
                    const float xi = x[i], yo = y[o], go = gy[o];
                    float d;
                    if (p == 0) {
                      d = 0.0f;
                    } else if (p == 1) {
                      d = sgn(xi) * go;
                    } else if (p == 2) {
                      d = yo == 0.0f ? 0.0f : go * (xi / yo);
                    } else if (inf) {
                      const bool tie = std::abs(xi) == yo || std::isnan(xi);
                      d = sgn(xi) * ((go / ties[o]) * (tie ? 1.0f : 0.0f));
                    } else if (p < 1) {
                      d = xi == 0.0f ? 0.0f : sgn(xi) * std::pow(std::abs(xi), pf - 1.0f) * go * std::pow(yo, 1.0f - pf);
                    } else {
                      d = yo == 0.0f ? 0.0f : sgn(xi) * std::pow(std::abs(xi), pf - 1.0f) * (go / std::pow(yo, pf - 1.0f));
                    }
                    g.data()[i] = d;
                  }
                  ctx.give(0, std::move(g));
                });
}

namespace {
// y = Π x along the axis of s          dx_i = g · Π_{k≠i} x_k = g · (prefix product) · (suffix product)
Tensor product(const Tensor& x, const AxisSplit& s, Shape out) {
  const float* px = val(x).data();
  Array y = Array::from_shape(to_xshape(out));
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t j = 0; j < s.inner; ++j) {
      double acc = 1.0;
      for (size_t i = 0; i < s.n; ++i) acc *= px[(o * s.n + i) * s.inner + j];
      y.data()[o * s.inner + j] = static_cast<float>(acc);
    }
  return record("prod", std::move(y), {x}, [sx = Saved(x), s](BackwardContext& ctx) {
    const View& xv = ctx.read(sx);
    const float* x = xv.data();
    Array g = Array::from_shape(xv.shape());
    std::vector<double> suffix(s.n + 1);
    for (size_t o = 0; o < s.outer; ++o)
      for (size_t j = 0; j < s.inner; ++j) {
        auto at = [&](size_t i) { return (o * s.n + i) * s.inner + j; };
        suffix[s.n] = 1.0;
        for (size_t i = s.n; i-- > 0;) suffix[i] = suffix[i + 1] * x[at(i)];
        double prefix = 1.0;
        const double go = ctx.grad.data()[o * s.inner + j];
        for (size_t i = 0; i < s.n; ++i) {
          g.data()[at(i)] = static_cast<float>(go * prefix * suffix[i + 1]);
          prefix *= x[at(i)];
        }
      }
    ctx.give(0, std::move(g));
  });
}
}  // namespace

Tensor prod(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "prod", "the input");
  AxisSplit s;
  s.n = static_cast<size_t>(x.numel());
  return product(x, s, {});
}

Tensor prod(const Tensor& x_arg, int64_t dim, bool keepdim) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "prod", "the input");
  const Shape in = x.shape();
  if (in.empty()) {
    norm_axis(dim, 1, "prod");
    return product(x, AxisSplit(), {});
  }
  const size_t ax = norm_axis(dim, in.size(), "prod");
  Shape out = in;
  if (keepdim) out[ax] = 1;
  else out.erase(out.begin() + static_cast<long>(ax));
  return product(x, split_at(in, ax), out);
}

}  // namespace tg
