// tapegrad's buffers (tapegrad/memory.h): a size-class cache in front of malloc, and the
// counters of live and peak bytes.
//
// Why a cache. glibc serves a block above M_MMAP_THRESHOLD (128 kB at first; it rises, up to
// 32 MB, as such blocks are freed) with an mmap of its own and unmaps it on free, and it hands
// the top of its heap back to the kernel when enough is free there. A training step allocates
// and frees the same activations, gradients and GEMM outputs of a few MB every step, so their
// pages kept going back to the kernel, which mapped and zeroed them again on the next touch:
// 1,585 minor page faults per step of the benchmark's GPT (bench/workloads.cpp, W3), about 5%
// of its time. Earlier versions raised glibc's thresholds for the whole process (mallopt);
// this cache keeps tapegrad's own large buffers instead and leaves malloc's settings alone.
//
// Sizes of kMinCached bytes and more are rounded up to a size class (4 per power of two, so
// at most 19% more than asked) and a freed buffer waits in its class's list, up to kMaxCached
// bytes in all; smaller ones go straight to malloc, which keeps them in its own caches.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tapegrad/error.h"
#include "tapegrad/memory.h"

// Under AddressSanitizer every buffer is an exact allocation of its own, freed at once, so
// that ASan still sees every overflow by one element and every use after free.
#if defined(__SANITIZE_ADDRESS__)
#define TG_EXACT_BUFFERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_EXACT_BUFFERS 1
#endif
#endif

namespace tg {
namespace detail {

namespace {

constexpr size_t kAlign = 64;                      // a cache line; what xsimd asks for
constexpr size_t kMinCached = size_t(64) << 10;    // 64 KiB
constexpr int64_t kMaxCached = int64_t(256) << 20;  // 256 MiB waiting in all, at most

std::atomic<int64_t> g_live{0}, g_peak{0}, g_allocations{0}, g_hits{0};

/// Size classes from kMinCached up: 4 per power of two.
size_t class_index(size_t bytes) {
  int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1) | 1);
  // bytes in (2^log2, 2^(log2+1)]; quarter steps of 2^(log2 - 1)
  const size_t base = size_t(1) << log2;
  const size_t quarter = base / 4;
  const size_t step = (bytes - base + quarter - 1) / quarter;  // 1..4
  return static_cast<size_t>(log2) * 4 + step;
}

size_t class_bytes(size_t bytes) {
  int log2 = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1) | 1);
  const size_t base = size_t(1) << log2;
  const size_t quarter = base / 4;
  const size_t step = (bytes - base + quarter - 1) / quarter;
  return base + step * quarter;
}

struct Cache {
  std::mutex mutex;
  std::vector<std::vector<void*>> lists = std::vector<std::vector<void*>>(64 * 4 + 8);
  int64_t cached = 0;
  bool enabled = true;
};

Cache& cache() {
  static Cache* c = [] {
    auto* k = new Cache;  // never destroyed: buffers may be freed during exit
    const char* env = std::getenv("TAPEGRAD_BUFFER_CACHE");
    k->enabled = !(env && std::strcmp(env, "0") == 0);
#ifdef TG_EXACT_BUFFERS
    k->enabled = false;
#endif
    return k;
  }();
  return *c;
}

/// Called once the request is no longer counted as live.
[[noreturn]] void out_of_memory(size_t bytes) {
  const int64_t live = g_live.load(std::memory_order_relaxed);
  throw MemoryError("out of memory: cannot allocate a tensor buffer of " + std::to_string(bytes) +
                    " bytes (" + std::to_string(bytes >> 20) + " MiB); tapegrad holds " +
                    std::to_string(live >> 20) + " MiB in live buffers");
}

void count_alloc(size_t bytes) {
  const int64_t now = g_live.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                      static_cast<int64_t>(bytes);
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

/// Every buffer starts on a cache line. Not for speed alone: a vectorized loop may peel
/// elements until its data is aligned, so the rounding of a sum can depend on the address,
/// and the same computation must give the same bits in every run. malloc's block, with the
/// offset to its start kept just before the aligned address.
/// Null when memory runs out.
void* raw_alloc(size_t bytes) {
#ifdef TG_EXACT_BUFFERS
  void* exact = nullptr;
  return posix_memalign(&exact, kAlign, bytes) == 0 ? exact : nullptr;
#endif
  if (bytes > size_t(-1) - kAlign) return nullptr;
  void* base = std::malloc(bytes + kAlign);
  if (!base) return nullptr;
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kAlign) & ~uintptr_t(kAlign - 1);
  reinterpret_cast<void**>(aligned)[-1] = base;
  return reinterpret_cast<void*>(aligned);
}

void raw_free(void* p) {
#ifdef TG_EXACT_BUFFERS
  std::free(p);
  return;
#endif
  std::free(reinterpret_cast<void**>(p)[-1]);
}

}  // namespace

void* buffer_allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  count_alloc(bytes);
  Cache& c = cache();
  void* p = nullptr;
  if (bytes < kMinCached || !c.enabled) {
    p = raw_alloc(bytes);
  } else {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    const size_t k = class_index(bytes);
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      auto& list = c.lists[k];
      if (!list.empty()) {
        p = list.back();
        list.pop_back();
        c.cached -= static_cast<int64_t>(class_bytes(bytes));
        g_hits.fetch_add(1, std::memory_order_relaxed);
        return p;
      }
    }
    p = raw_alloc(class_bytes(bytes));
  }
  if (!p) {
    g_live.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    out_of_memory(bytes);
  }
  return p;
}

void buffer_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  g_live.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  Cache& c = cache();
  if (bytes >= kMinCached && c.enabled) {
    const int64_t size = static_cast<int64_t>(class_bytes(bytes));
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.cached + size <= kMaxCached) {
      try {
        c.lists[class_index(bytes)].push_back(p);
        c.cached += size;
        return;
      } catch (...) {  // no room to remember it: free it instead
      }
    }
  }
  raw_free(p);
}

}  // namespace detail

MemoryStats memory_stats() {
  MemoryStats s;
  s.live_bytes = detail::g_live.load(std::memory_order_relaxed);
  s.peak_bytes = detail::g_peak.load(std::memory_order_relaxed);
  s.allocations = detail::g_allocations.load(std::memory_order_relaxed);
  s.cache_hits = detail::g_hits.load(std::memory_order_relaxed);
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  s.cached_bytes = c.cached;
  return s;
}

void reset_peak_memory_stats() {
  detail::g_peak.store(detail::g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void empty_cache() {
  detail::Cache& c = detail::cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& list : c.lists) {
    for (void* p : list) detail::raw_free(p);
    list.clear();
  }
  c.cached = 0;
}

}  // namespace tg
