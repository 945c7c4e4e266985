// Products split across tapegrad's threads (tg::set_num_threads, lib/src/backend/gemm_cblas.cpp and
// thread_pool.cpp): the same results as a double-precision reference at 1, 2 and 3 threads,
// for splits by rows, by columns and by batch, ragged and transposed operands, padded
// leading dimensions, beta; C's gaps are never written; products from several user threads
// at once stay correct.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/gemm.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"

namespace {

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  int64_t batch = 1;
  float beta = 0.0f;
  int64_t pad = 3;        // added to every leading dimension
  bool shared_b = false;  // stride_b = 0: one B for the whole batch
};

struct Buffers {
  std::vector<float> A, B, C;
  int64_t lda, ldb, ldc, sa, sb, sc;
};

constexpr float kSentinel = 12345.0f;

Buffers make(const Case& c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Buffers b;
  b.lda = (c.ta ? c.M : c.K) + c.pad;
  b.ldb = (c.tb ? c.K : c.N) + c.pad;
  b.ldc = c.N + c.pad;
  b.sa = (c.ta ? c.K : c.M) * b.lda + 5;
  b.sb = c.shared_b ? 0 : (c.tb ? c.N : c.K) * b.ldb + 7;
  b.sc = c.M * b.ldc + 2;
  b.A.resize(static_cast<size_t>(b.sa * c.batch));
  b.B.resize(static_cast<size_t>(c.shared_b ? b.ldb * (c.tb ? c.N : c.K) : b.sb * c.batch));
  b.C.resize(static_cast<size_t>(b.sc * c.batch));
  for (auto& x : b.A) x = u(gen);
  for (auto& x : b.B) x = u(gen);
  for (auto& x : b.C) x = kSentinel;
  for (int64_t i = 0; i < c.batch; ++i)  // C's matrices hold values when beta reads them
    for (int64_t r = 0; r < c.M; ++r)
      for (int64_t j = 0; j < c.N; ++j)
        b.C[static_cast<size_t>(i * b.sc + r * b.ldc + j)] =
            c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : u(gen);
  return b;
}

/// The expected C, in double, from the inputs in `in` (C as it was before the product).
std::vector<double> reference(const Case& c, const Buffers& in) {
  std::vector<double> out(in.C.begin(), in.C.end());
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t r = 0; r < c.M; ++r)
      for (int64_t j = 0; j < c.N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double a = in.A[static_cast<size_t>(i * in.sa + (c.ta ? k * in.lda + r : r * in.lda + k))];
          const double b = in.B[static_cast<size_t>(i * in.sb + (c.tb ? j * in.ldb + k : k * in.ldb + j))];
          s += a * b;
        }
        double& o = out[static_cast<size_t>(i * in.sc + r * in.ldc + j)];
        o = s + (c.beta == 0 ? 0.0 : c.beta * o);
      }
  return out;
}

void run(const Case& c, Buffers& b) {
  if (c.batch == 1)
    tg::gemm::gemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, b.A.data(), b.lda, b.B.data(), b.ldb, c.beta,
                   b.C.data(), b.ldc);
  else
    tg::gemm::gemm_strided_batched(c.ta, c.tb, c.M, c.N, c.K, 1.0f, b.A.data(), b.lda, b.sa,
                                   b.B.data(), b.ldb, b.sb, c.beta, b.C.data(), b.ldc, b.sc,
                                   c.batch);
}

std::string name(const Case& c) {
  return "ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " batch=" +
         std::to_string(c.batch) + " beta=" + std::to_string(c.beta);
}

void expect_matches(const Case& c, const Buffers& got, const std::vector<double>& want) {
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    if (want[i] == kSentinel) {  // a gap: must be untouched
      if (got.C[i] != kSentinel) ++bad;
      EXPECT_EQ(got.C[i], kSentinel) << name(c) << " wrote a gap at " << i;
      continue;
    }
    const double tol = 1e-5 * (c.K + 1);
    if (!(std::abs(got.C[i] - want[i]) <= tol)) ++bad;
    EXPECT_NEAR(got.C[i], want[i], tol) << name(c) << " at " << i;
  }
}

