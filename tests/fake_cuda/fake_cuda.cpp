// Definitions for cuda_runtime_api.h and cublas_v2.h in this folder (host memory, a plain
// column-major triple loop). Device allocations start as NaN, so reading memory that was
// never uploaded shows up in the results.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cublas_v2.h"

struct FakeStream {};
struct FakeHandle {};

cudaError_t cudaGetDeviceCount(int* count) { *count = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "emulated");
  p->major = 0;
  p->minor = 0;
  p->totalGlobalMem = 0;
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "error"; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
  float* f = static_cast<float*>(std::malloc(bytes ? bytes : 1));
  if (!f) return cudaErrorMemoryAllocation;
  for (size_t i = 0; i < bytes / sizeof(float); ++i) f[i] = std::nanf("");
  *p = f;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                         size_t width, size_t height, cudaMemcpyKind) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidValue;
  for (size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                width);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new FakeStream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }

cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new FakeHandle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "invalid value";
}

// Column-major: C (m, n, ldc) = alpha * op(A) op(B) + beta * C, op(A) (m, k), op(B) (k, n);
// A is stored (m, k) with lda >= m, or for OP_T (k, m) with lda >= k; likewise B.
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float* alpha, const float* A, int lda,
                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < (rows_a > 1 ? rows_a : 1) ||
      ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l) {
        const float a = ta == CUBLAS_OP_N ? A[i + l * lda] : A[l + i * lda];
        const float b = tb == CUBLAS_OP_N ? B[l + j * ldb] : B[j + l * ldb];
        s += static_cast<double>(a) * b;
      }
      float& c = C[i + j * ldc];
      c = static_cast<float>(*alpha * s + (*beta == 0 ? 0.0 : *beta * c));
    }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long sa, const float* B, int ldb, long long sb,
                                         const float* beta, float* C, int ldc, long long sc,
                                         int batch) {
  for (int i = 0; i < batch; ++i) {
    const cublasStatus_t s = cublasSgemm(h, ta, tb, m, n, k, alpha, A + i * sa, lda, B + i * sb,
                                         ldb, beta, C + i * sc, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
  }
  return CUBLAS_STATUS_SUCCESS;
}
