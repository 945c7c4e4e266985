// Neural-network ops: dropout, layer_norm and the losses. layer_norm and cross_entropy are
// fused: one pass forward and one backward closure each, instead of a dozen small ops.
#include <cmath>
#include <limits>
#include <optional>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>

#include "backend/parallel.h"
#include "ops/common.h"
#include "ops/lane_sum.h"
#include "ops/vec_ops.h"
#include "tapegrad/random.h"

namespace tg {
using namespace detail;

// y = x * m / (1 - p), m ~ Bernoulli(1 - p)      dx = g * m / (1 - p)
Tensor dropout(const Tensor& a_arg, float p, bool training) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "dropout", "the input");
  if (!(p >= 0.0f && p <= 1.0f))
    throw ValueError("dropout: probability must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0.0f) return a;
  auto mask = std::make_shared<Array>(Array::from_shape(val(a).shape()));
  const float scale = p == 1.0f ? 0.0f : 1.0f / (1.0f - p);
  default_generator().fill_uniform(mask->data(), static_cast<int64_t>(mask->size()));  // one lock
  for (auto& m : *mask) m = m >= p ? scale : 0.0f;
  return record("dropout", Array(val(a) * *mask), {a},
                [mask](BackwardContext& ctx) { ctx.give(0, Array(ctx.grad * *mask)); });
}

namespace {

/// Checks layer_norm's arguments for an input of shape xs; returns N = prod(normalized_shape).
size_t check_layer_norm(const char* op, const Shape& xs, const Shape& normalized_shape,
                        const Tensor& weight, const Tensor& bias, float eps) {
  const size_t k = normalized_shape.size();
  bool ok = k > 0 && xs.size() >= k;
  for (size_t i = 0; ok && i < k; ++i) ok = xs[xs.size() - k + i] == normalized_shape[i];
  if (!ok)
    shape_error(op, "input shape " + to_string(xs) + " does not end with normalized_shape " +
                        to_string(normalized_shape));
  if (weight.defined() && weight.shape() != normalized_shape)
    shape_error(op, "weight shape " + to_string(weight.shape()) + ", expected " +
                        to_string(normalized_shape));
  if (bias.defined() && bias.shape() != normalized_shape)
    shape_error(op, "bias shape " + to_string(bias.shape()) + ", expected " +
                        to_string(normalized_shape));
  if (!(eps >= 0.0f) || std::isinf(eps))
    throw ValueError(std::string(op) + ": eps must be finite and >= 0, got " + std::to_string(eps));
  return static_cast<size_t>(numel_of(normalized_shape));
}

/// One row x (N) of the forward: its mean μ and rstd, y = x̂·w + b (w, b null: 1, 0), and x̂
/// into h unless h is null. Two passes over the row for the moments, sums in vector lanes.
void norm_row(const float* x, size_t N, float eps, const float* w, const float* b, float* y,
              float* h, float& mu, float& rstd) {
  mu = static_cast<float>(lane_sum(N, [&](size_t i) { return x[i]; }) / N);
  const double var = lane_sum(N, [&](size_t i) {
                       const float d = x[i] - mu;
                       return d * d;
                     }) / static_cast<double>(N);
  const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
  rstd = rs;
  if (w && b) {  // the common case, in loops without a branch (they vectorize)
    if (h) {
      for (size_t i = 0; i < N; ++i) {
        h[i] = (x[i] - mu) * rs;
        y[i] = h[i] * w[i] + b[i];
      }
    } else {
      for (size_t i = 0; i < N; ++i) y[i] = (x[i] - mu) * rs * w[i] + b[i];
    }
    return;
  }
  for (size_t i = 0; i < N; ++i) {
    const float hi = (x[i] - mu) * rs;
    if (h) h[i] = hi;
    y[i] = hi * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
  }
}

/// dw += Σ_r g[r]·x̂[r] and db += Σ_r g[r] (either null: not wanted) over g (rows, N), where
/// hat(r, i) gives x̂. Each column sums its rows in order; the columns are split across
/// tapegrad's threads, so the sums are the same at any thread count. Runs before dx is
/// written into g.
template <class Hat>
void norm_columns_backward(const float* g, const Hat& hat, size_t rows, size_t N, float* dw,
                           float* db) {
  if (!dw && !db) return;
  const auto min_cols = static_cast<int64_t>(kGrain / std::max<size_t>(rows, 1) + 1);
  for_range(static_cast<int64_t>(N), min_cols, [&](int64_t c0, int64_t c1) {
    const auto b = static_cast<size_t>(c0), e = static_cast<size_t>(c1);
    for (size_t r = 0; r < rows; ++r) {
      const float* gr = g + r * N;
      if (dw)
        for (size_t i = b; i < e; ++i) dw[i] += gr[i] * hat(r, i);
      if (db)
        for (size_t i = b; i < e; ++i) db[i] += gr[i];
    }
  });
}

/// One row of dx from the output's gradient g (N), where h(i) gives x̂:
///   out = add + rstd·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)),  ĝ = g·w   (add null: 0; out may be g or add).
template <class Hat>
void norm_row_backward(const float* g, const Hat& h, const float* w, float rstd, size_t N,
                       const float* add, float* out) {
  auto gh = [&](size_t i) { return g[i] * w[i]; };
  const float a = static_cast<float>(lane_sum(N, gh) / N);
  const float c = static_cast<float>(lane_sum(N, [&](size_t i) { return gh(i) * h(i); }) / N);
  if (add)
    for (size_t i = 0; i < N; ++i) out[i] = add[i] + rstd * (gh(i) - a - h(i) * c);
  else
    for (size_t i = 0; i < N; ++i) out[i] = rstd * (gh(i) - a - h(i) * c);
}

/// Zeros in the normalized shape, where a backward needs dw or db (else an unused array).
Array zeros_if(bool need, const Shape& shape) {
  return need ? Array(xt::zeros<float>(to_xshape(shape))) : Array();
}
/// The array's elements, or null when it is not needed.
float* data_if(bool need, Array& a) { return need ? a.data() : nullptr; }

}  // namespace

