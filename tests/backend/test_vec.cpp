// The vector kernels (lib/src/backend/vec.h) and their run-time choice:
//   (a) every level this library holds and this CPU runs, kernel by kernel, against a
//       double-precision loop, over lengths that end in every partial batch and over
//       special values; and against the baseline level (a portable build);
//   (b) the binary kernels' broadcast forms (a row, a scalar, in place): exact;
//   (c) the choice, for the feature sets of CPUs this machine is not: never a level the CPU
//       lacks, TAPEGRAD_CPU_LEVEL's errors, and the level that runs here.
// ctest runs this file (and the op and optimizer tests) again under each TAPEGRAD_CPU_LEVEL
// this machine runs (tests/CMakeLists.txt), so the ops are checked at every level too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu_features.h"
#include "backend/vec.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"

namespace {

using tg::cpu::Features;
using tg::vec::Binary;
using tg::vec::Kernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The built levels this CPU runs.
std::vector<const Kernels*> runnable() {
  const Features here = tg::cpu::read_cpu().features;
  std::vector<const Kernels*> out;
  for (const std::string& level : tg::vec::built_levels())
    if (tg::vec::runs(level, here)) out.push_back(tg::vec::kernels_for(level));
  return out;
}

/// Lengths around every batch width (4, 8, 16) and a long one.
const std::vector<size_t> kLengths = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000};

