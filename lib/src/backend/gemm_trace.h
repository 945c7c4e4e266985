#pragma once
// Library-internal: a record of the products a piece of code makes, for the benchmarks' GEMM
// floor (bench/workloads.cpp replays a training step's products through raw sgemm and times
// them alone).
//
// The hook sits at the CPU's two entry points, gemm::cpu_gemm and cpu_gemm_strided_batched
// (gemm_cblas.cpp): gemm::gemm and gemm_strided_batched reach them on the CPU, and the fused
// attention kernel calls cpu_gemm itself. Products that ran on the GPU are not recorded.
// When no trace runs, the hook costs one relaxed atomic load per product.
//
//   gemm::trace_start();
//   step();                                          // any code: products on any thread
//   std::vector<gemm::Call> calls = gemm::trace_stop();
#include <atomic>
#include <cstdint>
#include <vector>

namespace tg {
namespace gemm {

/// One product as it was asked for: C_i = alpha·op(A_i)·op(B_i) + beta·C_i for i < batch,
/// the operands `stride_*` elements apart (batch = 1 for a plain gemm; strides then 0).
struct Call {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  /// Made inside a part of a parallel job (detail::parallel_for), so concurrently with the
  /// products of the job's other parts (the fused attention's heads).
  bool concurrent = false;
  /// The thread that made it: 0, 1, ... in the order threads first made a product in this trace.
  int thread = 0;
  /// The operands' addresses in the traced code (element 0 of the first matrix), so that a
  /// replay can lay out its buffers as the traced code's memory was; never read through.
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;

  /// 2·M·N·K·batch.
  double flops() const { return 2.0 * static_cast<double>(M) * N * K * batch; }
};

/// Starts recording (clearing what an earlier trace left). Throws tg::ValueError if a trace
/// is already running.
void trace_start();
/// Stops recording and returns the products made since trace_start, in the order they were
/// made (products of concurrent parts interleave). Throws tg::ValueError if none runs.
std::vector<Call> trace_stop();

// The hook's parts (not in a nested `detail`, which would hide tg::detail in tg::gemm).
extern std::atomic<bool> g_tracing;
/// Whether a trace runs (the hook: `if (tracing()) trace_record({...})`).
inline bool tracing() { return g_tracing.load(std::memory_order_relaxed); }
/// Appends `call` to the running trace (thread-safe; sets `concurrent` and `thread`).
void trace_record(Call call);

}  // namespace gemm
}  // namespace tg
