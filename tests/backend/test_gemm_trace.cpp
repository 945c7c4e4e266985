// The gemm trace (backend/gemm_trace.h) that the benchmarks' GEMM floor replays: it records
// every CPU product with its shapes, transposes and leading dimensions, once per call (a
// strided batch once, with its batch), marks products made in parallel parts, and records
// nothing when no trace runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "backend/gemm.h"
#include "backend/gemm_trace.h"
#include "backend/thread_pool.h"
#include "tapegrad/error.h"
#include "tapegrad/tapegrad.h"

namespace {

using tg::gemm::Call;

/// (trans_a, trans_b, M, N, K, lda, ldb, ldc, batch): what a replay needs to reproduce.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

std::vector<Key> keys(const std::vector<Call>& calls) {
  std::vector<Key> out;
  for (const Call& c : calls)
    out.emplace_back(c.trans_a, c.trans_b, c.M, c.N, c.K, c.lda, c.ldb, c.ldc, c.batch);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GemmTrace, LinearForwardAndBackward) {
  // y = x Wᵀ + b with x (B=5, in=3), W (out=4, in=3); backward: dx = G W, dW = Gᵀ x.
  const tg::Tensor x = tg::randn({5, 3}, /*requires_grad=*/true);
  const tg::Tensor w = tg::randn({4, 3}, /*requires_grad=*/true);
  const tg::Tensor b = tg::randn({4}, /*requires_grad=*/true);
  tg::gemm::trace_start();
  tg::Tensor y = tg::linear(x, w, b);  // (5, 4)
  const std::vector<Call> forward = tg::gemm::trace_stop();
  ASSERT_EQ(forward.size(), 1u);
  // y (5,4) = x (5,3) · Wᵀ: W is stored (4,3), so it is read transposed.
  EXPECT_EQ(keys(forward), (std::vector<Key>{{false, true, 5, 4, 3, 3, 3, 4, 1}}));
  EXPECT_EQ(forward[0].flops(), 2.0 * 5 * 4 * 3);
  EXPECT_FALSE(forward[0].concurrent);

  tg::gemm::trace_start();
  tg::sum(y).backward();
  const std::vector<Call> backward = tg::gemm::trace_stop();
  std::vector<Key> want = {
      {false, false, 5, 3, 4, 4, 3, 3, 1},  // dx (5,3) = G (5,4) · W (4,3)
      {true, false, 4, 3, 5, 4, 3, 3, 1},   // dW (4,3) = Gᵀ (4,5) · x (5,3)
  };
  std::sort(want.begin(), want.end());
  EXPECT_EQ(keys(backward), want);
  for (const Call& c : backward) {
    EXPECT_EQ(c.alpha, 1.0f);
    EXPECT_EQ(c.batch, 1);
  }
}

TEST(GemmTrace, RecordsNothingWhenOff) {
  const tg::Tensor x = tg::randn({6, 8}, /*requires_grad=*/true);
  const tg::Tensor w = tg::randn({2, 8}, /*requires_grad=*/true);
  tg::sum(tg::linear(x, w)).backward();  // products with no trace running
  tg::gemm::trace_start();
  EXPECT_TRUE(tg::gemm::trace_stop().empty());
  tg::sum(tg::linear(x, w)).backward();  // after the trace stopped
  tg::gemm::trace_start();               // a new trace starts empty
  EXPECT_TRUE(tg::gemm::trace_stop().empty());
}

TEST(GemmTrace, StartAndStopMustPair) {
  EXPECT_THROW(tg::gemm::trace_stop(), tg::ValueError);
  tg::gemm::trace_start();
  EXPECT_THROW(tg::gemm::trace_start(), tg::ValueError);
  EXPECT_TRUE(tg::gemm::trace_stop().empty());
}

TEST(GemmTrace, StridedBatchIsOneCall) {
  // 3 products of (2,4)·(4,5), A, B and C at strides 8, 20 and 10.
  std::vector<float> A(3 * 8, 1.0f), B(3 * 20, 1.0f), C(3 * 10, 0.0f);
  tg::gemm::trace_start();
  tg::gemm::gemm_strided_batched(false, false, 2, 5, 4, 0.5f, A.data(), 4, 8, B.data(), 5, 20,
                                 0.0f, C.data(), 5, 10, 3);
  const std::vector<Call> calls = tg::gemm::trace_stop();
  ASSERT_EQ(calls.size(), 1u);
  const Call& c = calls[0];
  EXPECT_EQ(keys(calls), (std::vector<Key>{{false, false, 2, 5, 4, 4, 5, 5, 3}}));
  EXPECT_EQ(c.stride_a, 8);
  EXPECT_EQ(c.stride_b, 20);
  EXPECT_EQ(c.stride_c, 10);
  EXPECT_EQ(c.alpha, 0.5f);
  EXPECT_EQ(c.beta, 0.0f);
  EXPECT_EQ(c.flops(), 2.0 * 2 * 5 * 4 * 3);
  EXPECT_EQ(c.a, A.data());  // where the operands were, for a replay's layout
  EXPECT_EQ(c.b, B.data());
  EXPECT_EQ(c.c, C.data());
  EXPECT_EQ(C[0], 2.0f);  // the product still ran: 0.5 · (1·1 · 4)
}

TEST(GemmTrace, MarksProductsOfParallelParts) {
  tg::set_num_threads(2);
  std::vector<float> A(16, 1.0f), B(16, 1.0f), C(4 * 16, 0.0f);
  tg::gemm::trace_start();
  tg::gemm::cpu_gemm(false, false, 4, 4, 4, 1.0f, A.data(), 4, B.data(), 4, 0.0f, C.data(), 4);
  tg::detail::parallel_for(4, [&](int p) {
    tg::gemm::cpu_gemm(false, false, 4, 4, 4, 1.0f, A.data(), 4, B.data(), 4, 0.0f,
                       C.data() + 16 * p, 4);
  });
  const std::vector<Call> calls = tg::gemm::trace_stop();
  tg::set_num_threads(1);
  ASSERT_EQ(calls.size(), 5u);  // every part's product, from whichever thread ran it
  EXPECT_FALSE(calls[0].concurrent);
  EXPECT_EQ(calls[0].thread, 0);  // the first thread to make a product in this trace
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_TRUE(calls[i].concurrent) << i;
    EXPECT_GE(calls[i].thread, 0) << i;  // the caller (0) or the one worker (1)
    EXPECT_LE(calls[i].thread, 1) << i;
  }
}

}  // namespace