std::vector<float> values(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

/// |got - want| within rel·|want| + abs, want rounded to float first (NaN only where want is
/// NaN; infinities, and what overflows float, equal).
::testing::AssertionResult close(float got, double want_double, double rel, double abs) {
  const float want = static_cast<float>(want_double);
  if (std::isnan(want) ? std::isnan(got)
                       : (std::isinf(want) ? got == want
                                           : std::fabs(double(got) - want) <= rel * std::fabs(want) + abs))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

using Unary = void (*)(const float*, float*, size_t);

/// A unary kernel against f in double over every length (inputs in [lo, hi]) and `special`.
void check_unary(const Kernels& k, Unary Kernels::*kernel, double (*f)(double), float lo,
                 float hi, const std::vector<float>& special, const char* name) {
  for (size_t n : kLengths) {
    std::vector<float> x = values(n, lo, hi, static_cast<unsigned>(n));
    std::vector<float> y(n, -7.0f);
    (k.*kernel)(x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_TRUE(close(y[i], f(x[i]), 4e-6, 1e-7))
          << k.level << " " << name << " n=" << n << " i=" << i << " x=" << x[i];
    (k.*kernel)(x.data(), x.data(), n);  // in place: the same values
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], y[i]) << k.level << " " << name << " in place";
  }
  std::vector<float> y(special.size());
  (k.*kernel)(special.data(), y.data(), special.size());
  for (size_t i = 0; i < special.size(); ++i)
    EXPECT_TRUE(close(y[i], f(special[i]), 4e-6, 1e-7)) << k.level << " " << name << "(" << special[i] << ")";
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return x * 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_grad_ref(double x) {
  const double kSqrt2Pi = 2.5066282746310002;  // √(2π)
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / kSqrt2Pi;
}

// ---- (a) every level against double precision ------------------------------------------------

TEST(VecKernels, EveryLevelHereIsTested) {
  const std::vector<const Kernels*> ks = runnable();
  ASSERT_FALSE(ks.empty());
  EXPECT_STREQ(ks.back()->level, tg::vec::built_levels()[ks.size() - 1].c_str());
  for (const Kernels* k : ks) std::cout << "level " << k->level << " runs here\n";
}

TEST(VecKernels, ActivationsMatchDoublePrecision) {
  const std::vector<float> special = {0.0f, -0.0f, kInf, -kInf, kNaN, 88.0f, -87.0f, 1e-30f, -1e-30f,
                                      20.0f, -20.0f, 1e-4f, 9.0f, -9.0f};
  for (const Kernels* k : runnable()) {
    check_unary(*k, &Kernels::exp, [](double x) { return std::exp(x); }, -80.0f, 80.0f,
                {0.0f, kInf, -kInf, kNaN, -104.0f, 88.0f, 89.0f, -87.0f, 1e-20f}, "exp");
    check_unary(*k, &Kernels::tanh, [](double x) { return std::tanh(x); }, -6.0f, 6.0f, special,
                "tanh");
    check_unary(*k, &Kernels::sigmoid, sigmoid_ref, -30.0f, 30.0f, special, "sigmoid");
  }
}

TEST(VecKernels, GeluAndItsDerivativeMatchDoublePrecision) {
  for (const Kernels* k : runnable()) {
    for (size_t n : kLengths) {
      std::vector<float> x = values(n, -8.0f, 8.0f, 7u + static_cast<unsigned>(n));
      if (n > 3) x[0] = 0.0f, x[1] = -0.0f, x[2] = 1e-20f;
      std::vector<float> y(n), d(n), y_only(n);
      k->gelu(x.data(), y.data(), d.data(), n);
      k->gelu(x.data(), y_only.data(), nullptr, n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(close(y[i], gelu_ref(x[i]), 4e-6, 2e-7)) << k->level << " gelu x=" << x[i];
        ASSERT_EQ(y_only[i], y[i]) << k->level << " gelu without the derivative, x=" << x[i];
        ASSERT_TRUE(close(d[i], gelu_grad_ref(x[i]), 4e-6, 2e-7)) << k->level << " gelu' x=" << x[i];
      }
    }
  }
}

/// Float spacing at |v| (the smallest subnormal's below FLT_MIN).
double ulp_at(double v) {
  const float f = std::fabs(static_cast<float>(v));
  if (f < std::numeric_limits<float>::min()) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(f, &e);
  return std::ldexp(1.0, e - 24);
}

float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// The bound vec_kernels.h states for its GELU, over a dense sweep: every 1021st float of
// [-12, 12] (2.2M values, each binade's mantissas sampled alike, so the tiny ones too), every
// float of [-0.76, -0.74] (around dydx's zero) and of [5.3, 5.6] (where y becomes x), sparser
// beyond to the largest float. y within 8 ulp where |y| >= FLT_MIN, within FLT_MIN below;
// dydx within 8 ulp of |Φ| + |x φ| for |x| <= 13.19, within 1e-37 beyond (E flushed to 0).
// (Measured over every float of [-12, 12]: 5.3 and 4.6 ulp with FMA, 7.7 and 7.4 without.)
TEST(VecKernels, GeluIsAccurateOverADenseSweepOfFloats) {
  std::vector<float> x;
  const uint32_t twelve = 0x41400000u;
  for (uint32_t b = 0; b <= twelve; b += 1021) x.push_back(float_from_bits(b));
  for (uint32_t b = twelve; b < 0x7f800000u; b += 1021 * 64) x.push_back(float_from_bits(b));
  for (float v = 0.74f; v <= 0.76f; v = std::nextafter(v, 1.0f)) x.push_back(v);
  for (float v = 5.3f; v <= 5.6f; v = std::nextafter(v, 6.0f)) x.push_back(v);
  x.push_back(std::numeric_limits<float>::max());
  const size_t half = x.size();
  for (size_t i = 0; i < half; ++i) x.push_back(-x[i]);
  const double kSqrt2Pi = 2.5066282746310002, kFltMin = std::numeric_limits<float>::min();
  for (const Kernels* k : runnable()) {
    std::vector<float> y(x.size()), d(x.size()), y_only(x.size());
    k->gelu(x.data(), y.data(), d.data(), x.size());
    k->gelu(x.data(), y_only.data(), nullptr, x.size());
    double worst_y = 0, worst_d = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double phi_cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));       // Φ(x)
      const double x_pdf = v * std::exp(-0.5 * v * v) / kSqrt2Pi;         // x φ(x)
      const double want_y = v * phi_cdf, want_d = phi_cdf + x_pdf;
      ASSERT_EQ(std::memcmp(&y[i], &y_only[i], sizeof(float)), 0)
          << k->level << " gelu without the derivative differs at x=" << x[i];
      const double err_y = std::fabs(y[i] - want_y), err_d = std::fabs(d[i] - want_d);
      if (std::fabs(want_y) >= kFltMin) {
        ASSERT_LE(err_y, 8 * ulp_at(want_y)) << k->level << " gelu x=" << x[i] << " got " << y[i];
        worst_y = std::max(worst_y, err_y / ulp_at(want_y));
      } else {
        ASSERT_LE(err_y, kFltMin) << k->level << " gelu x=" << x[i] << " got " << y[i];
      }
      if (std::fabs(v) <= 13.19) {
        const double size = std::fabs(phi_cdf) + std::fabs(x_pdf);
        ASSERT_LE(err_d, 8 * ulp_at(size)) << k->level << " gelu' x=" << x[i] << " got " << d[i];
        worst_d = std::max(worst_d, err_d / ulp_at(size));
      } else {
        ASSERT_LE(err_d, 1e-37) << k->level << " gelu' x=" << x[i] << " got " << d[i];
      }
    }
    std::cout << k->level << " gelu over " << x.size() << " floats: y within " << worst_y
              << " ulp, dydx within " << worst_d << " ulp of |Φ| + |x φ|\n";
  }
}

