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

/// Elements of a cheap pass (an add, a copy) that make one part worth a wake-up of the pool
/// (a few µs): about 5 µs of work. Costlier passes use a fraction of it (kGrain / 4: exp).
constexpr int64_t kGrain = int64_t(1) << 15;

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

}  // namespace detail
}  // namespace tg