// Over each row r of the last N = prod(normalized_shape) elements:
//   x̂ = (x - μ) · rstd,  rstd = 1/√(σ² + eps),  y = x̂ · w + b
//   dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)),  ĝ = g · w
//   dw = Σ_r g · x̂,  db = Σ_r g
Tensor layer_norm(const Tensor& x_arg, const Shape& normalized_shape, const Tensor& weight_arg,
                  const Tensor& bias_arg, float eps) {
  Tensor x_copy;
  const Tensor& x = dense(x_arg, x_copy);
  Tensor weight_copy;
  const Tensor& weight = dense(weight_arg, weight_copy);
  Tensor bias_copy;
  const Tensor& bias = dense(bias_arg, bias_copy);
  require_defined(x, "layer_norm", "the input");
  const Shape xs = x.shape();
  const size_t N = check_layer_norm("layer_norm", xs, normalized_shape, weight, bias, eps);
  const size_t rows = N ? static_cast<size_t>(numel_of(xs)) / N : 0;
  auto xhat = std::make_shared<Array>(Array::from_shape(val(x).shape()));
  auto rstd = std::make_shared<std::vector<float>>(rows);
  Array y = Array::from_shape(val(x).shape());
  const float* px = val(x).data();
  const float* w = weight.defined() ? val(weight).data() : nullptr;
  const float* b = bias.defined() ? val(bias).data() : nullptr;
  for_each_row(rows, N, kGrain / 4, [&](size_t r) {  // rows split across threads
    float mu;
    norm_row(px + r * N, N, eps, w, b, y.data() + r * N, xhat->data() + r * N, mu, (*rstd)[r]);
  });
  const Saved sw = weight.defined() ? Saved(weight) : Saved();
  return record("layer_norm", std::move(y), {x, weight, bias},
                [xhat, rstd, sw, N, rows, normalized_shape](BackwardContext& ctx) {
                  std::vector<float> ones;  // without a weight: w = 1 (no branch in the loops)
                  if (!sw.defined()) ones.assign(N, 1.0f);
                  const float* w = sw.defined() ? ctx.read(sw).data() : ones.data();
                  Array gw = zeros_if(ctx.needs(1), normalized_shape);
                  Array gb = zeros_if(ctx.needs(2), normalized_shape);
                  Array gx = ctx.take_grad();  // dx is computed in g's buffer, row by row
                  const float* h = xhat->data();
                  norm_columns_backward(
                      gx.data(), [h, N](size_t r, size_t i) { return h[r * N + i]; }, rows, N,
                      data_if(ctx.needs(1), gw), data_if(ctx.needs(2), gb));
                  const bool dx = ctx.needs(0);
                  if (dx)
                    for_each_row(rows, N, kGrain / 4, [&](size_t r) {
                      float* gr = gx.data() + r * N;
                      const float* hr = h + r * N;
                      norm_row_backward(gr, [hr](size_t i) { return hr[i]; }, w, (*rstd)[r], N,
                                        nullptr, gr);
                    });
                  if (ctx.needs(1)) ctx.give(1, std::move(gw));
                  if (ctx.needs(2)) ctx.give(2, std::move(gb));
                  if (dx) ctx.give(0, std::move(gx));
                });
}

