// Elementwise ops. Each op's forward, backward closure and derivative sit together.
// Binary ops broadcast like numpy; their closures hand back gradients in the broadcast
// shape and the engine sums them down to each input's shape.
#include <cmath>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xoperation.hpp>

#include "backend/parallel.h"
#include "ops/common.h"
#include "ops/vec_ops.h"

namespace tg {
using namespace detail;
using vec::Binary;

namespace {
// The output's gradient turned into an input's gradient in its own buffer: f(g) updates g
// in place. Only as the closure's last use of ctx.grad (see BackwardContext::take_grad).
template <class F>
Array in_place(BackwardContext& ctx, F&& f) {
  Array g = ctx.take_grad();
  f(g);
  return g;
}

void check_broadcast(const Tensor& a, const Tensor& b, const char* op) {
  if (!a.defined() || !b.defined()) throw ValueError(std::string(op) + ": undefined tensor");
  if (val(a).shape() == val(b).shape()) return;  // the common case, without allocating
  broadcast_shapes(shape_of(val(a)), shape_of(val(b)), op);
}
}  // namespace

// y = a + b            da = g, db = g
Tensor add(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  check_broadcast(a, b, "add");
  return record("add", binary(Binary::Add, val(a), val(b)), {a, b}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? copy_of(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, ctx.take_grad());
  });
}

// y = a - b            da = g, db = -g
Tensor sub(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  check_broadcast(a, b, "sub");
  return record("sub", binary(Binary::Sub, val(a), val(b)), {a, b}, [](BackwardContext& ctx) {
    if (ctx.needs(0)) ctx.give(0, ctx.needs(1) ? copy_of(ctx.grad) : ctx.take_grad());
    if (ctx.needs(1)) ctx.give(1, in_place(ctx, [](Array& g) { g *= -1.0f; }));
  });
}

// y = a * b            da = g * b, db = g * a
Tensor mul(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  check_broadcast(a, b, "mul");
  const bool rec = will_record(a, b);  // each saves what the other's gradient reads
  const Saved sa = rec && b.requires_grad() ? Saved(a) : Saved();
  const Saved sb = rec && a.requires_grad() ? Saved(b) : Saved();
  return record("mul", binary(Binary::Mul, val(a), val(b)), {a, b}, [sa, sb](BackwardContext& ctx) {
    if (ctx.needs(0) && ctx.needs(1)) ctx.give(0, binary(Binary::Mul, ctx.grad, ctx.read(sb)));
    else if (ctx.needs(0))
      ctx.give(0, in_place(ctx, [&](Array& g) { binary_(Binary::Mul, g, ctx.read(sb)); }));
    if (ctx.needs(1))
      ctx.give(1, in_place(ctx, [&](Array& g) { binary_(Binary::Mul, g, ctx.read(sa)); }));
  });
}

// y = a / b            da = g / b, db = -g * a / b²
Tensor div(const Tensor& a_arg, const Tensor& b_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  Tensor b_copy;
  const Tensor& b = dense(b_arg, b_copy);
  check_broadcast(a, b, "div");
  const bool rec = will_record(a, b);
  const Saved sa = rec && b.requires_grad() ? Saved(a) : Saved();
  const Saved sb = rec ? Saved(b) : Saved();
  return record("div", binary(Binary::Div, val(a), val(b)), {a, b}, [sa, sb](BackwardContext& ctx) {
    const View& vb = ctx.read(sb);
    if (ctx.needs(0)) ctx.give(0, binary(Binary::Div, ctx.grad, vb));
    if (ctx.needs(1)) ctx.give(1, Array(-ctx.grad * ctx.read(sa) / (vb * vb)));
  });
}

// y = a + s            da = g
Tensor add(const Tensor& a_arg, float s) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "add_scalar", "the input");
  return record("add_scalar", binary(Binary::Add, val(a), s), {a},
                [](BackwardContext& ctx) { ctx.give(0, ctx.take_grad()); });
}

// y = a * s            da = g * s
Tensor mul(const Tensor& a_arg, float s) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "mul_scalar", "the input");
  return record("mul_scalar", binary(Binary::Mul, val(a), s), {a}, [s](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [s](Array& g) { g *= s; }));
  });
}

// y = s / a            da = -g * s / a²
Tensor rdiv(float s, const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "rdiv_scalar", "the input");
  const Saved sa(a);
  return record("rdiv_scalar", Array(s / val(a)), {a}, [s, sa](BackwardContext& ctx) {
    const View& x = ctx.read(sa);
    ctx.give(0, Array(-ctx.grad * s / (x * x)));
  });
}

// y = -a               da = -g
Tensor neg(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "neg", "the input");
  return record("neg", Array(-val(a)), {a}, [](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [](Array& g) { g *= -1.0f; }));
  });
}

// y = a^p              da = g * p * a^(p-1)
Tensor pow(const Tensor& a_arg, float p) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "pow", "the input");
  const Saved sa(a);
  return record("pow", Array(xt::pow(val(a), p)), {a}, [sa, p](BackwardContext& ctx) {
    ctx.give(0, Array(ctx.grad * p * xt::pow(ctx.read(sa), p - 1.0f)));
  });
}

