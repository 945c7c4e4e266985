// More elementwise ops (tapegrad/ops/pointwise.h): clamp, trigonometry, the activations of
// issue 16, rounding, and pow with a tensor exponent. Each op's forward, backward closure and
// derivative sit together; kernels are xtensor expressions (vectorised by xsimd).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>

#include "ops/common.h"
#include "tapegrad/ops/pointwise.h"

namespace tg {
using namespace detail;

namespace {
// The output's gradient turned into the input's gradient in its own buffer: f(g) updates g.
template <class F>
Array in_place(BackwardContext& ctx, F&& f) {
  Array g = ctx.take_grad();
  f(g);
  return g;
}

// For the piecewise-constant ops: the input's gradient is zero (as PyTorch's zeros_like).
void zero_grad_backward(BackwardContext& ctx) {
  ctx.give(0, in_place(ctx, [](Array& g) { g.fill(0.0f); }));
}
}  // namespace

// y = min(max(x, lo), hi)     dx = g · [lo <= x <= hi]
Tensor clamp(const Tensor& x_arg, std::optional<float> min, std::optional<float> max) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "clamp", "the input");
  if (!min && !max) throw ValueError("clamp: at least one of min and max must be given");
  if ((min && std::isnan(*min)) || (max && std::isnan(*max)))
    throw ValueError("clamp: a bound is NaN");
  const float lo = min ? *min : -INFINITY, hi = max ? *max : INFINITY;
  const View& v = val(x);
  // where(), not xt::clip: NaN stays NaN, and lo > hi gives hi everywhere, as in PyTorch.
  Array y = xt::where(v < lo, lo, v);
  xt::noalias(y) = xt::where(y > hi, hi, y);
  return record("clamp", std::move(y), {x}, [sx = Saved(x), lo, hi](BackwardContext& ctx) {
    const View& v = ctx.read(sx);
    ctx.give(0, Array(xt::where(v >= lo && v <= hi, ctx.grad, 0.0f)));
  });
}

// y = min(max(x, lo), hi) (broadcast)    dx = g · [lo <= x <= hi]
// dlo = g · [x < lo < hi]                  dhi = g · [x > hi or hi < lo]
Tensor clamp(const Tensor& x_arg, const Tensor& lo_arg, const Tensor& hi_arg) {
  Tensor x_copy, lo_copy, hi_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& lo = dense(lo_arg, lo_copy);
  const Tensor& hi = dense(hi_arg, hi_copy);
  require_defined(x, "clamp", "the input");
  if (!lo.defined() && !hi.defined()) throw ValueError("clamp: at least one of min and max must be given");
  Shape out = x.shape();
  if (lo.defined()) out = broadcast_shapes(out, lo.shape(), "clamp");
  if (hi.defined()) out = broadcast_shapes(out, hi.shape(), "clamp");
  // A missing bound is ±inf, which clamps nothing and makes the gradient rules below hold.
  auto bound = [](const Tensor& b, float missing) {
    if (b.defined()) return Array(val(b));
    Array a = Array::from_shape(std::vector<size_t>{});  // 0-d: broadcasts to anything
    a() = missing;
    return a;
  };
  auto l = std::make_shared<Array>(bound(lo, -INFINITY));
  auto h = std::make_shared<Array>(bound(hi, INFINITY));
  const View& v = val(x);
  // NaN in x or in a bound gives NaN, as in PyTorch.
  const Array above = xt::where(v < *l || xt::isnan(*l), *l, v);
  Array y = xt::where(above > *h || xt::isnan(*h), *h, above);
  return record("clamp", std::move(y), {x, lo, hi}, [sx = Saved(x), l, h](BackwardContext& ctx) {
    const View& v = ctx.read(sx);
    const Array& g = ctx.grad;
    if (ctx.needs(0)) ctx.give(0, Array(xt::where(v >= *l && v <= *h, g, 0.0f)));
    if (ctx.needs(1)) ctx.give(1, Array(xt::where(v < *l && *l < *h, g, 0.0f)));
    if (ctx.needs(2)) ctx.give(2, Array(xt::where(v > *h || *h < *l, g, 0.0f)));
  });
}

Tensor clamp_min(const Tensor& x, float min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, float max) { return clamp(x, std::nullopt, max); }