// PyTorch 1.13's values at the ends: y = x from x = 5.5 and dydx = 1 from 10, both 0 below
// -13.2 (PyTorch: from -10); gelu(inf) = inf, gelu(-inf) = NaN, dydx(±inf) = NaN; NaN gives
// NaN.
TEST(VecKernels, GeluAtTheEndsOfTheFloatRange) {
  const std::vector<float> x = {5.5f,   10.0f,  1e30f, kInf, -13.5f,
                                -20.0f, -1e30f, -kInf, kNaN, -kNaN};
  for (const Kernels* k : runnable()) {
    std::vector<float> y(x.size()), d(x.size());
    k->gelu(x.data(), y.data(), d.data(), x.size());
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(y[i], x[i]) << k->level << " x=" << x[i];
    for (size_t i = 1; i < 3; ++i) EXPECT_EQ(d[i], 1.0f) << k->level << " x=" << x[i];
    EXPECT_EQ(y[3], kInf) << k->level;
    for (size_t i = 4; i < 7; ++i) {
      EXPECT_EQ(y[i], 0.0f) << k->level << " x=" << x[i];
      EXPECT_EQ(d[i], 0.0f) << k->level << " x=" << x[i];
    }
    for (size_t i : {3, 7, 8, 9}) EXPECT_TRUE(std::isnan(d[i])) << k->level << " x=" << x[i];
    for (size_t i : {7, 8, 9}) EXPECT_TRUE(std::isnan(y[i])) << k->level << " x=" << x[i];
  }
}

TEST(VecKernels, ActivationBackwardsMatchDoublePrecision) {
  for (const Kernels* k : runnable()) {
    for (size_t n : kLengths) {
      const std::vector<float> y = values(n, -1.0f, 1.0f, 11u + static_cast<unsigned>(n));
      const std::vector<float> g0 = values(n, -3.0f, 3.0f, 13u + static_cast<unsigned>(n));
      std::vector<float> g = g0;
      k->tanh_backward(g.data(), y.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(close(g[i], g0[i] * (1.0 - double(y[i]) * y[i]), 1e-6, 1e-7)) << k->level;
      g = g0;
      k->sigmoid_backward(g.data(), y.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(close(g[i], g0[i] * (double(y[i]) * (1.0 - y[i])), 1e-6, 1e-7)) << k->level;
    }
  }
}

TEST(VecKernels, LevelsAgreeWithTheBaseline) {
  const Kernels* base = tg::vec::kernels_for("baseline");
  if (!base) GTEST_SKIP() << "a native build holds one level";
  const std::vector<float> x = values(1001, -10.0f, 10.0f, 5u);
  for (const Kernels* k : runnable()) {
    for (Unary Kernels::*f : {&Kernels::exp, &Kernels::tanh, &Kernels::sigmoid}) {
      std::vector<float> a(x.size()), b(x.size());
      (base->*f)(x.data(), a.data(), x.size());
      (k->*f)(x.data(), b.data(), x.size());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(close(b[i], a[i], 1e-6, 1e-38)) << k->level << " vs baseline, x=" << x[i];
    }
  }
}

// ---- (b) binary ops: IEEE operations, so exact at every level --------------------------------

float apply(Binary op, float a, float b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
  }
  return 0;
}

TEST(VecKernels, BinaryOpsAndTheirBroadcastsAreExact) {
  for (const Kernels* k : runnable()) {
    for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div}) {
      for (size_t row : {size_t(1), size_t(3), size_t(16), size_t(19)}) {
        for (size_t rows : {size_t(1), size_t(2), size_t(5)}) {
          const size_t n = row * rows;
          const std::vector<float> a = values(n, -4.0f, 4.0f, 21u + static_cast<unsigned>(n));
          const std::vector<float> b = values(row, 0.5f, 4.0f, 23u + static_cast<unsigned>(row));
          std::vector<float> y(n);
          k->binary(op, a.data(), n, b.data(), row, y.data(), n);  // b repeats on every row
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(y[i], apply(op, a[i], b[i % row])) << k->level << " row " << row;
          k->binary(op, b.data(), row, a.data(), n, y.data(), n);  // a repeats
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(y[i], apply(op, b[i % row], a[i])) << k->level << " row " << row;
          k->binary(op, a.data(), n, a.data() + n - 1, 1, y.data(), n);  // a scalar
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], apply(op, a[i], a[n - 1]));
          std::vector<float> in_place = a;  // y = a, b the same length
          std::vector<float> c = values(n, 0.5f, 2.0f, 29u);
          k->binary(op, in_place.data(), n, c.data(), n, in_place.data(), n);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(in_place[i], apply(op, a[i], c[i]));
        }
      }
    }
    // no elements: nothing read or written
    k->binary(Binary::Add, nullptr, 0, nullptr, 0, nullptr, 0);
  }
}