// s = a + b and n = layer_norm(s), per row r (see layer_norm):
//   da = db = ds + rstd · (ĝ - mean(ĝ) - ŝ · mean(ĝ · ŝ)),  ĝ = dn · w,  ŝ = (s - μ) · rstd
//   dw = Σ_r dn · ŝ,  dbias = Σ_r dn
// The tape holds three nodes: the core, whose closure is the whole backward, and one per
// output. Those are newer than the core, so they run first; each hands its gradient (ds or
// dn) over to the core through `Handover` and gives the core a one-element zero, which makes
// the engine run it. An output that got no gradient counts as zero. The backward reads s and
// each row's μ and rstd (not x̂: one buffer fewer than layer_norm).
AddLayerNorm add_layer_norm(const Tensor& a_arg, const Tensor& b_arg, const Shape& normalized_shape,
                            const Tensor& weight_arg, const Tensor& bias_arg, float eps) {
  const char* op = "add_layer_norm";
  Tensor a_copy, b_copy, weight_copy, bias_copy;
  const Tensor& a = dense(a_arg, a_copy);
  const Tensor& b = dense(b_arg, b_copy);
  const Tensor& weight = dense(weight_arg, weight_copy);
  const Tensor& bias = dense(bias_arg, bias_copy);
  require_defined(a, op, "a");
  require_defined(b, op, "b");
  const Shape xs = a.shape();
  if (b.shape() != xs)
    shape_error(op, "a shape " + to_string(xs) + " and b shape " + to_string(b.shape()) +
                        " must be equal (it does not broadcast)");
  const size_t N = check_layer_norm(op, xs, normalized_shape, weight, bias, eps);
  const size_t rows = N ? static_cast<size_t>(numel_of(xs)) / N : 0;
  auto s = make_storage(Array::from_shape(val(a).shape()));
  Array n = Array::from_shape(val(a).shape());
  auto stats = std::make_shared<std::vector<float>>(2 * rows);  // μ, rstd of each row
  const float *pa = val(a).data(), *pb = val(b).data();
  const float* w = weight.defined() ? val(weight).data() : nullptr;
  const float* bi = bias.defined() ? val(bias).data() : nullptr;
  const vec::Kernels& k = vec::kernels();
  // Each row of s is still in cache when it is normalized; the rows split across threads.
  for_each_row(rows, N, kGrain / 4, [&](size_t r) {
    float* sr = s->data.data() + r * N;
    k.binary(vec::Binary::Add, pa + r * N, N, pb + r * N, N, sr, N);  // as add()
    norm_row(sr, N, eps, w, bi, n.data() + r * N, nullptr, (*stats)[2 * r], (*stats)[2 * r + 1]);
  });
  if (!will_record(a, b, weight, bias))
    return {record(op, s, {a, b, weight, bias}, BackwardFn()),
            record(op, std::move(n), {a, b, weight, bias}, BackwardFn())};

  struct Handover {  // the outputs' gradients, on their way to the core's closure
    std::optional<Array> ds, dn;
  };
  auto handover = std::make_shared<Handover>();
  const Saved ss(s), sw = weight.defined() ? Saved(weight) : Saved();
  const Tensor core = record(
      op, Array(xt::zeros<float>({1})), {a, b, weight, bias},
      [handover, ss, sw, stats, N, rows, normalized_shape](BackwardContext& ctx) {
        std::optional<Array> ds = std::move(handover->ds), dn = std::move(handover->dn);
        handover->ds.reset();  // a retained graph's next backward hands over afresh
        handover->dn.reset();
        const bool dx = ctx.needs(0) || ctx.needs(1);
        Array out;  // d(a) = d(b): computed in ds's buffer (or dn's when ds is missing)
        if (!dn) {
          if (!ds || !dx) return;
          out = std::move(*ds);
        } else {
          const View& sv = ctx.read(ss);
          std::vector<float> ones;
          if (!sw.defined()) ones.assign(N, 1.0f);
          const float* w = sw.defined() ? ctx.read(sw).data() : ones.data();
          Array gw = zeros_if(ctx.needs(2), normalized_shape);
          Array gb = zeros_if(ctx.needs(3), normalized_shape);
          float* g = dn->data();
          const float* add = ds ? ds->data() : nullptr;  // ds, added to the row's dx
          float* o = !dx ? nullptr : ds ? ds->data() : g;
          const float* ps = sv.data();
          const float* st = stats->data();
          auto hat = [ps, st, N](size_t r, size_t i) {  // ŝ = (s - μ) · rstd
            return (ps[r * N + i] - st[2 * r]) * st[2 * r + 1];
          };
          norm_columns_backward(g, hat, rows, N, data_if(ctx.needs(2), gw),
                                data_if(ctx.needs(3), gb));
          if (o)
            for_each_row(rows, N, kGrain / 4, [&](size_t r) {
              norm_row_backward(g + r * N, [&hat, r](size_t i) { return hat(r, i); }, w,
                                st[2 * r + 1], N, add ? add + r * N : nullptr, o + r * N);
            });
          if (ctx.needs(2)) ctx.give(2, std::move(gw));
          if (ctx.needs(3)) ctx.give(3, std::move(gb));
          if (!dx) return;
          out = ds ? std::move(*ds) : std::move(*dn);
        }
        if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? copy_of(out) : std::move(out));
        if (ctx.needs(1)) ctx.give(1, std::move(out));
      });
  // output = its own values                d(core) = 0 (its gradient is handed over)
  auto hand_over = [handover](std::optional<Array> Handover::*slot) {
    return [handover, slot](BackwardContext& ctx) {
      ((*handover).*slot).emplace(ctx.take_grad());
      ctx.give(0, Array(xt::zeros<float>({1})));
    };
  };
  return {record("add_layer_norm.sum", s, {core}, hand_over(&Handover::ds)),
          record("add_layer_norm.norm", std::move(n), {core}, hand_over(&Handover::dn))};
}

