// The losses of tapegrad/ops/loss.h. Each is fused: one pass forward computes every element's
// loss and its derivatives with respect to input and target, and the backward closure scales
// those by the upstream gradient. (cross_entropy, nll_loss and mse_loss: ops/functional.cpp.)
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <xtensor/xbroadcast.hpp>

#include "ops/common.h"
#include "tapegrad/ops/loss.h"

namespace tg {
using namespace detail;

namespace {

/// One element's loss and its derivatives with respect to the input x and the target t.
struct Terms {
  double loss, dx, dt;
};

/// How the per-element losses are reduced: kept (none), or summed and divided by `denom`
/// (1 for Sum; 0/0 gives NaN, as PyTorch does for the mean of nothing).
struct Reducing {
  bool none;
  double denom;
};

Reducing reducing(Reduction r, int64_t numel) {
  if (r == Reduction::None) return {true, 1.0};
  return {false, r == Reduction::Sum ? 1.0 : static_cast<double>(numel)};
}

std::string mismatch(const char* op, const Tensor& x, const Tensor& t) {
  return std::string(op) + ": input shape " + to_string(x.shape()) + " does not match target shape " +
         to_string(t.shape());
}

void check_same_shape(const Tensor& x, const Tensor& t, const char* op) {
  require_defined(x, op, "the input");
  require_defined(t, op, "the target");
  if (x.shape() != t.shape()) throw ShapeError(mismatch(op, x, t));
}

/// A constant operand (weight, pos_weight): refused if it requires a gradient (none is
/// computed for it, as in PyTorch).
void check_constant(const Tensor& c, const char* op, const char* what) {
  if (c.defined() && c.requires_grad() && is_grad_enabled())
    throw ValueError(std::string(op) + ": " + what +
                     " requires a gradient, but the loss has no derivative for it (as in PyTorch); "
                     "pass it detached");
}

/// weight `w` broadcast to `shape` as a dense array, or null if w is undefined.
std::shared_ptr<Array> broadcast_weight(const Tensor& w_arg, const Tensor& x, const char* op,
                                        const char* what) {
  if (!w_arg.defined()) return nullptr;
  check_constant(w_arg, op, what);
  if (!broadcasts_to(w_arg.shape(), x.shape()))
    shape_error(op, std::string(what) + " shape " + to_string(w_arg.shape()) +
                        " does not broadcast to the input shape " + to_string(x.shape()));
  Tensor w_copy;
  const Tensor& w = dense(w_arg, w_copy);
  return std::make_shared<Array>(xt::broadcast(val(w), val(x).shape()));
}

/// Reduces `per` (one loss per element) as `r` says.
Array reduce(Array per, const Reducing& r) {
  if (r.none) return per;
  double total = 0;
  for (float v : per) total += v;
  Array out = Array::from_shape(std::vector<size_t>{});
  out() = static_cast<float>(total / r.denom);
  return out;
}

/// The gradient of a reduced loss with respect to one operand: its per-element derivative
/// `d` times the upstream gradient g (elementwise for none, else g / denom everywhere).
Array chain(const Array& d, const Array& g, const Reducing& r) {
  if (r.none) return Array(d * g);
  return Array(d * static_cast<float>(g.data()[0] / r.denom));
}

/// A loss of input x and target t (the same shape, dense) computed element by element by
/// terms(x_i, t_i, i); only the derivatives a backward will read are kept.
template <class F>
Tensor pointwise_loss(const char* op, const Tensor& x, const Tensor& t, const Reducing& r, F&& terms) {
  const size_t n = static_cast<size_t>(x.numel());
  const float* px = val(x).data();
  const float* pt = val(t).data();
  const bool rec = will_record(x, t);
  auto dx = rec && x.requires_grad() ? std::make_shared<Array>(Array::from_shape(val(x).shape())) : nullptr;
  auto dt = rec && t.requires_grad() ? std::make_shared<Array>(Array::from_shape(val(t).shape())) : nullptr;
  Array per = Array::from_shape(val(x).shape());
  for (size_t i = 0; i < n; ++i) {
    const Terms k = terms(static_cast<double>(px[i]), static_cast<double>(pt[i]), i);
    per.data()[i] = static_cast<float>(k.loss);
    if (dx) dx->data()[i] = static_cast<float>(k.dx);
    if (dt) dt->data()[i] = static_cast<float>(k.dt);
  }
  return record(op, reduce(std::move(per), r), {x, t}, [dx, dt, r](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, chain(*dx, ctx.grad, r));
    if (ctx.needs(1)) ctx.give(1, chain(*dt, ctx.grad, r));
  });
}

double sign_of(double d) { return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0; }

}  // namespace

