#pragma once
// Library-internal: the vector kernels behind tapegrad's own arithmetic (activations, binary
// ops, the Adam update) as plain functions over float pointers, and the instruction set they
// run with.
//
// A native build (TAPEGRAD_NATIVE=ON) compiles them once, for the build machine, in
// vec_native.cpp. A portable build compiles them three times into namespaces of their own:
// baseline x86-64 (SSE2, vec_baseline.cpp), AVX2 + FMA (vec_avx2.cpp) and AVX-512 F, CD, BW,
// DQ, VL (vec_avx512.cpp); kernels() picks the best one this CPU and its operating system can
// run (cpuid and XCR0, backend/cpu_features.h), once. TAPEGRAD_CPU_LEVEL=baseline|avx2|avx512
// asks for one; auto (or unset) takes the best. Those files hold the only AVX code of a
// portable library (ctest's portable.baseline_isa checks it).
//
// Legend: n = elements; a kernel's output may be one of its inputs (y = x, g in place).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu_features.h"

namespace tg {
namespace vec {

enum class Binary { Add, Sub, Mul, Div };

/// One Adam/AdamW step's scalars, as optim/adam.cpp derives them from the options.
struct AdamStep {
  float b1 = 0, one_m_b1 = 0, b2 = 0, one_m_b2 = 0;  ///< β1, 1 - β1, β2, 1 - β2
  float eps = 0, wd = 0, decay = 1;                  ///< ε, weight decay, 1 - lr·wd
  float neg_step_size = 0, bc2_sqrt = 1;             ///< -lr / (1 - β1^t), √(1 - β2^t)
  bool maximize = false, decoupled_wd = false, l2_wd = false;  ///< AdamW decay; Adam's L2
};

/// One instruction set's kernels.
struct Kernels {
  const char* level;  ///< "baseline", "avx2", "avx512" or "native"
  /// y = e^x, tanh(x), 1 / (1 + e^-x)
  void (*exp)(const float* x, float* y, size_t n);
  void (*tanh)(const float* x, float* y, size_t n);
  void (*sigmoid)(const float* x, float* y, size_t n);
  /// y = x Φ(x) (exact GELU); dydx = Φ(x) + x φ(x) unless null
  void (*gelu)(const float* x, float* y, float* dydx, size_t n);
  /// g ← g (1 - y²), g y (1 - y): the backward of tanh and sigmoid from their output y
  void (*tanh_backward)(float* g, const float* y, size_t n);
  void (*sigmoid_backward)(float* g, const float* y, size_t n);
  /// y = a op b over n elements. a has na elements and b nb: each either n, or a divisor of
  /// n, the operand then repeating every na (nb) elements (a bias row, a scalar).
  void (*binary)(Binary op, const float* a, size_t na, const float* b, size_t nb, float* y,
                 size_t n);
  /// The Adam/AdamW update of n parameters p with gradients g and moments m, v (vmax: the
  /// AMSGrad maximum, or null), in place; fused multiply-adds where the level has FMA.
  void (*adam)(const AdamStep& s, float* p, const float* g, float* m, float* v, float* vmax,
               int64_t n);
};

/// The kernels every op calls: chosen on first use (TAPEGRAD_CPU_LEVEL, else the best this
/// CPU runs), a large call cut into parts on tapegrad's threads (backend/parallel.h; the
/// same bits as one call). Throws ValueError for a level that is unknown, not built, or one
/// the CPU lacks.
const Kernels& kernels();

/// The levels this library holds, best last: {"native"}, or {"baseline", "avx2", "avx512"}.
std::vector<std::string> built_levels();
/// Whether a CPU with these features can run `level`'s code (false for an unknown level).
bool runs(const std::string& level, const cpu::Features& f);
/// The level for TAPEGRAD_CPU_LEVEL's value `request` ("" or "auto": the best it runs) on a
/// CPU with features f; throws ValueError naming the variable for any other value it cannot
/// honour.
std::string choose_level(const std::string& request, const cpu::Features& f);
/// A built level's own kernels, on the caller's thread (a test may call any the CPU runs);
/// nullptr if not built.
const Kernels* kernels_for(const std::string& level);

/// For device_status(): "avx512 kernels (the best this CPU runs)", "avx2 kernels
/// (TAPEGRAD_CPU_LEVEL=avx2)", "native kernels (-march=native build)".
std::string describe_choice();

}  // namespace vec
}  // namespace tg