namespace {

// Checks logits/log-probs (N, K, d...) against targets (N, d...) and returns the split
// (outer = N, n = K, inner = prod(d)).
AxisSplit loss_split(const Shape& xs, const Indices& t, const char* op) {
  if (xs.empty() || xs.size() == 0)
    shape_error(op, "input must have at least 1 dimension, got " + to_string(xs));
  Shape expected;
  if (xs.size() == 1) {
    expected = {};
  } else {
    expected = {xs[0]};
    expected.insert(expected.end(), xs.begin() + 2, xs.end());
  }
  const bool ok = t.shape == expected || (xs.size() == 1 && t.shape == Shape{1});
  if (!ok)
    shape_error(op, "target shape " + to_string(t.shape) + " does not fit input shape " +
                        to_string(xs) + " (expected target shape " + to_string(expected) + ")");
  if (xs.size() == 1) return AxisSplit{1, static_cast<size_t>(xs[0]), 1};
  return split_at(xs, 1);
}

struct LossSetup {
  AxisSplit s;
  float scale_denominator;  // what the mean divides by: the count (or the summed class
                            // weights) of the targets that are not ignored
  Shape none_shape;         // shape of the unreduced loss
  std::shared_ptr<const std::vector<float>> weight;  // class weights (K), or null (all 1)
  /// The weight of class k.
  float w(int64_t k) const { return weight ? (*weight)[static_cast<size_t>(k)] : 1.0f; }
};

LossSetup setup_loss(const Shape& xs, const Indices& targets, const CrossEntropyOptions& o,
                     const char* op) {
  LossSetup ls{loss_split(xs, targets, op), 0.0f, targets.shape, nullptr};
  if (!(o.label_smoothing() >= 0.0f && o.label_smoothing() <= 1.0f))
    throw ValueError(std::string(op) + ": label_smoothing must be in [0, 1], got " +
                     std::to_string(o.label_smoothing()));
  const int64_t K = static_cast<int64_t>(ls.s.n);
  if (o.weight().defined()) {
    const Tensor& w = o.weight();
    if (w.requires_grad() && is_grad_enabled())
      throw ValueError(std::string(op) + ": weight requires a gradient, but the loss has no "
                       "derivative for it (as in PyTorch); pass it detached");
    if (w.shape() != Shape{K})
      shape_error(op, "weight shape " + to_string(w.shape()) + ", expected (" + std::to_string(K) +
                          ") for input shape " + to_string(xs));
    ls.weight = std::make_shared<const std::vector<float>>(w.to_vector());
  }
  double counted = 0;  // Σ weight[target] over the targets not ignored
  for (size_t i = 0; i < targets.values.size(); ++i) {
    const int64_t t = targets.values[i];
    if (t == o.ignore_index()) continue;
    if (t < 0 || t >= K)
      throw IndexError(std::string(op) + ": target " + std::to_string(t) + " at position " +
                       std::to_string(i) + " is out of range for " + std::to_string(K) +
                       " classes (ignore_index is " + std::to_string(o.ignore_index()) + ")");
    counted += ls.w(t);
  }
  ls.scale_denominator = static_cast<float>(counted);
  return ls;
}

// Reduces per-element losses; returns the output array and the per-element weight of the
// upstream gradient (for backward).
Array reduce_loss(const Array& per, Reduction r, float denom) {
  if (r == Reduction::None) return per;
  double total = 0;
  for (float v : per) total += v;
  if (r == Reduction::Mean) total /= denom;  // 0/0 = NaN when every target is ignored, as in PyTorch
  Array out = Array::from_shape(std::vector<size_t>{});
  out() = static_cast<float>(total);
  return out;
}

// The upstream gradient for element e of the unreduced loss.
inline float loss_grad_at(const Array& g, Reduction r, float denom, size_t e) {
  if (r == Reduction::None) return g.data()[e];
  return r == Reduction::Mean ? g.data()[0] / denom : g.data()[0];
}

}  // namespace