// y = exp(a)           da = g * y
Tensor exp(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "exp", "the input");
  auto y = make_storage(unary(vec::kernels().exp, val(a)));
  return record("exp", y, {a}, [sy = Saved(y)](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { binary_(Binary::Mul, g, ctx.read(sy)); }));
  });
}

// y = log(a)           da = g / a
Tensor log(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "log", "the input");
  const Saved sa(a);
  return record("log", Array(xt::log(val(a))), {a},
                [sa](BackwardContext& ctx) { ctx.give(0, Array(ctx.grad / ctx.read(sa))); });
}

// y = sqrt(a)          da = g / (2y)
Tensor sqrt(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "sqrt", "the input");
  auto y = make_storage(xt::sqrt(val(a)));
  return record("sqrt", y, {a}, [sy = Saved(y)](BackwardContext& ctx) {
    ctx.give(0, Array(ctx.grad * 0.5f / ctx.read(sy)));
  });
}

// y = |a|              da = g * sign(a)   (0 at a = 0, as in PyTorch)
Tensor abs(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "abs", "the input");
  const Saved sa(a);
  return record("abs", Array(xt::abs(val(a))), {a}, [sa](BackwardContext& ctx) {
    ctx.give(0, Array(ctx.grad * xt::sign(ctx.read(sa))));
  });
}

// y = tanh(a)          da = g * (1 - y²)
Tensor tanh(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "tanh", "the input");
  auto y = make_storage(unary(vec::kernels().tanh, val(a)));
  return record("tanh", y, {a}, [sy = Saved(y)](BackwardContext& ctx) {
    const View& v = ctx.read(sy);
    ctx.give(0, in_place(ctx, [&](Array& g) {
      vec::kernels().tanh_backward(g.data(), v.data(), g.size());  // g (1 - y²)
    }));
  });
}

// y = 1 / (1 + e^-a)   da = g * y * (1 - y)
Tensor sigmoid(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "sigmoid", "the input");
  auto y = make_storage(unary(vec::kernels().sigmoid, val(a)));
  return record("sigmoid", y, {a}, [sy = Saved(y)](BackwardContext& ctx) {
    const View& v = ctx.read(sy);
    ctx.give(0, in_place(ctx, [&](Array& g) {
      vec::kernels().sigmoid_backward(g.data(), v.data(), g.size());  // g y (1 - y)
    }));
  });
}

// y = max(a, 0)        da = g * [a > 0]
Tensor relu(const Tensor& a_arg) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "relu", "the input");
  // where(x < 0, 0, x), not max(x, 0): NaN stays NaN, as in PyTorch (max would give 0).
  // Plain loops (they vectorize), split across tapegrad's threads when large.
  const View& x = val(a);
  Array y_values = Array::from_shape(x.shape());
  const float* px = x.data();
  float* py = y_values.data();
  for_range(static_cast<int64_t>(x.size()), kGrain, [px, py](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = px[i] < 0.0f ? 0.0f : px[i];
  });
  auto y = make_storage(std::move(y_values));
  return record("relu", y, {a}, [sy = Saved(y)](BackwardContext& ctx) {
    const float* py = ctx.read(sy).data();
    ctx.give(0, in_place(ctx, [py](Array& g) {  // g [y > 0], in g's buffer
      float* pg = g.data();
      for_range(static_cast<int64_t>(g.size()), kGrain, [py, pg](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) pg[i] = py[i] > 0.0f ? pg[i] : 0.0f;
      });
    }));
  });
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kC = 0.044715f;

// exact:  y = x Φ(x) = ½x(1 + erf(x/√2))        dx = g (Φ(x) + x φ(x))
// approx: y = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³)
//         dx = g (½(1 + t) + ½x(1 - t²) √(2/π)(1 + 3·0.044715x²)),  t = tanh(u)
Tensor gelu(const Tensor& a_arg, bool approximate) {
  Tensor a_copy;
  const Tensor& a = dense(a_arg, a_copy);
  require_defined(a, "gelu", "the input");
  const View& x = val(a);
  if (approximate) {
    auto t = std::make_shared<Array>(xt::tanh(kSqrt2OverPi * (x + kC * x * x * x)));
    Array y = 0.5f * x * (1.0f + *t);
    return record("gelu_tanh", std::move(y), {a}, [sx = Saved(a), t](BackwardContext& ctx) {
      const View& x = ctx.read(sx);
      ctx.give(0, Array(ctx.grad * (0.5f * (1.0f + *t) + 0.5f * x * (1.0f - *t * *t) *
                                                              kSqrt2OverPi *
                                                              (1.0f + 3.0f * kC * x * x))));
    });
  }
  // The derivative is saved instead of x (the same size): erf is the costly part and is
  // at hand in the forward, and backward becomes one product, computed in g's buffer.
  const bool rec = will_record(a);
  Array y = Array::from_shape(x.shape());
  auto dydx = rec ? std::make_shared<Array>(Array::from_shape(x.shape())) : nullptr;  // Φ + xφ
  vec::kernels().gelu(x.data(), y.data(), dydx ? dydx->data() : nullptr, y.size());
  if (!rec) return record("gelu", std::move(y), {a}, nullptr);
  return record("gelu", std::move(y), {a}, [dydx](BackwardContext& ctx) {
    ctx.give(0, in_place(ctx, [&](Array& g) { binary_(Binary::Mul, g, *dydx); }));
  });
}

}  // namespace tg