// y = sin(x)                  dx = g · cos(x)
Tensor sin(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "sin", "the input");
  return record("sin", Array(xt::sin(val(x))), {x}, [sx = Saved(x)](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= xt::cos(ctx.read(sx)); }));
  });
}

// y = cos(x)                  dx = -g · sin(x)
Tensor cos(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "cos", "the input");
  return record("cos", Array(xt::cos(val(x))), {x}, [sx = Saved(x)](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= -xt::sin(ctx.read(sx)); }));
  });
}

// y = log(1 + x)              dx = g / (1 + x)
Tensor log1p(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "log1p", "the input");
  return record("log1p", Array(xt::log1p(val(x))), {x}, [sx = Saved(x)](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) /= 1.0f + ctx.read(sx); }));
  });
}

// y = eˣ - 1                  dx = g · (y + 1)
Tensor expm1(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "expm1", "the input");
  auto y = make_storage(xt::expm1(val(x)));
  return record("expm1", y, {x}, [sy = Saved(y)](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= ctx.read(sy) + 1.0f; }));
  });
}

// y = 1 / x                   dx = -g · y²
Tensor reciprocal(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "reciprocal", "the input");
  auto y = make_storage(1.0f / val(x));
  return record("reciprocal", y, {x}, [sy = Saved(y)](BackwardContext& ctx) {
    const View& v = ctx.read(sy);
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= -(v * v); }));
  });
}

// y = x^(-1/2)                dx = -g · y³ / 2
Tensor rsqrt(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "rsqrt", "the input");
  auto y = make_storage(1.0f / xt::sqrt(val(x)));
  return record("rsqrt", y, {x}, [sy = Saved(y)](BackwardContext& ctx) {
    const View& v = ctx.read(sy);
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= -0.5f * v * v * v; }));
  });
}

// y = log(1 + e^(βx)) / β  (x where βx > threshold)
// dx = g · σ(βx)           (g where βx > threshold)
Tensor softplus(const Tensor& x_arg, float beta, float threshold) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "softplus", "the input");
  if (!(beta > 0.0f) || std::isinf(beta))
    throw ValueError("softplus: beta must be finite and > 0, got " + std::to_string(beta));
  if (std::isnan(threshold)) throw ValueError("softplus: threshold is NaN");
  const View& v = val(x);
  // e^(βx) may overflow to inf where βx > threshold; where() then takes x, never the inf.
  Array y = xt::where(v * beta > threshold, v, xt::log1p(xt::exp(v * beta)) / beta);
  return record("softplus", std::move(y), {x}, [sx = Saved(x), beta, threshold](BackwardContext& ctx) {
    const View& v = ctx.read(sx);
    ctx.give(0, in_place(ctx, [&](Array& g) {
               xt::noalias(g) *= xt::where(v * beta > threshold, 1.0f, 1.0f / (1.0f + xt::exp(-v * beta)));
             }));
  });
}

// y = x · σ(x)                dx = g · σ(x) · (1 + x · (1 - σ(x)))
Tensor silu(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "silu", "the input");
  const View& v = val(x);
  return record("silu", Array(v / (1.0f + xt::exp(-v))), {x}, [sx = Saved(x)](BackwardContext& ctx) {
    const View& v = ctx.read(sx);
    Array s = 1.0f / (1.0f + xt::exp(-v));
    ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= s * (1.0f + v * (1.0f - s)); }));
  });
}

// y = x > 0 ? x : a·x         dx = g · (x > 0 ? 1 : a)
Tensor leaky_relu(const Tensor& x_arg, float negative_slope) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "leaky_relu", "the input");
  if (std::isnan(negative_slope)) throw ValueError("leaky_relu: negative_slope is NaN");
  const View& v = val(x);
  const float a = negative_slope;
  return record("leaky_relu", Array(xt::where(v > 0.0f, v, a * v)), {x},
                [sx = Saved(x), a](BackwardContext& ctx) {
                  const View& v = ctx.read(sx);
                  ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= xt::where(v > 0.0f, 1.0f, a); }));
                });
}

// y = x > 0 ? x : α(eˣ - 1)   dx = g · (x > 0 ? 1 : α eˣ)
Tensor elu(const Tensor& x_arg, float alpha) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "elu", "the input");
  if (std::isnan(alpha)) throw ValueError("elu: alpha is NaN");
  const View& v = val(x);
  return record("elu", Array(xt::where(v > 0.0f, v, alpha * xt::expm1(v))), {x},
                [sx = Saved(x), alpha](BackwardContext& ctx) {
                  const View& v = ctx.read(sx);
                  ctx.give(0, in_place(ctx, [&](Array& g) {
                             xt::noalias(g) *= xt::where(v > 0.0f, 1.0f, alpha * xt::exp(v));
                           }));
                });
}