// l = -w (t log x + (1-t) log(1-x)), logs clamped at -100
// dx = w (x - t) / max(x (1-x), 1e-12)        dt = w (log(1-x) - log x)   (as PyTorch)
Tensor binary_cross_entropy(const Tensor& x_arg, const Tensor& t_arg, const BCELossOptions& o) {
  const char* op = "binary_cross_entropy";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  const float* px = val(x).data();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!(px[i] >= 0.0f && px[i] <= 1.0f))
      throw ValueError(std::string(op) + ": input must hold probabilities in [0, 1], got " +
                       std::to_string(px[i]) + " at position " + std::to_string(i));
  const auto w = broadcast_weight(o.weight(), x, op, "weight");
  return pointwise_loss(op, x, t, reducing(o.reduction(), x.numel()), [&w](double x, double t, size_t i) {
    const double wi = w ? w->data()[i] : 1.0;
    const double lx = std::max(std::log(x), -100.0), l1x = std::max(std::log1p(-x), -100.0);
    return Terms{-wi * (t * lx + (1 - t) * l1x), wi * (x - t) / std::max(x * (1 - x), 1e-12),
                 wi * (std::log1p(-x) - std::log(x))};
  });
}

// sp = softplus(-x) = log(1 + e^-|x|) + max(-x, 0),  lw = 1 + (p - 1) t
// l = w ((1 - t) x + lw sp)      dx = w (lw σ(x) - p t)      dt = w ((p - 1) sp - x)
Tensor binary_cross_entropy_with_logits(const Tensor& x_arg, const Tensor& t_arg,
                                        const BCEWithLogitsLossOptions& o) {
  const char* op = "binary_cross_entropy_with_logits";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  const auto w = broadcast_weight(o.weight(), x, op, "weight");
  const auto pw = broadcast_weight(o.pos_weight(), x, op, "pos_weight");
  return pointwise_loss(op, x, t, reducing(o.reduction(), x.numel()), [&](double x, double t, size_t i) {
    const double wi = w ? w->data()[i] : 1.0, p = pw ? pw->data()[i] : 1.0;
    const double sp = std::log1p(std::exp(-std::abs(x))) + std::max(-x, 0.0);
    const double sig = x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
    const double lw = 1 + (p - 1) * t;
    return Terms{wi * ((1 - t) * x + lw * sp), wi * (lw * sig - p * t), wi * ((p - 1) * sp - x)};
  });
}

// d = x - t:  l = ½d²/β where |d| < β, else |d| - ½β      dx = -dt = clamp(d/β, -1, 1)
// At d = 0 with β = 0 PyTorch gives dx = dt = -1 (each side's own "d <= -β" test): so do we.
Tensor smooth_l1_loss(const Tensor& x_arg, const Tensor& t_arg, const SmoothL1LossOptions& o) {
  const char* op = "smooth_l1_loss";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  const double beta = o.beta();
  if (!(beta >= 0) || std::isinf(beta))
    throw ValueError(std::string(op) + ": beta must be finite and >= 0, got " + std::to_string(o.beta()));
  return pointwise_loss(op, x, t, reducing(o.reduction(), x.numel()), [beta](double x, double t, size_t) {
    const double d = x - t, ad = std::abs(d);
    if (ad < beta) return Terms{0.5 * d * d / beta, d / beta, -d / beta};  // never with β = 0
    return Terms{ad - 0.5 * beta, d > 0 ? 1.0 : -1.0, d < 0 ? 1.0 : -1.0};
  });
}

