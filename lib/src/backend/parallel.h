#pragma once
// Library-internal: a loop over [0, n) split across tapegrad's threads (thread_pool.h), for
// the passes around the products (elementwise kernels, row-wise ops, the optimizer updates).
//
// The parts depend only on n, the grain and tg::get_num_threads(), never on timing, and a
// body that computes each index (row, column) on its own gives the same bits however [0, n)
// is cut: 1 thread and 2 agree bit for bit.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/thread_pool.h"

namespace tg {
namespace detail {

/// The fewest elements of a cheap pass (an add, a copy) worth a part of their own: about 2 µs
/// of work. Costlier passes use a fraction of it (kGrain / 8: GELU). Measured on a Zen 4 core
/// (AVX-512) with the workers awake, as they are between the products of a step: a job costs
/// about 0.3 µs; an add of 32K elements (2 parts of kGrain) takes 0.6x its 1-thread time, of
/// 8K elements 0.87x; GELU with its derivative takes 0.54x from 4K elements on.
constexpr int64_t kGrain = int64_t(1) << 14;

/// body(begin, end) over [0, n): in up to pool_threads() parts of at least `grain` indices
/// each, on tapegrad's threads, when n is large enough and this thread is not already running
/// a part of a parallel job; else body(0, n) on the caller. Every edge but n is a multiple of
/// `align` (16 floats: a cache line, for elementwise passes).
template <class F>
void for_range(int64_t n, int64_t grain, F&& body, int64_t align = 16) {
  const int64_t most = n / std::max<int64_t>(grain, 1);
  const int parts = most < 2 || in_parallel_part()
                        ? 1
                        : static_cast<int>(std::min<int64_t>(pool_threads(), most));
  if (parts == 1) {
    if (n > 0) body(int64_t(0), n);
    return;
  }
  auto edge = [&](int q) { return q == parts ? n : n * q / parts / align * align; };
  parallel_for(parts, [&](int p) {
    const int64_t begin = edge(p), end = edge(p + 1);
    if (begin < end) body(begin, end);
  });
}

/// for_range over rows of `cols` elements each: at least `grain` elements to a part.
template <class F>
void for_rows(int64_t rows, int64_t cols, int64_t grain, F&& body) {
  for_range(rows, (grain + std::max<int64_t>(cols, 1) - 1) / std::max<int64_t>(cols, 1),
            std::forward<F>(body), 1);
}

/// f(r) for every row r < rows of `cols` elements each, the rows split as for_rows splits
/// them (I: the caller's index type, int64_t or size_t).
template <class I, class F>
void for_each_row(I rows, I cols, int64_t grain, F&& f) {
  for_rows(static_cast<int64_t>(rows), static_cast<int64_t>(cols), grain,
           [&](int64_t r0, int64_t r1) {
             for (auto r = static_cast<I>(r0); r < static_cast<I>(r1); ++r) f(r);
           });
}

}  // namespace detail
}  // namespace tg
