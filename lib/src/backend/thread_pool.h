#pragma once
// Library-internal: tapegrad's own worker threads, which split large products (gemm_cblas.cpp).
//
// Why not OpenBLAS's threads: on a machine with other work, or next to another pool, its
// workers yield and sleep between calls, and the small products of a training step (tens to
// hundreds of microseconds each) often run slower on 2 OpenBLAS threads than on 1. These
// workers spin for a short while after each job (so that the next product of the same step
// finds them awake), then sleep; each part of a split product is one single-threaded
// OpenBLAS call.
#include <cstdint>
#include <functional>

namespace tg {
namespace detail {

/// Threads that one product may use, the caller's included (tg::set_num_threads).
int pool_threads();
/// Sets it (n >= 1): n - 1 workers are started (or stopped) now.
void set_pool_threads(int n);

/// Runs f(0), ..., f(parts - 1) and returns when all are done. The caller and the workers
/// each take the next part not yet taken until none is left, so a worker that is late to
/// wake never holds the caller up. If another thread is using the workers at that moment, or
/// f calls parallel_for, every part runs on the caller, one after the other. f must not throw.
void parallel_for(int parts, const std::function<void(int)>& f);

/// Whether this thread is running a part of a parallel_for job that runs on several threads
/// (a worker, or the caller while it takes parts): the gemm trace marks products made there.
bool in_parallel_part();

/// How many parallel_for jobs have run on several threads in this process (for tests: a pass
/// that should split did).
uint64_t pool_jobs();

}  // namespace detail
}  // namespace tg
