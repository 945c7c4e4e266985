// The GEMM backend: OpenBLAS against a naive triple loop, the CUDA fallback (runs without a
// GPU), and cuBLAS against OpenBLAS (skips without a GPU).
//
// Every case fills C, including the gaps between its rows and batches, with a sentinel
// (NaN where beta = 0, so that "beta = 0 ignores C" is checked too) and checks that the
// gaps come back untouched: the products may write only the (M, N) matrices.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "plugin_abi.h"
#include "backend/gemm.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"

namespace {

// bench/gpu_check.sh runs this test on a GPU machine from a folder of its own, where the
// paths compiled in here do not exist: TAPEGRAD_TEST_CUDA_PLUGIN and
// TAPEGRAD_TEST_EMULATED_PLUGIN name the plugins there.
#ifdef TAPEGRAD_CUDA_PLUGIN_PATH
const char* built_plugin() {
  const char* e = std::getenv("TAPEGRAD_TEST_CUDA_PLUGIN");
  return e && *e ? e : TAPEGRAD_CUDA_PLUGIN_PATH;
}
#endif
#ifdef TAPEGRAD_CUDA_EMULATED_PLUGIN
const char* emulated_plugin() {
  const char* e = std::getenv("TAPEGRAD_TEST_EMULATED_PLUGIN");
  return e && *e ? e : TAPEGRAD_CUDA_EMULATED_PLUGIN;
}
#endif

using tg::gemm::cpu_gemm;

/// One strided-batched product: C_i = alpha·op(A_i)·op(B_i) + beta·C_i, i < batch.
/// pad_* widen the leading dimensions; gap_* add elements between batches (-1: stride 0).
struct Case {
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1, batch = 1;
  int64_t pad_a = 0, pad_b = 0, pad_c = 0;
  int64_t gap_a = 0, gap_b = 0, gap_c = 0;
  float alpha = 1.0f, beta = 0.0f;

  int64_t lda() const { return (ta ? M : K) + pad_a; }
  int64_t ldb() const { return (tb ? K : N) + pad_b; }
  int64_t ldc() const { return N + pad_c; }
  int64_t rows_a() const { return ta ? K : M; }
  int64_t rows_b() const { return tb ? N : K; }
  int64_t stride_a() const { return gap_a < 0 ? 0 : rows_a() * lda() + gap_a; }
  int64_t stride_b() const { return gap_b < 0 ? 0 : rows_b() * ldb() + gap_b; }
  int64_t stride_c() const { return M * ldc() + gap_c; }
  std::string str() const {
    return "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) + " batch=" +
           std::to_string(batch) + " pads=" + std::to_string(pad_a) + "," +
           std::to_string(pad_b) + "," + std::to_string(pad_c) + " gaps=" +
           std::to_string(gap_a) + "," + std::to_string(gap_b) + "," + std::to_string(gap_c) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta);
  }
};

using BatchedFn = std::function<void(const Case&, const float*, const float*, float*)>;

size_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld) {
  const int64_t one = rows * ld;  // whole rows, so the last row's padding exists too
  return static_cast<size_t>(stride == 0 ? one : (batch - 1) * stride + one) + 1;
}

