// The cuBLAS GEMM plugin: libtapegrad_cuda.so, loaded by lib/src/backend/device.cpp with dlopen.
// Host C++ only (no kernels of our own). The ABI is in plugin_abi.h.
//
// Row-major to cuBLAS's column-major: a row-major (R, C) buffer with leading dimension ld
// is, read column-major, its transpose (C, R) with the same ld. So row-major
//   C = op(A)·op(B)   is column-major   Cᵀ = op(B)ᵀ·op(A)ᵀ,
// which is cublasSgemm(opB, opA, N, M, K, B, ldb, A, lda, C, ldc): the operands swap, the
// transpose flags and leading dimensions pass through unchanged.
//
// Device memory: one grow-only buffer per operand (A, B, C), reused by every call. Device
// copies keep the host layout (leading dimensions and batch strides), so ld and strides
// pass to cuBLAS as they are. C comes back row by row (cudaMemcpy2D), never touching the
// host elements between rows (C may be a sub-matrix).
//
// The cache of device copies (ABI version 2): an operand that comes with a tg_cuda_operand
// (a weight, or any leaf tensor) is looked up by (storage, stamp, host address, element
// count); a hit skips its upload. The caller changes the stamp with every write, so a copy is
// never stale; a miss drops the storage's copies of other stamps, and room is made by
// evicting the least recently used copies (never the other operand of the same product).
// An operand larger than the budget goes through the scratch buffers, uncached.
//
// Precision: CUBLAS_DEFAULT_MATH, i.e. true fp32 (no TF32), to match OpenBLAS.
// Thread safety: one mutex around every entry point (one handle, one stream, one pool).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include "plugin_abi.h"

namespace {

struct Buffer {
  float* ptr = nullptr;
  size_t cap = 0;  // floats
};

std::mutex g_mu;
bool g_ready = false;
int g_device = 0;
cublasHandle_t g_handle = nullptr;
cudaStream_t g_stream = nullptr;
Buffer g_a, g_b, g_c;

/// One cached device copy: `n` floats of storage `storage` at host address `host`, as they
/// were at `stamp`.
struct CacheKey {
  uint64_t storage, stamp;
  const float* host;
  int64_t n;
  bool operator==(const CacheKey& o) const {
    return storage == o.storage && stamp == o.stamp && host == o.host && n == o.n;
  }
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    size_t h = std::hash<uint64_t>()(k.storage);
    h = h * 31 + std::hash<uint64_t>()(k.stamp);
    h = h * 31 + std::hash<const void*>()(k.host);
    return h * 31 + std::hash<int64_t>()(k.n);
  }
};
struct CacheEntry {
  CacheKey key;
  float* dev;
  size_t bytes;
};

/// Device copies of keyed operands, most recently used first (guarded by g_mu).
class DeviceCache {
 public:
  /// The device copy of `n` floats at `host`, uploaded now if it is not cached (on g_stream);
  /// null if it cannot be cached (too large, disabled, or out of device memory), in which
  /// case the caller uploads to scratch. `keep` is never evicted (the other operand).
  float* get(const tg_cuda_operand& id, const float* host, int64_t n, const float* keep,
             cudaError_t& err);
  void forget(uint64_t storage) {
    for (auto it = lru_.begin(); it != lru_.end();)
      it = it->key.storage == storage ? drop(it) : std::next(it);
  }
  void set_budget(uint64_t bytes) {
    budget_ = bytes;
    while (bytes_ > budget_ && !lru_.empty()) {
      drop(std::prev(lru_.end()));
      ++stats_.evictions;
    }
  }
  void clear() {
    while (!lru_.empty()) drop(lru_.begin());
  }
  tg_cuda_cache_stats stats() const {
    tg_cuda_cache_stats s = stats_;
    s.entries = lru_.size();
    s.bytes = bytes_;
    s.budget = budget_;
    return s;
  }
  void count_upload(size_t bytes) { stats_.uploaded_bytes += bytes; }

