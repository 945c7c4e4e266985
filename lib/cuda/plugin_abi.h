/* The C ABI between libtapegrad (which dlopens) and libtapegrad_cuda.so (the plugin).
 * Plain C types only, so either side can change compiler or standard library.
 * Matrices are row-major with leading dimensions, exactly as in lib/src/backend/gemm.h.
 *
 * Every call returns a status:
 *   0                      success;
 *   TG_CUDA_E_UNTOUCHED    failed before the result was written: C is as it was, so the
 *                          caller may redo the product on the CPU;
 *   TG_CUDA_E_CLOBBERED    failed while copying the result back: C is undefined.
 * On failure, `msg` (capacity `msg_len`, always NUL-terminated) says why.
 *
 * Version 2 adds the cache of device copies: an operand A or B may come with a
 * tg_cuda_operand saying whose values it is (a storage id that is never reused) and a stamp
 * that changes with every write to them. The plugin keeps the device copy of such an operand,
 * keyed by (storage, stamp, host address, element count), and reuses it while the key is
 * unchanged: a weight is uploaded once, not once per product. A new stamp for a storage drops
 * its older copies. The cache is bounded by a budget in bytes, least recently used first, and
 * tg_cuda_forget drops a storage's copies when it dies. A NULL operand is uploaded as before. */
#ifndef TAPEGRAD_CUDA_PLUGIN_ABI_H
#define TAPEGRAD_CUDA_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#define TG_CUDA_ABI_VERSION 2
#define TG_CUDA_E_UNTOUCHED 1
#define TG_CUDA_E_CLOBBERED 2

#ifdef __cplusplus
extern "C" {
#endif

/* Whose values an operand is; storage 0 means "do not cache". */
typedef struct tg_cuda_operand {
  uint64_t storage; /* never reused while the process lives */
  uint64_t stamp;   /* changes with every write to the storage */
} tg_cuda_operand;

/* What the cache did since the plugin was initialised (bytes, counts). */
typedef struct tg_cuda_cache_stats {
  uint64_t hits, misses, evictions; /* lookups of keyed operands; copies dropped for room */
  uint64_t entries, bytes, budget;  /* now */
  uint64_t uploaded_bytes;          /* every host-to-device copy, cached or not */
} tg_cuda_cache_stats;

/* TG_CUDA_ABI_VERSION of the plugin; the core refuses a plugin with another version. */
typedef int (*tg_cuda_abi_version_fn)(void);
/* Find a device, create the cuBLAS handle and stream. Idempotent. On success `msg` names
 * the device ("NVIDIA H200, sm_90, 139 GiB"). */
typedef int (*tg_cuda_init_fn)(char* msg, size_t msg_len);
/* C = alpha * op(A) · op(B) + beta * C, with C (M, N); beta = 0 ignores C's contents. */
typedef int (*tg_cuda_sgemm_fn)(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                                float alpha, const float* A, int64_t lda,
                                const tg_cuda_operand* a_id, const float* B, int64_t ldb,
                                const tg_cuda_operand* b_id, float beta, float* C, int64_t ldc,
                                char* msg, size_t msg_len);
/* `batch` products at element strides; stride 0 reuses one A or B. C's matrices must not
 * overlap. */
typedef int (*tg_cuda_sgemm_strided_batched_fn)(int trans_a, int trans_b, int64_t M,
                                                int64_t N, int64_t K, float alpha,
                                                const float* A, int64_t lda, int64_t stride_a,
                                                const tg_cuda_operand* a_id, const float* B,
                                                int64_t ldb, int64_t stride_b,
                                                const tg_cuda_operand* b_id,
                                                float beta, float* C, int64_t ldc,
                                                int64_t stride_c, int64_t batch, char* msg,
                                                size_t msg_len);
/* Drop every cached copy of `storage` (it died). */
typedef void (*tg_cuda_forget_fn)(uint64_t storage);
/* Bound the cache to `bytes` (0 disables it), evicting what no longer fits. */
typedef void (*tg_cuda_set_cache_budget_fn)(uint64_t bytes);
/* The cache's counters (tg_cuda_get_cache_stats). */
typedef void (*tg_cuda_cache_stats_fn)(tg_cuda_cache_stats* out);
/* Free device buffers, the handle and the stream. init may be called again afterwards. */
typedef void (*tg_cuda_shutdown_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