/// Run `fn` on random operands for case `c` and compare with a double-precision triple loop.
void check(const Case& c, const BatchedFn& fn, std::mt19937& rng) {
  SCOPED_TRACE(c.str());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> A(span(c.batch, c.stride_a(), c.rows_a(), c.lda()));
  std::vector<float> B(span(c.batch, c.stride_b(), c.rows_b(), c.ldb()));
  std::vector<float> C(span(c.batch, c.stride_c(), c.M, c.ldc()));
  for (float& x : A) x = u(rng);
  for (float& x : B) x = u(rng);
  const float sentinel = c.beta == 0 ? std::nanf("") : 1234.5f;
  std::vector<float> C0(C.size(), sentinel);
  std::vector<bool> inside(C.size(), false);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        const size_t at = static_cast<size_t>(b * c.stride_c() + i * c.ldc() + j);
        inside[at] = true;
        if (c.beta != 0) C0[at] = u(rng);
      }
  C = C0;
  fn(c, A.data(), B.data(), C.data());

  int bad = 0;
  for (int64_t b = 0; b < c.batch && bad < 5; ++b) {
    const float* a = A.data() + b * c.stride_a();
    const float* bm = B.data() + b * c.stride_b();
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < c.K; ++k) {
          const double x = c.ta ? a[k * c.lda() + i] : a[i * c.lda() + k];
          const double y = c.tb ? bm[j * c.ldb() + k] : bm[k * c.ldb() + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        const size_t at = static_cast<size_t>(b * c.stride_c() + i * c.ldc() + j);
        const double c0 = c.beta == 0 ? 0.0 : C0[at];
        const double want = c.alpha * sum + c.beta * c0;
        const double tol = 1e-6 * (4 + static_cast<double>(c.K)) *
                           (std::fabs(c.alpha) * mag + std::fabs(c.beta * c0) + 1e-3);
        if (!(std::fabs(C[at] - want) <= tol)) {
          ADD_FAILURE() << "C[" << b << "][" << i << "][" << j << "] = " << C[at]
                        << ", expected " << want;
          ++bad;
        }
      }
  }
  for (size_t at = 0; at < C.size() && bad < 10; ++at)
    if (!inside[at] && std::memcmp(&C[at], &C0[at], sizeof(float)) != 0) {
      ADD_FAILURE() << "element " << at << " outside the output matrices was written";
      ++bad;
    }
}

/// Shapes: edge cases (K = 0, M or N = 1, empty), then random ones; all four transposes;
/// leading dims wider than the matrices; beta 0, 1 and fractional.
std::vector<Case> single_cases(std::mt19937& rng, int64_t max_dim) {
  std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1}, {1, 7, 5},  {6, 1, 9},  {5, 6, 0},
                                                {0, 3, 4}, {3, 0, 4},  {1, 1, 40}, {17, 13, 29},
                                                {64, 33, 70}, {2, 50, 3}};
  std::uniform_int_distribution<int64_t> dim(1, max_dim), pad(0, 5);
  for (int i = 0; i < 6; ++i) shapes.push_back({dim(rng), dim(rng), dim(rng)});
  const float alphas[] = {1.0f, -0.5f, 2.0f}, betas[] = {0.0f, 1.0f, 0.25f};
  std::vector<Case> cases;
  int n = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t, ++n) {
      Case c;
      c.ta = t & 1;
      c.tb = t & 2;
      c.M = s[0];
      c.N = s[1];
      c.K = s[2];
      if (n % 2) {  // every other case: sub-matrices of wider buffers
        c.pad_a = pad(rng);
        c.pad_b = pad(rng);
        c.pad_c = pad(rng);
      }
      c.alpha = alphas[n % 3];
      c.beta = betas[(n / 3) % 3];
      cases.push_back(c);
    }
  return cases;
}

/// Batched cases: dense strides, gaps between batches, stride-0 (broadcast) A or B.
std::vector<Case> batched_cases(std::mt19937& rng, int64_t max_dim) {
  std::uniform_int_distribution<int64_t> dim(1, max_dim), pad(0, 4), nb(1, 5);
  std::vector<Case> cases;
  for (int n = 0; n < 24; ++n) {
    Case c;
    c.ta = n & 1;
    c.tb = n & 2;
    c.M = dim(rng);
    c.N = dim(rng);
    c.K = n == 5 ? 0 : dim(rng);
    c.batch = nb(rng) + (n % 3 == 0 ? 0 : 1);
    switch (n % 4) {
      case 0: break;                                          // dense
      case 1: c.gap_a = -1; break;                            // A broadcast
      case 2: c.gap_b = -1; c.pad_c = pad(rng); break;        // B broadcast, padded C
      case 3:                                                 // gaps everywhere
        c.gap_a = pad(rng); c.gap_b = pad(rng); c.gap_c = 1 + pad(rng);
        c.pad_a = pad(rng); c.pad_b = pad(rng); c.pad_c = pad(rng);
        break;
    }
    c.alpha = n % 5 == 0 ? -1.5f : 1.0f;
    c.beta = n % 3 == 1 ? 0.5f : 0.0f;
    cases.push_back(c);
  }
  return cases;
}