 private:
  using Iter = std::list<CacheEntry>::iterator;
  Iter drop(Iter it) {
    cudaFree(it->dev);
    bytes_ -= it->bytes;
    index_.erase(it->key);
    return lru_.erase(it);
  }
  std::list<CacheEntry> lru_;
  std::unordered_map<CacheKey, Iter, CacheKeyHash> index_;
  uint64_t bytes_ = 0, budget_ = 0;
  tg_cuda_cache_stats stats_{};
};

float* DeviceCache::get(const tg_cuda_operand& id, const float* host, int64_t n,
                        const float* keep, cudaError_t& err) {
  err = cudaSuccess;
  const CacheKey key{id.storage, id.stamp, host, n};
  auto found = index_.find(key);
  if (found != index_.end()) {
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, found->second);  // now the most recent
    return found->second->dev;
  }
  ++stats_.misses;
  for (auto it = lru_.begin(); it != lru_.end();)  // the storage was written: older copies die
    it = it->key.storage == id.storage && it->key.stamp != id.stamp ? drop(it) : std::next(it);
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (bytes == 0 || bytes > budget_) return nullptr;
  auto evict_one = [&]() {  // the least recent copy that is not `keep`
    for (auto it = std::prev(lru_.end());; --it) {
      if (it->dev != keep) {
        drop(it);
        ++stats_.evictions;
        return true;
      }
      if (it == lru_.begin()) return false;
    }
  };
  while (bytes_ + bytes > budget_ && !lru_.empty())
    if (!evict_one()) return nullptr;
  void* p = nullptr;
  while ((err = cudaMalloc(&p, bytes)) != cudaSuccess) {
    cudaGetLastError();  // out of device memory: make room, or give up caching this one
    if (lru_.empty() || !evict_one()) {
      err = cudaSuccess;
      return nullptr;
    }
  }
  float* dev = static_cast<float*>(p);
  if ((err = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, g_stream)) !=
      cudaSuccess) {
    cudaFree(dev);
    return nullptr;
  }
  stats_.uploaded_bytes += bytes;
  lru_.push_front(CacheEntry{key, dev, bytes});
  index_.emplace(key, lru_.begin());
  bytes_ += bytes;
  return dev;
}

DeviceCache g_cache;

int fail(char* msg, size_t len, int code, const char* what, const char* detail, int num) {
  if (msg && len) std::snprintf(msg, len, "%s: %s (%d)", what, detail, num);
  return code;
}
int cuda_fail(char* msg, size_t len, int code, const char* what, cudaError_t e) {
  return fail(msg, len, code, what, cudaGetErrorString(e), static_cast<int>(e));
}
int cublas_fail(char* msg, size_t len, int code, const char* what, cublasStatus_t s) {
  return fail(msg, len, code, what, cublasGetStatusString(s), static_cast<int>(s));
}

/// Grow `b` to hold at least `n` floats (by 1.5x steps, so a slowly growing workload does
/// not reallocate every call). Contents are not kept.
cudaError_t reserve(Buffer& b, size_t n) {
  if (n <= b.cap) return cudaSuccess;
  size_t want = b.cap + b.cap / 2 > n ? b.cap + b.cap / 2 : n;
  if (b.ptr) cudaFree(b.ptr);
  b.ptr = nullptr;
  b.cap = 0;
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, want * sizeof(float));
  if (e != cudaSuccess && want > n) {  // the 1.5x step may not fit where n does
    cudaGetLastError();
    want = n;
    e = cudaMalloc(&p, want * sizeof(float));
  }
  if (e != cudaSuccess) return e;
  b.ptr = static_cast<float*>(p);
  b.cap = want;
  return cudaSuccess;
}

void release() {
  g_cache.clear();
  for (Buffer* b : {&g_a, &g_b, &g_c}) {
    if (b->ptr) cudaFree(b->ptr);
    *b = Buffer{};
  }
  if (g_handle) cublasDestroy(g_handle);
  if (g_stream) cudaStreamDestroy(g_stream);
  g_handle = nullptr;
  g_stream = nullptr;
  g_ready = false;
}

