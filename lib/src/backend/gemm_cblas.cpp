// The CPU GEMM: OpenBLAS's sgemm and sgemv, through the library loaded at run time with the
// kernel choice (openblas.h).
//
// Threads: until tg::set_num_threads(n) is called, every product is one OpenBLAS call with
// OpenBLAS's own threads (OPENBLAS_NUM_THREADS, or one per core). After it, OpenBLAS runs on
// one thread and a product of at least kMinSplitFlops is split into up to n parts (blocks of
// rows of C, or of columns when C has too few rows; a batch by whole matrices) that run at
// once on tapegrad's workers (thread_pool.h), one single-threaded OpenBLAS call each.
// Measured here, a product of W1's sizes (64×256×784) takes 235 µs on one thread, 255 µs on
// two OpenBLAS threads and 138 µs split in two this way. Every
// element of C is computed by the same kernel over the same K either way.
#include <algorithm>
#include <atomic>

#include "backend/gemm.h"
#include "backend/gemm_trace.h"
#include "backend/openblas.h"
#include "backend/thread_pool.h"

namespace tg {
namespace gemm {

namespace {

/// Products below this many flops (2·M·N·K, about 10 µs on one core) are not split: the
/// hand-off would cost more than half of it saves.
constexpr double kMinSplitFlops = 2.0 * 1024 * 1024;
/// Parts start at multiples of this many rows (or columns): whole register tiles.
constexpr int64_t kPartAlign = 16;

std::atomic<bool> g_own_threads{false};  // set_num_threads was called: split with the pool

/// C = beta * C (an empty sum); beta = 0 ignores C's contents.
void scale_only(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.0f : beta * C[i * ldc + j];
}

/// One OpenBLAS call (M, N, K >= 1).
void blas_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  // One output row or column is a matrix-vector product. sgemm would repack the whole
  // matrix on every call (most of the time of a batch-1 RNN step); sgemv reads it in place.
  const blas::Library& lib = blas::library();
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  if (M == 1 || N == 1) {
    if (beta == 0) {  // "beta = 0 ignores C": never let old NaNs through
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = 0.0f;
    }
    if (M == 1)  // cᵀ = alpha · op(B)ᵀ aᵀ + beta · cᵀ, with op(B)ᵀ = B (trans_b) or Bᵀ
      lib.sgemv(!trans_b, trans_b ? n : k, trans_b ? k : n, alpha, B, static_cast<int>(ldb), A,
                static_cast<int>(trans_a ? lda : 1), beta, C, 1);
    else  // c = alpha · op(A) b + beta · c
      lib.sgemv(trans_a, trans_a ? k : m, trans_a ? m : k, alpha, A, static_cast<int>(lda), B,
                static_cast<int>(trans_b ? 1 : ldb), beta, C, static_cast<int>(ldc));
    return;
  }
  lib.sgemm(trans_a, trans_b, m, n, k, alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
            beta, C, static_cast<int>(ldc));
}

/// How many parts a product of `flops` over `len` splittable rows (or columns) gets.
int parts_for(double flops, int64_t len) {
  if (!g_own_threads.load(std::memory_order_relaxed) || flops < kMinSplitFlops) return 1;
  const int64_t most = std::max<int64_t>(1, len / kPartAlign);
  return static_cast<int>(std::min<int64_t>(detail::pool_threads(), most));
}

/// [begin, end) of part p of `parts` over len items, aligned to `align` (the last takes the rest).
void part_range(int64_t len, int parts, int p, int64_t align, int64_t& begin, int64_t& end) {
  auto edge = [&](int q) {
    if (q == parts) return len;
    const int64_t e = len * q / parts;
    return std::min(len, (e + align / 2) / align * align);
  };
  begin = edge(p);
  end = edge(p + 1);
}

/// cpu_gemm without the trace's hook (cpu_gemm_strided_batched records its batch once).
void gemm_one(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = beta * C (cblas would also do this, but be explicit)
    scale_only(M, N, beta, C, ldc);
    return;
  }
  // Rows whenever there are enough: measured faster than columns, or equal, on every shape
  // of the benchmarks (a part then packs all of B, which OpenBLAS packs once per call anyway).
  const bool by_rows = M >= 2 * kPartAlign || M >= N;
  const int parts = M == 1 || N == 1 ? 1 : parts_for(2.0 * M * N * K, by_rows ? M : N);
  if (parts == 1) {
    blas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  detail::parallel_for(parts, [&](int p) {
    int64_t lo, hi;
    part_range(by_rows ? M : N, parts, p, kPartAlign, lo, hi);
    if (lo == hi) return;
    if (by_rows)  // rows lo..hi of C: rows of op(A), which are columns of A if trans_a
      blas_gemm(trans_a, trans_b, hi - lo, N, K, alpha, trans_a ? A + lo : A + lo * lda, lda,
                B, ldb, beta, C + lo * ldc, ldc);
    else  // columns lo..hi of C: columns of op(B), which are rows of B if trans_b
      blas_gemm(trans_a, trans_b, M, hi - lo, K, alpha, A, lda,
                trans_b ? B + lo * ldb : B + lo, ldb, beta, C + lo, ldc);
  });
}

}  // namespace

void cpu_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (tracing())
    trace_record(
        {trans_a, trans_b, M, N, K, lda, ldb, ldc, 0, 0, 0, 1, alpha, beta, false, 0, A, B, C});
  gemm_one(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cpu_gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                              float alpha, const float* A, int64_t lda, int64_t stride_a,
                              const float* B, int64_t ldb, int64_t stride_b, float beta,
                              float* C, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (tracing())
    trace_record({trans_a, trans_b, M, N, K, lda, ldb, ldc, stride_a, stride_b, stride_c,
                  batch, alpha, beta, false, 0, A, B, C});
  // Split across matrices only when they write disjoint outputs; one matrix at a time
  // otherwise (cpu_gemm may still split each one).
  const bool disjoint = stride_c >= (M - 1) * ldc + N;
  const int parts = batch < 2 || !disjoint || M == 0 || N == 0
                        ? 1
                        : parts_for(2.0 * M * N * K * batch, batch * kPartAlign);
  if (parts == 1) {
    for (int64_t i = 0; i < batch; ++i)
      gemm_one(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb,
               beta, C + i * stride_c, ldc);
    return;
  }
  detail::parallel_for(parts, [&](int p) {
    int64_t lo, hi;
    part_range(batch, parts, p, 1, lo, hi);
    for (int64_t i = lo; i < hi; ++i) {
      if (K == 0)
        scale_only(M, N, beta, C + i * stride_c, ldc);
      else
        blas_gemm(trans_a, trans_b, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                  ldb, beta, C + i * stride_c, ldc);
    }
  });
}

void cpu_set_num_threads(int n) {
  blas::library().set_num_threads(1);  // each part is one single-threaded call
  detail::set_pool_threads(n);
  g_own_threads.store(true, std::memory_order_relaxed);
}

int cpu_get_num_threads() {
  return g_own_threads.load(std::memory_order_relaxed) ? detail::pool_threads()
                                                        : blas::library().get_num_threads();
}

}  // namespace gemm
}  // namespace tg