const BatchedFn kCpuGemm = [](const Case& c, const float* A, const float* B, float* C) {
  cpu_gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda(), B, c.ldb(), c.beta, C, c.ldc());
};
const BatchedFn kGemm = [](const Case& c, const float* A, const float* B, float* C) {
  tg::gemm::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda(), B, c.ldb(), c.beta, C, c.ldc());
};
const BatchedFn kBatched = [](const Case& c, const float* A, const float* B, float* C) {
  tg::gemm::gemm_strided_batched(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda(), c.stride_a(),
                                 B, c.ldb(), c.stride_b(), c.beta, C, c.ldc(), c.stride_c(),
                                 c.batch);
};

/// Runs every case through the dispatching entry points (gemm, gemm_strided_batched).
void check_dispatch(std::mt19937& rng, int64_t max_dim) {
  for (const Case& c : single_cases(rng, max_dim)) check(c, kGemm, rng);
  for (const Case& c : batched_cases(rng, max_dim)) check(c, kBatched, rng);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// ---- (a) the CPU backend ---------------------------------------------------------------

TEST(GemmCpu, CblasMatchesTripleLoop) {
  std::mt19937 rng(1);
  for (const Case& c : single_cases(rng, 48)) check(c, kCpuGemm, rng);
}

TEST(GemmCpu, DispatchOnCpuMatchesTripleLoop) {
  tg::set_device(tg::Device::CPU);
  EXPECT_EQ(tg::current_device(), tg::Device::CPU);
  // "cpu; OpenBLAS 0.3.21, kernel Haswell (...)": the kernels are test_blas_kernel's subject.
  EXPECT_EQ(tg::device_status().rfind("cpu; OpenBLAS ", 0), 0u) << tg::device_status();
  std::mt19937 rng(2);
  check_dispatch(rng, 40);
}

TEST(GemmCpu, NumThreads) {
  const int before = tg::get_num_threads();
  tg::set_num_threads(1);
  EXPECT_EQ(tg::get_num_threads(), 1);
  tg::set_num_threads(before);
  EXPECT_EQ(tg::get_num_threads(), before);
  EXPECT_THROW(tg::set_num_threads(0), tg::ValueError);
}

// ---- (b) the fallback ------------------------------------------------------------------

// No plugin at all (as on a machine without the CUDA toolkit): CUDA is asked for, OpenBLAS
// runs, and stderr gets exactly one line.
TEST(GemmFallback, PluginMissing) {
  ASSERT_EQ(setenv("TAPEGRAD_CUDA_PLUGIN", "/nonexistent/libtapegrad_cuda.so", 1), 0);
  testing::internal::CaptureStderr();
  tg::set_device(tg::Device::CUDA);
  std::mt19937 rng(3);
  if (tg::current_device() == tg::Device::CPU) check_dispatch(rng, 24);
  const std::string err = testing::internal::GetCapturedStderr();
  unsetenv("TAPEGRAD_CUDA_PLUGIN");
  if (tg::current_device() == tg::Device::CUDA)
    GTEST_SKIP() << "a CUDA plugin was already loaded in this process";
  EXPECT_FALSE(tg::cuda_available());
  EXPECT_TRUE(contains(tg::device_status(), "no such file")) << tg::device_status();
  EXPECT_EQ(err,
            "tapegrad: CUDA unavailable (TAPEGRAD_CUDA_PLUGIN=/nonexistent/libtapegrad_cuda.so:"
            " no such file); using OpenBLAS\n");
}

// The real plugin, built here, loads; with no driver or device its init fails cleanly.
TEST(GemmFallback, BuiltPluginWithoutDevice) {
#ifndef TAPEGRAD_CUDA_PLUGIN_PATH
  GTEST_SKIP() << "the CUDA plugin is not built (no CUDA toolkit, or TAPEGRAD_CUDA=OFF); "
                  "PluginMissing covers the fallback";
#else
  ASSERT_EQ(setenv("TAPEGRAD_CUDA_PLUGIN", built_plugin(), 1), 0);
  testing::internal::CaptureStderr();
  tg::set_device(tg::Device::CUDA);
  std::string err = testing::internal::GetCapturedStderr();
  if (tg::cuda_available())
    GTEST_SKIP() << "a CUDA device is present (" << tg::device_status()
                 << "): the fallback cannot be shown here";
  EXPECT_EQ(tg::current_device(), tg::Device::CPU);
  const std::string status = tg::device_status();
  // The runtime says why; or, where the toolkit was removed after the build, the loader.
  EXPECT_TRUE(contains(status, "cudaGetDeviceCount") || contains(status, "cublasCreate") ||
              contains(status, "cannot open shared object file"))
      << status;
  const std::string prefix = "cpu (CUDA unavailable: ";
  ASSERT_EQ(status.rfind(prefix, 0), 0u) << status;
  const size_t end = status.rfind("); OpenBLAS ");  // then the CPU kernels
  ASSERT_NE(end, std::string::npos) << status;
  const std::string reason = status.substr(prefix.size(), end - prefix.size());
  EXPECT_EQ(err, "tapegrad: CUDA unavailable (" + reason + "); using OpenBLAS\n");
  std::mt19937 rng(4);
  check_dispatch(rng, 24);
  // Auto falls back the same way, silently.
  testing::internal::CaptureStderr();
  tg::set_device(tg::Device::Auto);
  err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(tg::current_device(), tg::Device::CPU);
  EXPECT_EQ(err, "");
  check_dispatch(rng, 24);
  unsetenv("TAPEGRAD_CUDA_PLUGIN");
#endif
}

// Without TAPEGRAD_CUDA_PLUGIN, the plugin built here is found from the test's own folder:
// <exe dir>/../lib, as an installed <prefix>/bin/app finds <prefix>/lib (tests/package checks
// the installed layouts).
TEST(GemmFallback, PluginFoundBesideTheExecutable) {
#ifndef TAPEGRAD_CUDA_PLUGIN_PATH
  GTEST_SKIP() << "the CUDA plugin is not built";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("TAPEGRAD_CUDA_PLUGIN");
        setenv("TAPEGRAD_DEVICE", "cpu", 1);
        tg::cuda_available();  // probes the plugin
        const std::string status = tg::device_status();
        if (status.find("not found") != std::string::npos) std::fprintf(stderr, "%s\n", status.c_str());
        std::exit(0);
      },
      testing::ExitedWithCode(0), "^$");
