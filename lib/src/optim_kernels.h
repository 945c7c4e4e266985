#pragma once
// Library-internal: the arithmetic the optimizer loops share with ATen's CPU kernels.
#include <cmath>
#include <type_traits>

namespace tg {
namespace optim {
namespace detail {

/// a + alpha·b as ATen's add(a, b, alpha=...) computes it: one fused multiply-add where the
/// CPU has FMA (ATen's AVX2 kernels use vfmadd), otherwise a product and a sum.
inline float add_scaled(float a, float alpha, float b) {
#ifdef __FMA__
  return std::fma(alpha, b, a);
#else
  return a + alpha * b;
#endif
}

/// self + value·t1·t2 as ATen's addcmul computes it: fma(value·t1, t2, self) where the CPU
/// has FMA (the compiler contracts ATen's expression), otherwise left to right.
inline float add_product(float self, float value, float t1, float t2) {
#ifdef __FMA__
  return std::fma(value * t1, t2, self);
#else
  return self + value * t1 * t2;
#endif
}

/// Calls f(std::bool_constant<b>...) for the runtime flags b..., so that each combination
/// gets its own loop with the flags known at compile time: no branch inside the loop, which
/// then vectorizes (the same IEEE operations per element, so the same bits as the scalar loop).
template <bool... Known, class F>
void with_flags(F&& f) {
  f(std::bool_constant<Known>()...);
}
template <bool... Known, class F, class... Rest>
void with_flags(F&& f, bool b, Rest... rest) {
  if (b)
    with_flags<Known..., true>(f, rest...);
  else
    with_flags<Known..., false>(f, rest...);
}

}  // namespace detail
}  // namespace optim
}  // namespace tg
