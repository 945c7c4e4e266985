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
// host elements between rows (C may be a sub-matrix). Nothing is cached between calls:
// weights are uploaded on every call (see README, "GPU (optional)").
//
// Precision: CUBLAS_DEFAULT_MATH, i.e. true fp32 (no TF32), to match OpenBLAS.
// Thread safety: one mutex around every entry point (one handle, one stream, one pool).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdio>
#include <mutex>

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
        int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
        float* C, int64_t ldc, int64_t stride_c, int64_t batch, char* msg, size_t len) {
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
  if ((e = reserve(g_a, n_a)) != cudaSuccess || (e = reserve(g_b, n_b)) != cudaSuccess ||
      (e = reserve(g_c, n_c)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMalloc", e);

  const auto H2D = cudaMemcpyHostToDevice;
  if ((e = cudaMemcpyAsync(g_a.ptr, A, n_a * sizeof(float), H2D, g_stream)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy A", e);
  if ((e = cudaMemcpyAsync(g_b.ptr, B, n_b * sizeof(float), H2D, g_stream)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy B", e);
  if (beta != 0.0f &&
      (e = cudaMemcpyAsync(g_c.ptr, C, n_c * sizeof(float), H2D, g_stream)) != cudaSuccess)
    return cuda_fail(msg, len, TG_CUDA_E_UNTOUCHED, "cudaMemcpy C", e);

  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  cublasStatus_t s;
  if (batch == 1)
    s = cublasSgemm(g_handle, op_b, op_a, n, m, k, &alpha, g_b.ptr, static_cast<int>(ldb),
                    g_a.ptr, static_cast<int>(lda), &beta, g_c.ptr, static_cast<int>(ldc));
  else
    s = cublasSgemmStridedBatched(g_handle, op_b, op_a, n, m, k, &alpha, g_b.ptr,
                                  static_cast<int>(ldb), stride_b, g_a.ptr,
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

__attribute__((visibility("default"))) int tg_cuda_sgemm(int trans_a, int trans_b, int64_t M,
                                                         int64_t N, int64_t K, float alpha,
                                                         const float* A, int64_t lda,
                                                         const float* B, int64_t ldb,
                                                         float beta, float* C, int64_t ldc,
                                                         char* msg, size_t len) {
  return run(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, msg,
             len);
}

__attribute__((visibility("default"))) int tg_cuda_sgemm_strided_batched(
    int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
    int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
    float* C, int64_t ldc, int64_t stride_c, int64_t batch, char* msg, size_t len) {
  return run(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C,
             ldc, stride_c, batch, msg, len);
}

__attribute__((visibility("default"))) void tg_cuda_shutdown(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  release();
}

}  // extern "C"
