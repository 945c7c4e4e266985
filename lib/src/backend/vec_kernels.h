// The bodies of the vector kernels (backend/vec.h), included once by each level's file
// (vec_baseline.cpp, vec_avx2.cpp, vec_avx512.cpp, vec_native.cpp) after it defines
// TG_VEC_LEVEL: that file's compiler flags decide the instruction set (xsimd picks its widest
// batch from them). Everything here lives in the level's own namespace, the helpers in an
// anonymous one inside it, so that the linker can never hand one level's inline code to
// another (or to the rest of the library). No header here but xsimd and the C++ library.
//
// Legend: n = elements, L = floats per batch (4 with SSE2, 8 with AVX2, 16 with AVX-512).
#ifndef TG_VEC_LEVEL
#error "define TG_VEC_LEVEL (baseline, avx2, avx512 or native) before including backend/vec_kernels.h"
#endif

#include <cmath>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "backend/vec.h"

#define TG_VEC_STR2(x) #x
#define TG_VEC_STR(x) TG_VEC_STR2(x)

namespace tg {
namespace vec {
namespace TG_VEC_LEVEL {
namespace {

using B = xsimd::batch<float>;
constexpr size_t L = B::size;

// ---- loops over batches ---------------------------------------------------------------------
// The last partial batch runs through a padded buffer: every element gets the vector code's
// result, wherever it sits (no scalar tail that rounds differently).

/// y[i] = f(x[i])
template <class F>
void map1(const float* x, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + L <= n; i += L) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float buf[L] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    f(B::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

/// y[i] = f(a[i], b[i])
template <class F>
void map2(const float* a, const float* b, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + L <= n; i += L)
    f(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float ba[L] = {}, bb[L] = {};
    std::memcpy(ba, a + i, (n - i) * sizeof(float));
    std::memcpy(bb, b + i, (n - i) * sizeof(float));
    f(B::load_aligned(ba), B::load_aligned(bb)).store_aligned(ba);
    std::memcpy(y + i, ba, (n - i) * sizeof(float));
  }
}

// ---- activations ----------------------------------------------------------------------------
// y = e^x
void exp_(const float* x, float* y, size_t n) {
  map1(x, y, n, [](B v) { return xsimd::exp(v); });
}

// y = tanh(x)
void tanh_(const float* x, float* y, size_t n) {
  map1(x, y, n, [](B v) { return xsimd::tanh(v); });
}

// y = 1 / (1 + e^-x)
void sigmoid_(const float* x, float* y, size_t n) {
  map1(x, y, n, [](B v) { return B(1.0f) / (B(1.0f) + xsimd::exp(-v)); });
}

// ---- exact GELU ------------------------------------------------------------------------------
// y = x Φ(x), dydx = Φ(x) + x φ(x), with Φ(x) = ½ erfc(-x/√2) and φ(x) = E/√(2π), E = e^(-x²/2).
// Written with A(x) = ½ e^(x²/2) erfc(|x|/√2) (the scaled complementary error function):
//   x < 0:  Φ = A E,      y = (x A) E,      dydx = (A + x/√(2π)) E
//   x ≥ 0:  Φ = 1 - A E,  y = x (1 - A E),  dydx = 1 - A E + (x/√(2π)) E
// One exponential serves Φ and φ, no branch, no table, no libm call; and Φ keeps its relative
// accuracy for x < 0, where 1 + erf(x/√2) cancels (Φ(-5) = 2.9e-7 is 5 float spacings at 1).
//   A = u Q(u), u = 1/(1 + 0.3|x|) ∈ (0, 1]: Q of degree 9, fitted (weighted least squares,
//     Lawson's iterations, then rounded to float one coefficient at a time, refitting the
//     rest) to A/u over |x| ≤ 13.5: relative error 1.3e-8 before the float arithmetic.
//   E = 2^n e^r: x²/2 = h + l exactly (an FMA, or Dekker's split without one), n = round(-h
//     log2 e), r = -h - n ln2 - l (ln2 in two parts) ∈ ±0.35, e^r = 1 + r + r² P(r), P of
//     degree 4 fitted the same way (relative error 3.1e-9). E = 0 where h > 87 (|x| > 13.19:
//     there |y| < FLT_MIN, and 2^n would not be a normal float).
// Measured against erfc and exp in double over every float in [-12, 12] and a sparser sweep
// beyond (tests/backend/test_vec.cpp checks a dense sample of the same at every level):
//   y within 5.3 float spacings (ulp) of the true value with FMA, 7.7 without (SSE2), wherever
//     |y| ≥ FLT_MIN; within FLT_MIN below it.
//   dydx within 4.6 (FMA) and 7.4 ulp of |Φ| + |x φ|, the size of the terms it adds, for
//     |x| ≤ 13.19 (its zero at x ≈ -0.7518 allows no relative bound); |dydx| < 1e-37 beyond.
//   The worst cases sit near x = 0, where a rounding of u moves A 2.7 times as much: the FMA
//     levels refine u with a Newton step. y = x from x = 5.42, y = -0 below -13.19.
//   ±inf and NaN give what PyTorch 1.13 gives: gelu(inf) = inf, gelu(-inf) = NaN, dydx(±inf)
//     = NaN, NaN for NaN.
// The previous kernel (xsimd's erf, then e^(-x²/2) again for φ) ran 1.7x the instructions
// (callgrind, AVX2, y and dydx of 512Ki floats: 7.66M against 4.46M) and formed Φ as
// ½(1 + erf), all of whose digits cancel below x = -5.4.

/// a·b + c, rounded once where the level has FMA (xsimd 8.1's fma fuses SSE and AVX batches but
/// not AVX-512's, which it computes as a·b + c).
inline B fmadd(B a, B b, B c) {
#if defined(__AVX512F__)
  static_assert(L == 16, "xsimd picks 512-bit batches where AVX-512F is on");
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return xsimd::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// (h, l) with h + l = x·x exactly (h = fl(x·x)) where x·x is a normal float.
inline void square_exact(B x, B& h, B& l) {
  h = x * x;
#ifdef __FMA__
  l = fmadd(x, x, -h);
#else  // Dekker: x = xh + xl with 12-bit halves, whose products are exact
  const B c = B(4097.0f) * x;
  const B xh = c - (c - x), xl = x - xh;
  l = ((xh * xh - h) + B(2.0f) * xh * xl) + xl * xl;
#endif
}

/// e^(-x²/2), relative error ~2 ulp where it is a normal float, else 0 (|x| > 13.19).
inline B exp_minus_half_square(B x) {
  B h, l;
  square_exact(x, h, l);
  h = B(0.5f) * h, l = B(0.5f) * l;  // x²/2 = h + l
  // n = round(-h log2 e) through the float add of 1.5·2²³, which leaves n in the low bits
  const B shifter(12582912.0f);
  const B t = fmadd(h, B(-1.44269504f), shifter);
  const B n = t - shifter;
  B r = fmadd(n, B(-0.693145752f), -h);  // ln 2 = 0.693145752 + 1.42860677e-6
  r = fmadd(n, B(-1.42860677e-6f), r) - l;
  B p = fmadd(B(1.38146116e-3f), r, B(8.36871006e-3f));
  p = fmadd(p, r, B(4.16683890e-2f));
  p = fmadd(p, r, B(1.66665211e-1f));
  p = fmadd(p, r, B(4.99999940e-1f));
  const B er = fmadd(p, r * r, r) + B(1.0f);  // e^r
  using I = xsimd::batch<int32_t>;
  const I bits = xsimd::bitwise_cast<I>(t) << 23;  // n in the exponent field (t's high bits drop)
  const B two_n = xsimd::bitwise_cast<B>(bits + I(127 << 23));
  return xsimd::select(h > B(87.0f), B(0.0f), er * two_n);  // NaN stays NaN
}

/// A(x) = ½ e^(x²/2) erfc(|x|/√2), within a few ulp.
inline B half_erfcx(B x) {
  // |x| capped at 1e30, past which E = 0 and A does not matter (inf would make u NaN below)
  const B ax = xsimd::min(xsimd::abs(x), B(1e30f)), d = fmadd(B(0.3f), ax, B(1.0f));
  B u = B(1.0f) / d;
#ifdef __FMA__
  // u to within half a float spacing of 1/(1 + 0.3|x|): one Newton step with the exact
  // residuals of the sum and of the division (near x = 0, A moves 2.7 times as fast as u).
  const B d_lo = fmadd(B(0.3f), ax, B(1.0f) - d);  // 1 + 0.3|x| = d + d_lo
  u = fmadd(u, fmadd(-u, d, B(1.0f)) - u * d_lo, u);
#endif
  B q = fmadd(B(-0.02059467f), u, B(0.11227354f));
  q = fmadd(q, u, B(-0.22781757f));
  q = fmadd(q, u, B(0.19123414f));
  q = fmadd(q, u, B(-0.07894505f));
  q = fmadd(q, u, B(0.09588762f));
  q = fmadd(q, u, B(0.07848748f));
  q = fmadd(q, u, B(0.11021335f));
  q = fmadd(q, u, B(0.11957462f));
  q = fmadd(q, u, B(0.119686544f));
  return u * q;
}

constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1/√(2π)

/// y = x Φ(x)
inline B gelu_value(B x) {
  const B a = half_erfcx(x), e = exp_minus_half_square(x);
  return xsimd::select(x < B(0.0f), (x * a) * e, x * (B(1.0f) - a * e));
}

/// y = x Φ(x) into py, dydx = Φ(x) + x φ(x) into pd
template <bool kAligned>
inline void gelu_with_derivative(B x, float* py, float* pd) {
  const B a = half_erfcx(x), e = exp_minus_half_square(x);
  const auto neg = x < B(0.0f);
  const B phi_pos = B(1.0f) - a * e, xc = x * B(kInvSqrt2Pi);
  const B y = xsimd::select(neg, (x * a) * e, x * phi_pos);
  const B d = xsimd::select(neg, (a + xc) * e, fmadd(xc, e, phi_pos));
  if (kAligned) {
    y.store_aligned(py);
    d.store_aligned(pd);
  } else {
    y.store_unaligned(py);
    d.store_unaligned(pd);
  }
}

void gelu_(const float* x, float* y, float* dydx, size_t n) {
  if (!dydx) return map1(x, y, n, [](B v) { return gelu_value(v); });
  size_t i = 0;
  for (; i + L <= n; i += L) gelu_with_derivative<false>(B::load_unaligned(x + i), y + i, dydx + i);
  if (i < n) {
    alignas(64) float bx[L] = {}, by[L], bd[L];
    std::memcpy(bx, x + i, (n - i) * sizeof(float));
    gelu_with_derivative<true>(B::load_aligned(bx), by, bd);
    std::memcpy(y + i, by, (n - i) * sizeof(float));
    std::memcpy(dydx + i, bd, (n - i) * sizeof(float));
  }
}

// g ← g (1 - y²)
void tanh_backward_(float* g, const float* y, size_t n) {
  map2(g, y, g, n, [](B gv, B yv) { return gv * (B(1.0f) - yv * yv); });
}

// g ← g y (1 - y)
void sigmoid_backward_(float* g, const float* y, size_t n) {
  map2(g, y, g, n, [](B gv, B yv) { return gv * (yv * (B(1.0f) - yv)); });
}

// ---- binary ops -----------------------------------------------------------------------------
struct AddOp {
  template <class T> T operator()(T a, T b) const { return a + b; }
};
struct SubOp {
  template <class T> T operator()(T a, T b) const { return a - b; }
};
struct MulOp {
  template <class T> T operator()(T a, T b) const { return a * b; }
};
struct DivOp {
  template <class T> T operator()(T a, T b) const { return a / b; }
};

template <class Op>
void binary_with(Op op, const float* a, size_t na, const float* b, size_t nb, float* y, size_t n) {
  if (n == 0) return;
  if (na == n && nb == n) {
    map2(a, b, y, n, op);
  } else if (nb == 1) {  // a op scalar
    const B s(b[0]);
    map1(a, y, n, [&](B v) { return op(v, s); });
  } else if (na == 1) {  // scalar op b
    const B s(a[0]);
    map1(b, y, n, [&](B v) { return op(s, v); });
  } else if (na == n && nb != 0 && n % nb == 0) {  // b repeats: a row added to every row
    for (size_t c = 0; c < n; c += nb) map2(a + c, b, y + c, nb, op);
  } else if (nb == n && na != 0 && n % na == 0) {
    for (size_t c = 0; c < n; c += na) map2(a, b + c, y + c, na, op);
  } else {  // both repeat (the caller does not send this): correct, not fast
    for (size_t i = 0; i < n; ++i) y[i] = op(a[i % na], b[i % nb]);
  }
}

void binary_(Binary op, const float* a, size_t na, const float* b, size_t nb, float* y, size_t n) {
  switch (op) {
    case Binary::Add: return binary_with(AddOp(), a, na, b, nb, y, n);
    case Binary::Sub: return binary_with(SubOp(), a, na, b, nb, y, n);
    case Binary::Mul: return binary_with(MulOp(), a, na, b, nb, y, n);
    case Binary::Div: return binary_with(DivOp(), a, na, b, nb, y, n);
  }
}

// ---- the Adam update ------------------------------------------------------------------------
// ATen's arithmetic (optim/kernels.h): a fused multiply-add where the level has FMA. A plain
// loop with the flags known at compile time, which the compiler vectorizes (this file is
// compiled with -ffp-contract=off and -fno-math-errno: the same IEEE operations per element).

inline float add_scaled(float a, float alpha, float b) {  // a + alpha·b
#ifdef __FMA__
  return std::fma(alpha, b, a);
#else
  return a + alpha * b;
#endif
}

inline float add_product(float self, float value, float t1, float t2) {  // self + value·t1·t2
#ifdef __FMA__
  return std::fma(value * t1, t2, self);
#else
  return self + value * t1 * t2;
#endif
}

template <bool kMaximize, bool kDecoupled, bool kL2, bool kAmsgrad>
void adam_loop(const AdamStep& s, float* __restrict p, const float* __restrict g,
               float* __restrict m, float* __restrict v, float* __restrict vmax, int64_t n) {
  const float b1 = s.b1, one_m_b1 = s.one_m_b1, b2 = s.b2, one_m_b2 = s.one_m_b2;
  const float eps = s.eps, wd = s.wd, decay = s.decay, step = s.neg_step_size, bc2 = s.bc2_sqrt;
  for (int64_t j = 0; j < n; ++j) {
    float gj = kMaximize ? -g[j] : g[j];
    if (kDecoupled) p[j] = p[j] * decay;             // AdamW: p ← p·(1 − lr·wd)
    if (kL2) gj = add_scaled(gj, wd, p[j]);          // Adam:  g ← g + wd·p
    m[j] = add_scaled(m[j] * b1, one_m_b1, gj);      // m ← β1·m + (1 − β1)·g
    v[j] = add_product(v[j] * b2, one_m_b2, gj, gj);  // v ← β2·v + (1 − β2)·g²
    float vj = v[j];
    if (kAmsgrad)  // NaN-propagating max
      vj = vmax[j] = (v[j] > vmax[j] || std::isnan(v[j])) ? v[j] : vmax[j];
    const float denom = std::sqrt(vj) / bc2 + eps;
    p[j] = p[j] + step * m[j] / denom;  // p ← p − step_size·m / denom
  }
}

template <bool... Known>
void adam_pick(const AdamStep& s, float* p, const float* g, float* m, float* v, float* vmax,
               int64_t n) {
  constexpr size_t kKnown = sizeof...(Known);
  if constexpr (kKnown == 4) {
    adam_loop<Known...>(s, p, g, m, v, vmax, n);
  } else {
    const bool flags[4] = {s.maximize, s.decoupled_wd, s.l2_wd, vmax != nullptr};
    if (flags[kKnown])
      adam_pick<Known..., true>(s, p, g, m, v, vmax, n);
    else
      adam_pick<Known..., false>(s, p, g, m, v, vmax, n);
  }
}

void adam_(const AdamStep& s, float* p, const float* g, float* m, float* v, float* vmax,
           int64_t n) {
  adam_pick<>(s, p, g, m, v, vmax, n);
}

}  // namespace

extern const Kernels table;
const Kernels table = {TG_VEC_STR(TG_VEC_LEVEL), &exp_, &tanh_, &sigmoid_, &gelu_,
                       &tanh_backward_, &sigmoid_backward_, &binary_, &adam_};

}  // namespace TG_VEC_LEVEL
}  // namespace vec
}  // namespace tg