const std::vector<Case> kCases = {
    {false, true, 100, 64, 200},              // split by rows (M >= N), above the threshold
    {true, false, 100, 64, 200},              // rows of op(A) are columns of A
    {false, false, 20, 300, 200},             // split by columns (N > M)
    {true, true, 20, 300, 200},               // columns of op(B) are rows of B
    {false, true, 37, 29, 1500},              // ragged parts
    {false, false, 256, 256, 64, 1, 0.5f},    // beta reads C
    {false, true, 1, 300, 5000},              // one row: sgemv, never split
    {false, true, 8, 8, 8},                   // below the threshold
    {false, true, 64, 64, 32, 40},            // a batch split by matrices
    {true, false, 64, 32, 64, 7, 1.0f},       // a batch, beta = 1
    {false, false, 48, 40, 64, 9, 0.0f, 1, true},  // a batch sharing one B (stride 0)
    {false, true, 64, 64, 0, 6, 0.5f},        // K = 0: C = beta·C
};

class GemmThreads : public ::testing::Test {
 protected:
  void TearDown() override { tg::set_num_threads(1); }
};

TEST_F(GemmThreads, SplitProductsMatchTheReference) {
  for (int threads : {1, 2, 3}) {
    tg::set_num_threads(threads);
    ASSERT_EQ(tg::get_num_threads(), threads);
    uint32_t seed = 1;
    for (const Case& c : kCases) {
      Buffers b = make(c, seed++);
      const std::vector<double> want = reference(c, b);
      run(c, b);
      SCOPED_TRACE("threads " + std::to_string(threads));
      expect_matches(c, b, want);
    }
  }
}

// Not always bit for bit: OpenBLAS computes the ragged edge tiles of a part with other
// kernels, whose sums over K round differently. The difference stays at float rounding.
TEST_F(GemmThreads, TwoThreadsAgreeWithOneToRounding) {
  for (const Case& c : kCases) {
    Buffers one = make(c, 99), two = make(c, 99);
    tg::set_num_threads(1);
    run(c, one);
    tg::set_num_threads(2);
    run(c, two);
    const float tol = 4.0f * static_cast<float>(c.K + 1) * std::numeric_limits<float>::epsilon();
    for (size_t i = 0; i < one.C.size(); ++i) {
      const float a = one.C[i], b = two.C[i];
      ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b)) ||
                  std::abs(a - b) <= tol * (1 + std::abs(a)))
          << name(c) << " at " << i << ": " << a << " vs " << b;
    }
  }
}

TEST_F(GemmThreads, ProductsFromSeveralThreadsAtOnce) {
  tg::set_num_threads(2);
  const Case c{false, true, 96, 80, 300};
  Buffers proto = make(c, 7);
  const std::vector<double> want = reference(c, proto);
  std::vector<int> failures(3, 0);
  std::vector<std::thread> users;
  for (int t = 0; t < 3; ++t)
    users.emplace_back([&, t] {
      for (int it = 0; it < 200; ++it) {
        Buffers b = proto;
        run(c, b);
        for (size_t i = 0; i < want.size(); ++i)
          if (!(std::abs(b.C[i] - want[i]) <= 1e-3)) {
            ++failures[static_cast<size_t>(t)];
            break;
          }
      }
    });
  for (auto& u : users) u.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
}

TEST_F(GemmThreads, ResizingAndBadCounts) {
  for (int n : {4, 1, 2, 2, 1}) {
    tg::set_num_threads(n);
    EXPECT_EQ(tg::get_num_threads(), n);
    Buffers b = make(kCases[0], 3);
    const std::vector<double> want = reference(kCases[0], b);
    run(kCases[0], b);
    expect_matches(kCases[0], b, want);
  }
  EXPECT_THROW(tg::set_num_threads(0), tg::ValueError);
  EXPECT_THROW(tg::set_num_threads(-3), tg::ValueError);
}

}  // namespace
