#pragma once
// The one GEMM interface every product in tapegrad goes through (matmul, linear, attention).
// Row-major, with leading dimensions, like cblas. Deliberately free of xtensor and cblas
// headers: <cblas.h> cannot share a translation unit with xtensor-blas.
// gemm and gemm_strided_batched dispatch (gemm.cpp) to OpenBLAS or to the cuBLAS plugin,
// as chosen by tg::set_device / TAPEGRAD_DEVICE (tapegrad/device.h).
#include <cstdint>

namespace tg {
namespace gemm {

/// Whose values an operand is, for the GPU's cache of device copies: its storage's id (never
/// reused) and a stamp that changes with every write to it. storage 0: not cached (uploaded
/// for each product). Ops name the operands that are leaves (weights, constant inputs); see
/// operand_id() in ops/common.h.
struct OperandId {
  uint64_t storage = 0;
  uint64_t stamp = 0;
};

/// C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C, where op(X) = Xᵀ if trans_x.
/// A is stored (M,K) or, transposed, (K,M); likewise B. beta = 0 ignores C's contents.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, OperandId id_a = {}, OperandId id_b = {});

/// `batch` independent GEMMs of the same shape at fixed strides (elements) between the
/// operands; a stride of 0 reuses the same matrix (a broadcast operand).
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const float* A, int64_t lda, int64_t stride_a,
                          const float* B, int64_t ldb, int64_t stride_b, float beta, float* C,
                          int64_t ldc, int64_t stride_c, int64_t batch, OperandId id_a = {},
                          OperandId id_b = {});

/// Whether products may run on the GPU with its cache on: only then are operand ids worth
/// computing (a relaxed atomic load).
bool device_cache_active();

/// The CPU implementation (OpenBLAS's sgemm, loaded at run time: openblas.h), always available.
void cpu_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);

/// The CPU implementation of gemm_strided_batched: the matrices split across threads when
/// their outputs are disjoint (see gemm_cblas.cpp).
void cpu_gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                              float alpha, const float* A, int64_t lda, int64_t stride_a,
                              const float* B, int64_t ldb, int64_t stride_b, float beta,
                              float* C, int64_t ldc, int64_t stride_c, int64_t batch);

/// CPU threads: n >= 1 switches to tapegrad's own threads, OpenBLAS single-threaded
/// (gemm_cblas.cpp); until then, OpenBLAS's own threads.
void cpu_set_num_threads(int n);
int cpu_get_num_threads();

}  // namespace gemm
}  // namespace tg
