// Large temporaries and glibc's malloc: the cure for re-faulted pages.
//
// By default glibc serves a block above M_MMAP_THRESHOLD (128 kB at first; it rises, up to
// 32 MB, as such blocks are freed) with an mmap of its own and unmaps it on free, and it hands
// the top of the heap back to the kernel whenever more than M_TRIM_THRESHOLD (twice the mmap
// threshold) is free there. A training step allocates and frees the same activations,
// gradients and GEMM outputs of a few MB every step, so their pages keep going back to the
// kernel, which maps and zeroes them again on the next touch: 1,585 minor page faults per
// step of the benchmark's GPT (bench/workloads.cpp, W3), about 5% of its time.
//
// With the mmap threshold at 64 MB and the trim threshold at 256 MB, freed blocks stay in the
// heap and the next step reuses them: 15 faults per step. The price: up to 256 MB of freed
// memory may stay mapped (counted in RSS) after a peak, and blocks up to 64 MB come from the
// heap, where they can fragment it. Measured on the benchmarks, peak RSS moves by -7 to +3 MB.
//
// tapegrad sets both once, when the first tensor is made (new_impl() in core/storage.h calls
// ensure_malloc_tuned()), never at load time, so a program that links tapegrad and makes no
// tensor keeps glibc's defaults. TAPEGRAD_MALLOC_TUNING=0 opts out: for applications that
// tune malloc themselves (mallopt, MALLOC_*_ env vars, GLIBC_TUNABLES) or replace it.
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/storage.h"

namespace tg {
namespace detail {

bool tune_malloc() {
  const char* env = std::getenv("TAPEGRAD_MALLOC_TUNING");
  if (env && std::strcmp(env, "0") == 0) return false;
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 64 << 20;   // blocks below this come from the heap
  constexpr int kTrimThreshold = 256 << 20;  // free heap top kept before giving it back
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
         mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;  // other C libraries: left alone
#endif
}

}  // namespace detail
}  // namespace tg
