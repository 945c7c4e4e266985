#pragma once
// Library-internal: the arithmetic the optimizer loops share with ATen's CPU kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backend/parallel.h"

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

/// body(begin, end) over [0, n): in parts on tapegrad's threads (tg::set_num_threads) when n
/// is large, else at once (backend/parallel.h). An update is elementwise, so the parts give
/// the same bits.
template <class F>
void for_range(int64_t n, F&& body) {
  tg::detail::for_range(n, tg::detail::kGrain, std::forward<F>(body));
}

}  // namespace detail
}  // namespace optim
}  // namespace tg
