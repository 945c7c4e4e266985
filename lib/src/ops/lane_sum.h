#pragma once
// Library-internal: a float sum that vectorizes.
//
// A plain `s += f(i)` loop is one serial chain of additions (the compiler may not reorder
// floating-point sums), so a row of 128 costs 128 add latencies. lane_sum keeps 16
// independent partial sums, which the compiler turns into one vector accumulator, and adds
// them up in double at the end. The rounding differs from a serial sum only in the last bits
// (each partial sum has 1/16 of the terms).
#include <cstddef>

namespace tg {
namespace detail {

/// Σ_{i<n} f(i), where f(i) returns a float.
template <class F>
double lane_sum(size_t n, F&& f) {
  constexpr size_t kLanes = 16;
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  double s = 0;
  for (size_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += f(i);
  return s;
}

}  // namespace detail
}  // namespace tg
