/* The C ABI between libtapegrad (which dlopens) and libtapegrad_cuda.so (the plugin).
 * Plain C types only, so either side can change compiler or standard library.
 * Matrices are row-major with leading dimensions, exactly as in lib/src/backend/gemm.h.
 *
 * Every call returns a status:
 *   0                      success;
 *   TG_CUDA_E_UNTOUCHED    failed before the result was written: C is as it was, so the
 *                          caller may redo the product on the CPU;
 *   TG_CUDA_E_CLOBBERED    failed while copying the result back: C is undefined.
 * On failure, `msg` (capacity `msg_len`, always NUL-terminated) says why. */
#ifndef TAPEGRAD_CUDA_PLUGIN_ABI_H
#define TAPEGRAD_CUDA_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define TG_CUDA_ABI_VERSION 1
#define TG_CUDA_E_UNTOUCHED 1
#define TG_CUDA_E_CLOBBERED 2

#ifdef __cplusplus
extern "C" {
#endif

/* TG_CUDA_ABI_VERSION of the plugin; the core refuses a plugin with another version. */
typedef int (*tg_cuda_abi_version_fn)(void);
/* Find a device, create the cuBLAS handle and stream. Idempotent. On success `msg` names
 * the device ("NVIDIA H200, sm_90, 139 GiB"). */
typedef int (*tg_cuda_init_fn)(char* msg, size_t msg_len);
/* C = alpha * op(A) · op(B) + beta * C, with C (M, N); beta = 0 ignores C's contents. */
typedef int (*tg_cuda_sgemm_fn)(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                float alpha, const float* A, int64_t lda, const float* B,
                                int64_t ldb, float beta, float* C, int64_t ldc, char* msg,
                                size_t msg_len);
/* `batch` products at element strides; stride 0 reuses one A or B. C's matrices must not
 * overlap. */
typedef int (*tg_cuda_sgemm_strided_batched_fn)(int trans_a, int trans_b, int64_t M,
                                                int64_t N, int64_t K, float alpha,
                                                const float* A, int64_t lda, int64_t stride_a,
                                                const float* B, int64_t ldb, int64_t stride_b,
                                                float beta, float* C, int64_t ldc,
                                                int64_t stride_c, int64_t batch, char* msg,
                                                size_t msg_len);
/* Free device buffers, the handle and the stream. init may be called again afterwards. */
typedef void (*tg_cuda_shutdown_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