// Per target position, with class weights w (all 1 without):
//   loss = -(1-ε)·w[t]·logp[t] - (ε/K)·Σ_k w[k]·logp[k],  logp = log_softmax(x)
//   dx = (softmax(x)·((1-ε)·w[t] + (ε/K)·Σ_k w[k]) - (1-ε)·w[t]·onehot(t) - (ε/K)·w) · upstream
Tensor cross_entropy(const Tensor& logits_arg, const Indices& targets, const CrossEntropyOptions& o) {
  Tensor logits_copy;
  const Tensor& logits = dense(logits_arg, logits_copy);
  require_defined(logits, "cross_entropy", "the input");
  const Shape xs = logits.shape();
  const LossSetup ls = setup_loss(xs, targets, o, "cross_entropy");
  const AxisSplit s = ls.s;
  const float eps = o.label_smoothing(), K = static_cast<float>(s.n);
  auto logp = std::make_shared<Array>(Array::from_shape(val(logits).shape()));
  Array per = Array::from_shape(to_xshape(ls.none_shape));
  const float* x = val(logits).data();
  for_each_row(s.outer, s.n * s.inner, kGrain / 8, [&](size_t o2) {  // rows split across threads
    for (size_t j = 0; j < s.inner; ++j) {
      const size_t base = o2 * s.n * s.inner + j, e = o2 * s.inner + j;
      float m = -INFINITY;
      for (size_t i = 0; i < s.n; ++i) m = std::max(m, x[base + i * s.inner]);
      double z = 0;
      for (size_t i = 0; i < s.n; ++i) z += std::exp(static_cast<double>(x[base + i * s.inner] - m));
      const float lz = static_cast<float>(std::log(z));  // subtracted after m: see log_softmax
      double all = 0;  // Σ_k w_k logp[k]
      for (size_t i = 0; i < s.n; ++i) {
        const float lp = (x[base + i * s.inner] - m) - lz;
        logp->data()[base + i * s.inner] = lp;
        all += ls.w(static_cast<int64_t>(i)) * lp;
      }
      const int64_t t = targets.values[e];
      if (t == o.ignore_index()) {
        per.data()[e] = 0.0f;
      } else {
        // Without smoothing the Σ term is left out, not multiplied by 0: a -inf logit of
        // another class (a masked class) would make it 0·(-inf) = NaN. PyTorch gives the plain
        // -logp[t] there.
        const float smooth = eps > 0.0f ? eps / K * static_cast<float>(all) : 0.0f;
        per.data()[e] =
            -(1.0f - eps) * ls.w(t) * logp->data()[base + static_cast<size_t>(t) * s.inner] - smooth;
      }
    }
  });
  const Reduction red = o.reduction();
  const float denom = ls.scale_denominator;
  const int64_t ignore = o.ignore_index();
  auto tv = targets.values;
  const auto cw = ls.weight;
  double w_all = 0;  // Σ_k w[k]
  for (size_t i = 0; i < s.n; ++i) w_all += ls.w(static_cast<int64_t>(i));
  return record("cross_entropy", reduce_loss(per, red, denom), {logits},
                [logp, tv, s, eps, K, red, denom, ignore, cw, w_all](BackwardContext& ctx) {
                  auto w = [&](int64_t k) { return cw ? (*cw)[static_cast<size_t>(k)] : 1.0f; };
                  Array gx = Array::from_shape(logp->shape());
                  for_each_row(s.outer, s.n * s.inner, kGrain / 8, [&](size_t o2) {
                    for (size_t j = 0; j < s.inner; ++j) {
                      const size_t base = o2 * s.n * s.inner + j, e = o2 * s.inner + j;
                      const int64_t t = tv[e];
                      const float up = t == ignore ? 0.0f : loss_grad_at(ctx.grad, red, denom, e);
                      const float wt = t == ignore ? 0.0f : w(t);
                      const float c = (1.0f - eps) * wt + static_cast<float>(eps / K * w_all);
                      for (size_t i = 0; i < s.n; ++i) {
                        const int64_t k = static_cast<int64_t>(i);
                        const float target = (k == t ? (1.0f - eps) * wt : 0.0f) + eps / K * w(k);
                        gx.data()[base + i * s.inner] =
                            (std::exp(logp->data()[base + i * s.inner]) * c - target) * up;
                      }
                    }
                  });
                  ctx.give(0, std::move(gx));
                });
}

