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
constexpr float kInvSqrt2 = 0.7071067811865476f;    // 1/√2
constexpr float kInvSqrt2Pi = 0.3989422804014327f;  // 1/√(2π)

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

// y = x Φ(x), Φ(x) = ½(1 + erf(x/√2));  dydx = Φ(x) + x φ(x), φ(x) = e^(-x²/2) / √(2π)
void gelu_(const float* x, float* y, float* dydx, size_t n) {
  if (!dydx) {
    map1(x, y, n, [](B v) { return v * (B(0.5f) * (B(1.0f) + xsimd::erf(v * B(kInvSqrt2)))); });
    return;
  }
  size_t i = 0;
  auto one = [](B v, float* py, float* pd, bool aligned) {
    const B cdf = B(0.5f) * (B(1.0f) + xsimd::erf(v * B(kInvSqrt2)));
    const B d = cdf + v * B(kInvSqrt2Pi) * xsimd::exp(B(-0.5f) * v * v);
    if (aligned) {
      (v * cdf).store_aligned(py);
      d.store_aligned(pd);
    } else {
      (v * cdf).store_unaligned(py);
      d.store_unaligned(pd);
    }
  };
  for (; i + L <= n; i += L) one(B::load_unaligned(x + i), y + i, dydx + i, false);
  if (i < n) {
    alignas(64) float bx[L] = {}, by[L], bd[L];
    std::memcpy(bx, x + i, (n - i) * sizeof(float));
    one(B::load_aligned(bx), by, bd, true);
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