/// Elements from the first to the last element of a row-major (rows, cols) matrix.
int64_t extent(int64_t rows, int64_t cols, int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}
/// Elements spanned by `batch` such matrices at `stride` (0 = one shared matrix).
int64_t span(int64_t batch, int64_t stride, int64_t ext) {
  return stride == 0 || batch == 0 ? ext : (batch - 1) * stride + ext;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

int run(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
        int64_t lda, int64_t stride_a, const tg_cuda_operand* a_id, const float* B, int64_t ldb,
        int64_t stride_b, const tg_cuda_operand* b_id, float beta, float* C, int64_t ldc,
        int64_t stride_c, int64_t batch, char* msg, size_t len) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_ready) return fail(msg, len, TG_CUDA_E_UNTOUCHED, "sgemm", "plugin not initialised", 0);
  if (M == 0 || N == 0 || batch == 0) return 0;
  if (K == 0)  // C = beta * C: the caller does this on the CPU; cuBLAS is not asked
    return fail(msg, len, TG_CUDA_E_UNTOUCHED, "sgemm", "K = 0 is the caller's job", 0);
  if (!fits_int(M) || !fits_int(N) || !fits_int(K) || !fits_int(lda) || !fits_int(ldb) ||
      !fits_int(ldc) || !fits_int(batch) || stride_a < 0 || stride_b < 0 || stride_c < 0)
    return fail(msg, len, TG_CUDA_E_UNTOUCHED, "sgemm", "sizes outside cuBLAS's int range", 0);
  const int64_t ext_a = trans_a ? extent(K, M, lda) : extent(M, K, lda);
  const int64_t ext_b = trans_b ? extent(N, K, ldb) : extent(K, N, ldb);
  const int64_t ext_c = extent(M, N, ldc);
  if (batch > 1 && stride_c < ext_c)
    return fail(msg, len, TG_CUDA_E_UNTOUCHED, "sgemm", "output matrices overlap", 0);
  const int64_t n_a = span(batch, stride_a, ext_a), n_b = span(batch, stride_b, ext_b),
                n_c = span(batch, stride_c, ext_c);

  cudaError_t e = cudaSetDevice(g_device);
  if (e != cudaSuccess) return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaSetDevice", e);
  // The operands: cached device copies where the caller named them, else the scratch buffers.
  const float* dev_a = nullptr;
  const float* dev_b = nullptr;
  if (a_id && a_id->storage != 0) {
    dev_a = g_cache.get(*a_id, A, n_a, nullptr, e);
    if (e != cudaSuccess) return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cache A", e);
  }
  if (b_id && b_id->storage != 0) {
    dev_b = g_cache.get(*b_id, B, n_b, dev_a, e);
    if (e != cudaSuccess) return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cache B", e);
  }
  if ((!dev_a && (e = reserve(g_a, n_a)) != cudaSuccess) ||
      (!dev_b && (e = reserve(g_b, n_b)) != cudaSuccess) || (e = reserve(g_c, n_c)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMalloc", e);

  const auto H2D = cudaMemcpyHostToDevice;
  if (!dev_a) {
    if ((e = cudaMemcpyAsync(g_a.ptr, A, n_a * sizeof(float), H2D, g_stream)) != cudaSuccess)
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy A", e);
    g_cache.count_upload(n_a * sizeof(float));
    dev_a = g_a.ptr;
  }
  if (!dev_b) {
    if ((e = cudaMemcpyAsync(g_b.ptr, B, n_b * sizeof(float), H2D, g_stream)) != cudaSuccess)
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy B", e);
    g_cache.count_upload(n_b * sizeof(float));
    dev_b = g_b.ptr;
  }
  if (beta != 0.0f) {
    if ((e = cudaMemcpyAsync(g_c.ptr, C, n_c * sizeof(float), H2D, g_stream)) != cudaSuccess)
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy C", e);
    g_cache.count_upload(n_c * sizeof(float));
  }

  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  cublasStatus_t s;
  if (batch == 1)
    s = cublasSgemm(g_handle, op_b, op_a, n, m, k, &alpha, dev_b, static_cast<int>(ldb), dev_a,
                    static_cast<int>(lda), &beta, g_c.ptr, static_cast<int>(ldc));
  else
    s = cublasSgemmStridedBatched(g_handle, op_b, op_a, n, m, k, &alpha, dev_b,
                                  static_cast<int>(ldb), stride_b, dev_a,
                                  static_cast<int>(lda), stride_a, &beta, g_c.ptr,
                                  static_cast<int>(ldc), stride_c, static_cast<int>(batch));
  if (s != CUBLAS_STATUS_SUCCESS) {
    cudaStreamSynchronize(g_stream);
    return cublas_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cublasSgemm", s);
  }
  // Make sure the product succeeded before writing any of C back.
  if ((e = cudaStreamSynchronize(g_stream)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cublasSgemm", e);

  const size_t pitch = static_cast<size_t>(ldc) * sizeof(float), width = N * sizeof(float);
  if (batch == 1 || stride_c == M * ldc) {  // the rows of all batches are evenly spaced
    e = cudaMemcpy2D(C, pitch, g_c.ptr, pitch, width, static_cast<size_t>(M * batch),
                     cudaMemcpyDeviceToHost);
  } else {
    for (int64_t i = 0; i < batch && e == cudaSuccess; ++i)
      e = cudaMemcpy2D(C + i * stride_c, pitch, g_c.ptr + i * stride_c, pitch, width,
                       static_cast<size_t>(M), cudaMemcpyDeviceToHost);
  }
  if (e != cudaSuccess) return cuda_fail(msg, len, TG_CUDA_E_CLOBBERED, "cudaMemcpy C", e);
  return 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int tg_cuda_abi_version(void) {
  return TG_CUDA_ABI_VERSION;
}

__attribute__((visibility("default"))) int tg_cuda_init(char* msg, size_t len) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_ready) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaGetDeviceCount", e);
    if (count == 0)
      return fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaGetDeviceCount", "no device", 0);
    g_device = 0;  // the first visible device; choose others with CUDA_VISIBLE_DEVICES
    if ((e = cudaSetDevice(g_device)) != cudaSuccess)
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaSetDevice", e);
    if ((e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking)) != cudaSuccess) {
      g_stream = nullptr;
      return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaStreamCreate", e);
    }
    cublasStatus_t s = cublasCreate(&g_handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
      g_handle = nullptr;
      release();
      return cublas_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cublasCreate", s);
    }
    if ((s = cublasSetStream(g_handle, g_stream)) != CUBLAS_STATUS_SUCCESS ||
        (s = cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
      release();
      return cublas_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cublasSetStream/MathMode", s);
    }
    g_ready = true;
  }
  cudaDeviceProp p{};
  if (msg && len) {
    if (cudaGetDeviceProperties(&p, g_device) == cudaSuccess)
      std::snprintf(msg, len, "%s, sm_%d%d, %.0f GiB", p.name, p.major, p.minor,
                    static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    else
      std::snprintf(msg, len, "device %d", g_device);
  }
  return 0;
}

__attribute__((visibility("default"))) int tg_cuda_sgemm(
    int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
    int64_t lda, const tg_cuda_operand* a_id, const float* B, int64_t ldb,
    const tg_cuda_operand* b_id, float beta, float* C, int64_t ldc, char* msg, size_t len) {
  return run(trans_a, trans_b, M, N, K, alpha, A, lda, 0, a_id, B, ldb, 0, b_id, beta, C, ldc,
             0, 1, msg, len);
}

__attribute__((visibility("default"))) int tg_cuda_sgemm_strided_batched(
    int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
    int64_t lda, int64_t stride_a, const tg_cuda_operand* a_id, const float* B, int64_t ldb,
    int64_t stride_b, const tg_cuda_operand* b_id, float beta, float* C, int64_t ldc,
    int64_t stride_c, int64_t batch, char* msg, size_t len) {
  return run(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, a_id, B, ldb, stride_b, b_id,
             beta, C, ldc, stride_c, batch, msg, len);
}

__attribute__((visibility("default"))) void tg_cuda_forget(uint64_t storage) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_cache.forget(storage);
}

__attribute__((visibility("default"))) void tg_cuda_set_cache_budget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_cache.set_budget(bytes);
}

__attribute__((visibility("default"))) void tg_cuda_get_cache_stats(tg_cuda_cache_stats* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (out) *out = g_cache.stats();
}

__attribute__((visibility("default"))) void tg_cuda_shutdown(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  release();
}

}  // extern "C"
