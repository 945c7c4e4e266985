// The CPU GEMM: OpenBLAS's cblas_sgemm, in a translation unit of its own (cblas.h and
// xtensor-blas cannot meet).
#include <cblas.h>

#include "gemm.h"

namespace tg {
namespace gemm {

void cpu_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = beta * C (cblas would also do this, but be explicit)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  // One output row or column is a matrix-vector product. sgemm would repack the whole
  // matrix on every call (most of the time of a batch-1 RNN step); sgemv reads it in place.
  if (M == 1 || N == 1) {
    if (beta == 0) {  // "beta = 0 ignores C": never let old NaNs through
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = 0.0f;
    }
    if (M == 1)  // cᵀ = alpha · op(B)ᵀ aᵀ + beta · cᵀ, with op(B)ᵀ = B (trans_b) or Bᵀ
      cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans,
                  static_cast<blasint>(trans_b ? N : K), static_cast<blasint>(trans_b ? K : N),
                  alpha, B, static_cast<blasint>(ldb), A, static_cast<blasint>(trans_a ? lda : 1),
                  beta, C, 1);
    else  // c = alpha · op(A) b + beta · c
      cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(trans_a ? K : M), static_cast<blasint>(trans_a ? M : K),
                  alpha, A, static_cast<blasint>(lda), B, static_cast<blasint>(trans_b ? 1 : ldb),
                  beta, C, static_cast<blasint>(ldc));
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C,
              static_cast<blasint>(ldc));
}

void cpu_set_num_threads(int n) { openblas_set_num_threads(n); }
int cpu_get_num_threads() { return openblas_get_num_threads(); }

}  // namespace gemm
}  // namespace tg