// ---- the Adam update against the optimizer's own arithmetic -----------------------------------

TEST(VecKernels, AdamMatchesTheScalarRule) {
  for (const Kernels* k : runnable()) {
    for (int variant = 0; variant < 4; ++variant) {
      tg::vec::AdamStep s;
      s.b1 = 0.9f, s.one_m_b1 = 0.1f, s.b2 = 0.999f, s.one_m_b2 = 0.001f, s.eps = 1e-8f;
      s.wd = 0.01f, s.decay = 1 - 1e-3f * 0.01f, s.neg_step_size = -1e-3f / 0.1f;
      s.bc2_sqrt = std::sqrt(0.001f);
      s.maximize = variant & 1;
      s.decoupled_wd = variant == 2;
      s.l2_wd = variant == 3;
      const size_t n = 37;
      std::vector<float> p = values(n, -1, 1, 31u), g = values(n, -1, 1, 37u),
                         m = values(n, -0.1f, 0.1f, 41u), v = values(n, 0, 0.01f, 43u);
      std::vector<float> vmax = values(n, 0, 0.02f, 47u);
      std::vector<float> p2 = p, m2 = m, v2 = v, vmax2 = vmax;
      const bool ams = variant >= 2;
      k->adam(s, p2.data(), g.data(), m2.data(), v2.data(), ams ? vmax2.data() : nullptr,
              static_cast<int64_t>(n));
      for (size_t j = 0; j < n; ++j) {  // the rule in double (each level rounds its own way)
        double gj = s.maximize ? -g[j] : g[j];
        double pj = p[j];
        if (s.decoupled_wd) pj *= s.decay;
        if (s.l2_wd) gj += double(s.wd) * pj;
        const double mj = m[j] * double(s.b1) + s.one_m_b1 * gj;
        const double vj = v[j] * double(s.b2) + s.one_m_b2 * gj * gj;
        const double vd = ams ? std::max(vj, double(vmax[j])) : vj;
        pj += s.neg_step_size * mj / (std::sqrt(vd) / s.bc2_sqrt + s.eps);
        // Absolute bounds: a few float roundings of the terms (m and g up to 1, v up to 0.02).
        ASSERT_TRUE(close(m2[j], mj, 1e-6, 3e-8)) << k->level << " m, variant " << variant;
        ASSERT_TRUE(close(v2[j], vj, 1e-6, 3e-9)) << k->level << " v, variant " << variant;
        ASSERT_TRUE(close(p2[j], pj, 1e-6, 3e-7)) << k->level << " p, variant " << variant;
        if (ams) ASSERT_TRUE(close(vmax2[j], std::max(vj, double(vmax[j])), 1e-6, 3e-9));
      }
    }
  }
}

// ---- (c) the choice --------------------------------------------------------------------------