// d = x - t:  l = ½d² where |d| < δ, else δ(|d| - ½δ)      dx = -dt = clamp(d, -δ, δ)
Tensor huber_loss(const Tensor& x_arg, const Tensor& t_arg, const HuberLossOptions& o) {
  const char* op = "huber_loss";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  const double delta = o.delta();
  if (!(delta > 0) || std::isinf(delta))
    throw ValueError(std::string(op) + ": delta must be finite and > 0, got " + std::to_string(o.delta()));
  return pointwise_loss(op, x, t, reducing(o.reduction(), x.numel()), [delta](double x, double t, size_t) {
    const double d = x - t, ad = std::abs(d);
    if (ad < delta) return Terms{0.5 * d * d, d, -d};
    return Terms{delta * (ad - 0.5 * delta), delta * sign_of(d), -delta * sign_of(d)};
  });
}

// l = |x - t|                    dx = -dt = sign(x - t)
Tensor l1_loss(const Tensor& x_arg, const Tensor& t_arg, Reduction reduction) {
  const char* op = "l1_loss";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  return pointwise_loss(op, x, t, reducing(reduction, x.numel()), [](double x, double t, size_t) {
    const double d = x - t;
    return Terms{std::abs(d), sign_of(d), -sign_of(d)};
  });
}

// l = t (log t - x), 0 where t = 0      dx = -t      dt = log t + 1 - x
// log_target:  l = eᵗ (t - x)           dx = -eᵗ     dt = eᵗ (t - x + 1)
Tensor kl_div(const Tensor& x_arg, const Tensor& t_arg, const KLDivLossOptions& o) {
  const char* op = "kl_div";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  check_same_shape(x, t, op);
  Reducing r{false, 1.0};
  switch (o.reduction()) {
    case KLDivReduction::None: r = {true, 1.0}; break;
    case KLDivReduction::Sum: break;
    case KLDivReduction::Mean: r.denom = static_cast<double>(x.numel()); break;
    case KLDivReduction::BatchMean: r.denom = x.dim() == 0 ? 1.0 : static_cast<double>(x.shape()[0]); break;
  }
  if (o.log_target())
    return pointwise_loss(op, x, t, r, [](double x, double t, size_t) {
      const double et = std::exp(t);
      return Terms{et * (t - x), -et, et * (t - x + 1)};
    });
  return pointwise_loss(op, x, t, r, [](double x, double t, size_t) {
    // t log t is taken as 0 at t = 0 (torch.xlogy), so that a zero target adds nothing.
    return Terms{(t == 0 ? 0.0 : t * std::log(t)) - t * x, -t, std::log(t) + 1 - x};
  });
}