#endif
}

// TAPEGRAD_DEVICE is read on the first product. Each statement runs in a fresh process
// (gtest's threadsafe death-test style re-executes this binary), so it really is the first.
TEST(GemmFallback, EnvironmentOnFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto first_product = [] {
    float a = 2, b = 3, c = 0;
    tg::gemm::gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    return c;
  };
  // cpu: no probe, no log line.
  EXPECT_EXIT(
      {
        setenv("TAPEGRAD_DEVICE", "cpu", 1);
        const bool ok = first_product() == 6 && tg::current_device() == tg::Device::CPU &&
                        tg::device_status().rfind("cpu; OpenBLAS ", 0) == 0;
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
  // auto (the default) without a plugin: silent; the status says why.
  EXPECT_EXIT(
      {
        unsetenv("TAPEGRAD_DEVICE");
        setenv("TAPEGRAD_CUDA_PLUGIN", "/nonexistent/plugin.so", 1);
        const bool ok = first_product() == 6 && tg::current_device() == tg::Device::CPU &&
                        tg::device_status().rfind("cpu (CUDA unavailable: TAPEGRAD_CUDA_PLUGIN="
                                                  "/nonexistent/plugin.so: no such file); OpenBLAS ",
                                                  0) == 0;
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
  // TAPEGRAD_VERBOSE=1: the fallback line, then the choice, on the first product.
  EXPECT_EXIT(
      {
        unsetenv("TAPEGRAD_DEVICE");
        setenv("TAPEGRAD_VERBOSE", "1", 1);
        setenv("TAPEGRAD_CUDA_PLUGIN", "/nonexistent/plugin.so", 1);
        std::exit(first_product() == 6 ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "^tapegrad: CUDA unavailable \\(TAPEGRAD_CUDA_PLUGIN=/nonexistent/plugin.so: no such "
      "file\\); using OpenBLAS\ntapegrad: cpu \\(CUDA unavailable: .*\\); OpenBLAS [0-9.]+, kernel "
      "[A-Za-z0-9]+ \\(.*\\)\n$");
  // cuda without a plugin: one line, OpenBLAS.
  EXPECT_EXIT(
      {
        setenv("TAPEGRAD_DEVICE", "cuda", 1);
        setenv("TAPEGRAD_CUDA_PLUGIN", "/nonexistent/plugin.so", 1);
        const bool ok = first_product() == 6 && tg::current_device() == tg::Device::CPU;
        std::exit(ok ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "^tapegrad: CUDA unavailable \\(TAPEGRAD_CUDA_PLUGIN=/nonexistent/plugin.so: no such "
      "file\\); using OpenBLAS\n$");
  // A bad value is a clear error.
  EXPECT_EXIT(
      {
        setenv("TAPEGRAD_DEVICE", "gpu", 1);
        try {
          first_product();
        } catch (const tg::ValueError& e) {
          std::fprintf(stderr, "%s", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3), "TAPEGRAD_DEVICE: expected cpu, cuda or auto, got 'gpu'");
}

// ---- the plugin's own logic, on an emulated device --------------------------------------

// lib/cuda/gemm_cuda.cpp compiled against tests/fake_cuda: host memory as device memory and
// a column-major reference for cuBLAS that rejects too-small leading dimensions. Checks the
// row-/column-major operand swap, the upload extents, the row-wise copy back into
// sub-matrices and the batch strides, with no GPU. Called through the plugin's C ABI.
TEST(GemmPlugin, EmulatedDeviceMatchesTripleLoop) {
#ifndef TAPEGRAD_CUDA_EMULATED_PLUGIN
  GTEST_SKIP() << "the emulated plugin is not built";
#else
  void* h = dlopen(emulated_plugin(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto abi = reinterpret_cast<tg_cuda_abi_version_fn>(dlsym(h, "tg_cuda_abi_version"));
  auto init = reinterpret_cast<tg_cuda_init_fn>(dlsym(h, "tg_cuda_init"));
  static tg_cuda_sgemm_fn sgemm;
  static tg_cuda_sgemm_strided_batched_fn batched;
  sgemm = reinterpret_cast<tg_cuda_sgemm_fn>(dlsym(h, "tg_cuda_sgemm"));
  batched = reinterpret_cast<tg_cuda_sgemm_strided_batched_fn>(
      dlsym(h, "tg_cuda_sgemm_strided_batched"));
  auto shutdown = reinterpret_cast<tg_cuda_shutdown_fn>(dlsym(h, "tg_cuda_shutdown"));
  ASSERT_TRUE(abi && init && sgemm && batched && shutdown);
  EXPECT_EQ(abi(), TG_CUDA_ABI_VERSION);
  char msg[256] = {0};
  float x = 1;
  EXPECT_EQ(sgemm(0, 0, 1, 1, 1, 1, &x, 1, nullptr, &x, 1, nullptr, 0, &x, 1, msg, sizeof msg),
            TG_CUDA_E_UNTOUCHED) << "a product before init";
  ASSERT_EQ(init(msg, sizeof msg), 0) << msg;
  EXPECT_STREQ(msg, "emulated, sm_00, 0 GiB");

  const BatchedFn via_plugin = [](const Case& c, const float* A, const float* B, float* C) {
    char m[256] = {0};
    const int rc = batched(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda(), c.stride_a(), nullptr,
                           B, c.ldb(), c.stride_b(), nullptr, c.beta, C, c.ldc(), c.stride_c(),
                           c.batch, m, sizeof m);
    ASSERT_EQ(rc, 0) << m;
  };
  const BatchedFn via_single = [](const Case& c, const float* A, const float* B, float* C) {
    char m[256] = {0};
    ASSERT_EQ(sgemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, c.lda(), nullptr, B, c.ldb(), nullptr,
                    c.beta, C, c.ldc(), m, sizeof m),
              0)
        << m;
  };
  std::mt19937 rng(6);
  int ran = 0;
  for (const Case& c : single_cases(rng, 40))
    if (c.K > 0) check(c, via_single, rng), ++ran;
  for (const Case& c : batched_cases(rng, 40))
    if (c.K > 0) check(c, via_plugin, rng), ++ran;
  EXPECT_GT(ran, 50);
  // K = 0 is left to the caller, untouched; overlapping outputs are refused.
  EXPECT_EQ(sgemm(0, 0, 2, 2, 0, 1, &x, 1, nullptr, &x, 2, nullptr, 0, &x, 2, msg, sizeof msg),
            TG_CUDA_E_UNTOUCHED);
  std::vector<float> a(16, 1), c(16, 0);
  EXPECT_EQ(batched(0, 0, 2, 2, 2, 1, a.data(), 2, 4, nullptr, a.data(), 2, 4, nullptr, 0,
                    c.data(), 2, 0, 2, msg, sizeof msg),
            TG_CUDA_E_UNTOUCHED);
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](float v) { return v == 0; }));
  shutdown();  // and init works again after shutdown
  EXPECT_EQ(init(msg, sizeof msg), 0) << msg;
  shutdown();
#endif
}

// ---- (c) cuBLAS against OpenBLAS -------------------------------------------------------

TEST(GemmCuda, MatchesOpenBlas) {
#ifdef TAPEGRAD_CUDA_PLUGIN_PATH
  setenv("TAPEGRAD_CUDA_PLUGIN", built_plugin(), 1);
#endif
  tg::set_device(tg::Device::CUDA);
  if (!tg::cuda_available()) {
    if (std::getenv("TAPEGRAD_REQUIRE_CUDA"))  // set by bench/gpu_check.sh
      FAIL() << "no CUDA device: " << tg::device_status();
    GTEST_SKIP() << "no CUDA device: " << tg::device_status();
  }
  ASSERT_EQ(tg::current_device(), tg::Device::CUDA) << tg::device_status();
  std::cout << "[          ] " << tg::device_status() << "\n";
  std::mt19937 rng(5);
  check_dispatch(rng, 300);  // Device::CUDA: every product, however small, goes to cuBLAS
  // The pool grows and shrinks back to small products; a large product after small ones.
  Case big;
  big.M = 513;
  big.N = 257;
  big.K = 1031;
  big.tb = true;
  check(big, kGemm, rng);
  big.batch = 3;
  big.gap_a = -1;
  big.gap_c = 7;
  check(big, kBatched, rng);
  // Auto with a threshold no product reaches: OpenBLAS does it, still correct.
  setenv("TAPEGRAD_CUDA_MIN_FLOPS", "1e30", 1);
  tg::set_device(tg::Device::Auto);
  unsetenv("TAPEGRAD_CUDA_MIN_FLOPS");
  EXPECT_EQ(tg::current_device(), tg::Device::CUDA);
  check_dispatch(rng, 40);
}