Features avx2_cpu() {
  Features f;
  f.sse3 = f.ssse3 = f.sse4_1 = f.sse4_2 = f.avx = f.fma = f.avx2 = f.os_ymm = true;
  return f;
}
Features avx512_cpu() {
  Features f = avx2_cpu();
  f.avx512f = f.avx512cd = f.avx512dq = f.avx512bw = f.avx512vl = f.os_zmm = true;
  return f;
}

/// The message of the ValueError that choose_level throws ("" if none).
std::string choice_error(const std::string& request, const Features& f) {
  try {
    tg::vec::choose_level(request, f);
  } catch (const tg::ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(VecChoice, NeverALevelTheCpuLacks) {
  Features no_os_zmm = avx512_cpu();  // cpuid says AVX-512, the OS does not save the ZMM state
  no_os_zmm.os_zmm = false;
  Features no_fma = avx2_cpu();
  no_fma.fma = false;
  Features no_os_ymm = avx2_cpu();
  no_os_ymm.os_ymm = false;
  EXPECT_FALSE(tg::vec::runs("avx512", no_os_zmm));
  EXPECT_TRUE(tg::vec::runs("avx2", no_os_zmm));
  EXPECT_FALSE(tg::vec::runs("avx2", no_fma));
  EXPECT_FALSE(tg::vec::runs("avx2", no_os_ymm));
  EXPECT_FALSE(tg::vec::runs("avx2", Features()));
  EXPECT_TRUE(tg::vec::runs("baseline", Features()));
  EXPECT_FALSE(tg::vec::runs("sse5", avx512_cpu()));
  if (!tg::vec::kernels_for("baseline")) {  // a native build: its one level, whatever asked
    EXPECT_EQ(tg::vec::choose_level("", Features()), "native");
    EXPECT_EQ(tg::vec::choose_level("native", Features()), "native");
    EXPECT_NE(choice_error("avx2", avx512_cpu()).find("holds only native"), std::string::npos)
        << choice_error("avx2", avx512_cpu());
    return;
  }
  EXPECT_EQ(tg::vec::choose_level("", Features()), "baseline");
  EXPECT_EQ(tg::vec::choose_level("auto", avx2_cpu()), "avx2");
  EXPECT_EQ(tg::vec::choose_level("", no_os_zmm), "avx2");
  EXPECT_EQ(tg::vec::choose_level("", no_fma), "baseline");
  EXPECT_EQ(tg::vec::choose_level("", avx512_cpu()), "avx512");
  EXPECT_EQ(tg::vec::choose_level("avx2", avx512_cpu()), "avx2");
  EXPECT_EQ(tg::vec::choose_level("baseline", avx512_cpu()), "baseline");
  const std::string lacks = choice_error("avx512", avx2_cpu());
  EXPECT_NE(lacks.find("TAPEGRAD_CPU_LEVEL=avx512: this CPU lacks AVX-512F"), std::string::npos) << lacks;
  EXPECT_NE(choice_error("avx512", no_os_zmm).find("ZMM"), std::string::npos);
  EXPECT_NE(choice_error("avx2", Features()).find("AVX2"), std::string::npos);
  EXPECT_NE(choice_error("native", avx512_cpu()).find("holds only baseline, avx2, avx512"),
            std::string::npos);
}

TEST(VecChoice, UnknownLevelsAreErrors) {
  const std::string e = choice_error("avx1024", avx512_cpu());
  EXPECT_NE(e.find("TAPEGRAD_CPU_LEVEL: expected auto, "), std::string::npos) << e;
  EXPECT_NE(e.find("got 'avx1024'"), std::string::npos) << e;
  EXPECT_NE(choice_error("AVX2", avx512_cpu()), "");
}

TEST(VecChoice, TheLevelThatRunsIsTheOneAskedForAndDeviceStatusSaysIt) {
  const char* env = std::getenv("TAPEGRAD_CPU_LEVEL");
  const std::string request = env ? env : "";
  const std::string want = tg::vec::choose_level(request, tg::cpu::read_cpu().features);
  EXPECT_EQ(tg::vec::kernels().level, want);
  const std::string status = tg::device_status();
  EXPECT_NE(status.find(want + " kernels"), std::string::npos) << status;
  EXPECT_EQ(tg::vec::describe_choice().rfind(want, 0), 0u) << tg::vec::describe_choice();
  std::cout << "device_status: " << status << "\n";
}

}  // namespace
