#pragma once
// Where tensor memory comes from: every tensor value, gradient and saved intermediate is a
// buffer of tapegrad's own, from a size-class cache in front of malloc, and counted.
//
// The cache keeps freed buffers of 64 KiB and more (up to 256 MiB in all) for the next
// request of their size class, instead of giving their pages back to the kernel: a training
// step allocates and frees the same activations every step, and re-faulting their pages cost
// about 5% of a step (W3: 1,585 minor faults per step without the cache, about 15 with it).
// TAPEGRAD_BUFFER_CACHE=0 turns the cache off (every buffer goes back to malloc at once).
//
// The counters are what the memory benchmark reads (bench/memory_bench.cpp): the bytes held
// by live buffers now and at their peak, the tensor-level equivalent of PyTorch's allocator
// statistics.
#include <cstddef>
#include <cstdint>
#include <new>

namespace tg {

struct MemoryStats {
  int64_t live_bytes = 0;    // requested bytes of the buffers alive now
  int64_t peak_bytes = 0;    // the most live_bytes since start or reset_peak_memory_stats()
  int64_t cached_bytes = 0;  // freed buffers the cache keeps for reuse (not live)
  int64_t allocations = 0;   // buffers of the cached sizes (64 KiB and more) handed out so far
  int64_t cache_hits = 0;    // of those, served from the cache
};

MemoryStats memory_stats();
/// peak_bytes ← live_bytes.
void reset_peak_memory_stats();
/// Gives every cached buffer back to malloc.
void empty_cache();

namespace detail {
void* buffer_allocate(size_t bytes);
void buffer_free(void* p, size_t bytes) noexcept;
}  // namespace detail

/// The allocator of tg::Array (tapegrad/xtensor.h): tapegrad's buffers, 64-byte aligned.
template <class T>
struct BufferAllocator {
  using value_type = T;
  BufferAllocator() noexcept = default;
  template <class U>
  BufferAllocator(const BufferAllocator<U>&) noexcept {}  // NOLINT: rebinding
  /// tg::MemoryError (a tg::Error) when memory runs out.
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) n = size_t(-1) / sizeof(T);  // refused as too large
    return static_cast<T*>(detail::buffer_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { detail::buffer_free(p, n * sizeof(T)); }
  template <class U>
  struct rebind {
    using other = BufferAllocator<U>;
  };
};
template <class T, class U>
bool operator==(const BufferAllocator<T>&, const BufferAllocator<U>&) { return true; }
template <class T, class U>
bool operator!=(const BufferAllocator<T>&, const BufferAllocator<U>&) { return false; }

}  // namespace tg