// loss = -w[t]·logp[t]         dlogp = -w[t]·onehot(t) · upstream   (w = 1 without weights)
Tensor nll_loss(const Tensor& log_probs_arg, const Indices& targets, const CrossEntropyOptions& o) {
  Tensor log_probs_copy;
  const Tensor& log_probs = dense(log_probs_arg, log_probs_copy);
  require_defined(log_probs, "nll_loss", "the input");
  if (o.label_smoothing() != 0.0f)
    throw ValueError("nll_loss: label_smoothing is not supported (use cross_entropy)");
  const Shape xs = log_probs.shape();
  const LossSetup ls = setup_loss(xs, targets, o, "nll_loss");
  const AxisSplit s = ls.s;
  Array per = Array::from_shape(to_xshape(ls.none_shape));
  const float* x = val(log_probs).data();
  for (size_t o2 = 0; o2 < s.outer; ++o2)
    for (size_t j = 0; j < s.inner; ++j) {
      const size_t e = o2 * s.inner + j;
      const int64_t t = targets.values[e];
      per.data()[e] = t == o.ignore_index()
                          ? 0.0f
                          : -ls.w(t) * x[(o2 * s.n + static_cast<size_t>(t)) * s.inner + j];
    }
  const Reduction red = o.reduction();
  const float denom = ls.scale_denominator;
  const int64_t ignore = o.ignore_index();
  auto tv = targets.values;
  const auto cw = ls.weight;
  return record("nll_loss", reduce_loss(per, red, denom), {log_probs},
                [xs, tv, s, red, denom, ignore, cw](BackwardContext& ctx) {
                  Array gx = xt::zeros<float>(to_xshape(xs));
                  for (size_t o2 = 0; o2 < s.outer; ++o2)
                    for (size_t j = 0; j < s.inner; ++j) {
                      const size_t e = o2 * s.inner + j;
                      const int64_t t = tv[e];
                      if (t == ignore) continue;
                      const float wt = cw ? (*cw)[static_cast<size_t>(t)] : 1.0f;
                      gx.data()[(o2 * s.n + static_cast<size_t>(t)) * s.inner + j] =
                          -wt * loss_grad_at(ctx.grad, red, denom, e);
                    }
                  ctx.give(0, std::move(gx));
                });
}

// loss = (x - y)²  reduced;  composed from recorded ops, so its gradient comes for free.
Tensor mse_loss(const Tensor& input_arg, const Tensor& target_arg, Reduction reduction) {
  Tensor input_copy;
  const Tensor& input = dense(input_arg, input_copy);
  Tensor target_copy;
  const Tensor& target = dense(target_arg, target_copy);
  require_defined(input, "mse_loss", "the input");
  require_defined(target, "mse_loss", "the target");
  if (input.shape() != target.shape())
    shape_error("mse_loss", "input shape " + to_string(input.shape()) +
                                " does not match target shape " + to_string(target.shape()));
  Tensor d = sub(input, target);
  Tensor sq = mul(d, d);
  if (reduction == Reduction::None) return sq;
  if (reduction == Reduction::Mean && sq.numel() == 0)  // 0/0: NaN, as in PyTorch
    return mul(sum(sq), std::numeric_limits<float>::quiet_NaN());
  return reduction == Reduction::Sum ? sum(sq) : mean(sq);
}

}  // namespace tg