// y = sign(x)                 dx = 0
Tensor sign(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "sign", "the input");
  const View& v = val(x);
  Array y = xt::where(v > 0.0f, 1.0f, xt::where(v < 0.0f, -1.0f, 0.0f));  // NaN -> 0, as PyTorch
  return record("sign", std::move(y), {x}, zero_grad_backward);
}

// y = round(x), halves to even   dx = 0
Tensor round(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "round", "the input");
  Array y = Array::from_shape(val(x).shape());
  const float* in = val(x).data();
  float* out = y.data();
  // nearbyint in the default rounding mode (to nearest, ties to even); std::round would
  // take halves away from zero.
  for (size_t i = 0, n = y.size(); i < n; ++i) out[i] = std::nearbyint(in[i]);
  return record("round", std::move(y), {x}, zero_grad_backward);
}

// y = ⌊x⌋                     dx = 0
Tensor floor(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "floor", "the input");
  return record("floor", Array(xt::floor(val(x))), {x}, zero_grad_backward);
}

// y = ⌈x⌉                     dx = 0
Tensor ceil(const Tensor& x_arg) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  require_defined(x, "ceil", "the input");
  return record("ceil", Array(xt::ceil(val(x))), {x}, zero_grad_backward);
}

// y = aᵇ (broadcast)   da = g · b · a^(b-1)  (0 where b = 0)
//                      db = g · y · log(a)   (0 where a = 0 and b >= 0)
namespace {
// xᵉ with PyTorch's (and C's) values at a zero base, which xsimd's pow does not give on every
// instruction set (0⁰ came out 0 in the SSE2 build): 0⁰ = 1, 0ᵉ = 0 for e > 0, inf for e < 0.
template <class X, class E>
Array pow_exact(const X& x, const E& e) {
  return xt::where(xt::equal(x, 0.0f), xt::where(xt::equal(e, 0.0f), 1.0f, xt::where(e > 0.0f, 0.0f, INFINITY)),
                   xt::pow(x, e));
}
}  // namespace

Tensor pow(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  require_defined(a, "pow", "the base");
  require_defined(b, "pow", "the exponent");
  if (val(a).shape() != val(b).shape()) broadcast_shapes(a.shape(), b.shape(), "pow");
  const bool rec = will_record(a, b);
  auto y = make_storage(pow_exact(val(a), val(b)));
  const Saved sy = rec && b.requires_grad() ? Saved(y) : Saved();
  return record("pow", y, {a, b}, [sa = Saved(a), sb = Saved(b), sy](BackwardContext& ctx) {
    const View& va = ctx.read(sa);
    const View& vb = ctx.read(sb);
    if (ctx.needs(0))
      ctx.give(0, Array(xt::where(xt::equal(vb, 0.0f), 0.0f, ctx.grad * vb * pow_exact(va, Array(vb - 1.0f)))));
    if (ctx.needs(1))
      ctx.give(1, Array(xt::where(xt::equal(va, 0.0f) && vb >= 0.0f, 0.0f, ctx.grad * ctx.read(sy) * xt::log(va))));
  });
}

// y = sᵇ               db = g · y · log(s)   (0 where s = 0 and b >= 0)
Tensor pow(float s, const Tensor& b_arg) {
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  require_defined(b, "pow", "the exponent");
  auto y = make_storage(pow_exact(xt::xscalar<float>(s), val(b)));
  return record("pow_scalar_base", y, {b}, [sb = Saved(b), sy = Saved(y), s](BackwardContext& ctx) {
    if (s == 0.0f)  // log(0) = -inf, but y = 0 there for b > 0 (and 1 at b = 0)
      ctx.give(0, Array(xt::where(ctx.read(sb) >= 0.0f, 0.0f, ctx.grad * ctx.read(sy) * -INFINITY)));
    else
      ctx.give(0, in_place(ctx, [&](Array& g) { xt::noalias(g) *= ctx.read(sy) * std::log(s); }));
  });
}

}  // namespace tg