// At each position (all but the class dim), with q = (1 - ε) t + ε / K, p = softmax(x):
//   l = -Σ_k w_k q_k log p_k      dx_k = p_k Σ_j w_j q_j - w_k q_k      dt_k = -(1 - ε) w_k log p_k
Tensor cross_entropy_probs(const Tensor& x_arg, const Tensor& t_arg, const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  Tensor x_copy, t_copy;
  const Tensor& x = dense(x_arg, x_copy);
  const Tensor& t = dense(t_arg, t_copy);
  require_defined(x, op, "the input");
  require_defined(t, op, "the target");
  const Shape xs = x.shape();
  if (xs.empty()) shape_error(op, "input must have at least 1 dimension, got " + to_string(xs));
  if (t.shape() != xs)
    shape_error(op, "probability target shape " + to_string(t.shape()) + " does not match input shape " +
                        to_string(xs) + " (class-index targets are tg::Indices)");
  const float eps = o.label_smoothing();
  if (!(eps >= 0.0f && eps <= 1.0f))
    throw ValueError(std::string(op) + ": label_smoothing must be in [0, 1], got " + std::to_string(eps));
  if (o.ignore_index() >= 0)
    throw ValueError(std::string(op) + ": ignore_index (" + std::to_string(o.ignore_index()) +
                     ") is not supported with probability targets, as in PyTorch");
  const AxisSplit s = xs.size() == 1 ? AxisSplit{1, static_cast<size_t>(xs[0]), 1} : split_at(xs, 1);
  const Tensor& weight = o.weight();
  if (weight.defined()) {
    check_constant(weight, op, "weight");
    if (weight.shape() != Shape{static_cast<int64_t>(s.n)})
      shape_error(op, "weight shape " + to_string(weight.shape()) + ", expected (" + std::to_string(s.n) +
                          ") for input shape " + to_string(xs));
  }
  Tensor w_copy;
  const float* w = weight.defined() ? val(dense(weight, w_copy)).data() : nullptr;
  const float K = static_cast<float>(s.n);
  Shape none_shape = xs;
  none_shape.erase(none_shape.begin() + (xs.size() == 1 ? 0 : 1));
  const Reducing r = reducing(o.reduction(), static_cast<int64_t>(s.outer * s.inner));

  const bool rec = will_record(x, t);
  const float* px = val(x).data();
  const float* pt = val(t).data();
  auto dx = rec && x.requires_grad() ? std::make_shared<Array>(Array::from_shape(val(x).shape())) : nullptr;
  auto dt = rec && t.requires_grad() ? std::make_shared<Array>(Array::from_shape(val(t).shape())) : nullptr;
  Array per = Array::from_shape(to_xshape(none_shape));
  std::vector<float> logp(s.n);
  for (size_t o2 = 0; o2 < s.outer; ++o2)
    for (size_t j = 0; j < s.inner; ++j) {
      const size_t base = o2 * s.n * s.inner + j;
      auto at = [&](size_t k) { return base + k * s.inner; };
      float m = -INFINITY;
      for (size_t k = 0; k < s.n; ++k) m = std::max(m, px[at(k)]);
      double z = 0;
      for (size_t k = 0; k < s.n; ++k) z += std::exp(static_cast<double>(px[at(k)] - m));
      const float lz = static_cast<float>(std::log(z));
      double loss = 0, wq_sum = 0;
      for (size_t k = 0; k < s.n; ++k) {
        logp[k] = (px[at(k)] - m) - lz;
        const double wk = w ? w[k] : 1.0, wq = wk * ((1.0f - eps) * pt[at(k)] + eps / K);
        loss -= wq * logp[k];
        wq_sum += wq;
      }
      per.data()[o2 * s.inner + j] = static_cast<float>(loss);
      for (size_t k = 0; k < s.n; ++k) {
        const double wk = w ? w[k] : 1.0, wq = wk * ((1.0f - eps) * pt[at(k)] + eps / K);
        if (dx) dx->data()[at(k)] = static_cast<float>(std::exp(logp[k]) * wq_sum - wq);
        if (dt) dt->data()[at(k)] = static_cast<float>(-(1.0f - eps) * wk * logp[k]);
      }
    }
  // The closure gets g per position; spread it over the class dim.
  return record(op, reduce(std::move(per), r), {x, t}, [dx, dt, r, s](BackwardContext& ctx) {
    auto scaled = [&](const Array& d) {
      Array out = d;
      for (size_t o2 = 0; o2 < s.outer; ++o2)
        for (size_t j = 0; j < s.inner; ++j) {
          const float up = r.none ? ctx.grad.data()[o2 * s.inner + j]
                                  : static_cast<float>(ctx.grad.data()[0] / r.denom);
          for (size_t k = 0; k < s.n; ++k) out.data()[(o2 * s.n + k) * s.inner + j] *= up;
        }
      return out;
    };
    if (ctx.needs(0)) ctx.give(0, scaled(*dx));
    if (ctx.needs(1)) ctx.give(1, scaled(*dt));
  });
}

}  // namespace tg
