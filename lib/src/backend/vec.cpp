// Which vector kernels run (backend/vec.h): the levels this library holds, what each needs
// from the CPU, and the choice, made once. TAPEGRAD_VEC_DISPATCH (lib/CMakeLists.txt) marks a
// portable build, which holds three levels; a native build holds one.
#include "backend/vec.h"

#include <cstdlib>

#include "backend/parallel.h"
#include "tapegrad/error.h"

namespace tg {
namespace vec {

// Each level's table, defined in its own file (vec_<level>.cpp via vec_kernels.h).
namespace baseline { extern const Kernels table; }
namespace avx2 { extern const Kernels table; }
namespace avx512 { extern const Kernels table; }
namespace native { extern const Kernels table; }

namespace {

struct Level {
  const char* name;
  const Kernels* table;
};

#ifdef TAPEGRAD_VEC_DISPATCH
constexpr Level kBuilt[] = {{"baseline", &baseline::table}, {"avx2", &avx2::table},
                            {"avx512", &avx512::table}};
#else
constexpr Level kBuilt[] = {{"native", &native::table}};
#endif

constexpr const char* kVar = "TAPEGRAD_CPU_LEVEL";

/// What the CPU lacks for `level`, in words ("" when it runs it).
std::string missing(const std::string& level, const cpu::Features& f) {
  std::string out;
  auto need = [&](bool ok, const char* what) {
    if (!ok) out += (out.empty() ? "" : ", ") + std::string(what);
  };
  if (level == "avx2" || level == "avx512") {
    need(f.avx, "AVX");
    need(f.avx2, "AVX2");
    need(f.fma, "FMA");
    need(f.os_ymm, "the OS saving the YMM registers");
  }
  if (level == "avx512") {
    need(f.avx512f, "AVX-512F");
    need(f.avx512cd, "AVX-512CD");
    need(f.avx512bw, "AVX-512BW");
    need(f.avx512dq, "AVX-512DQ");
    need(f.avx512vl, "AVX-512VL");
    need(f.os_zmm, "the OS saving the ZMM and opmask registers");
  }
  return out;
}

bool known(const std::string& level) {
  return level == "baseline" || level == "avx2" || level == "avx512" || level == "native";
}

// ---- the chosen level's kernels, large calls split across tapegrad's threads -------------
// Each wrapper cuts its call into parts (backend/parallel.h) and runs the level's own kernel on
// each. The kernels compute every element alone (the vector code in every lane, the padded
// tail too), so the parts give the bits of one call. The grains keep a part at 2-3 µs or more
// (native AVX-512, one core: add 0.13 ns an element, exp 0.23, tanh 0.5, GELU with its
// derivative 0.8).

const Kernels* g_level = nullptr;  // set once, by choose(), before the table is handed out

/// y = f(x) for one of the level's unary kernels, in parts of at least `grain` elements.
template <void (*Kernels::*F)(const float*, float*, size_t), int64_t grain>
void unary_split(const float* x, float* y, size_t n) {
  detail::for_range(static_cast<int64_t>(n), grain, [&](int64_t b, int64_t e) {
    (g_level->*F)(x + b, y + b, static_cast<size_t>(e - b));
  });
}

/// g ← g·f'(y) for one of the level's backward kernels (tanh's, sigmoid's).
template <void (*Kernels::*F)(float*, const float*, size_t)>
void backward_split(float* g, const float* y, size_t n) {
  detail::for_range(static_cast<int64_t>(n), detail::kGrain, [&](int64_t b, int64_t e) {
    (g_level->*F)(g + b, y + b, static_cast<size_t>(e - b));
  });
}

void gelu_split(const float* x, float* y, float* dydx, size_t n) {
  detail::for_range(static_cast<int64_t>(n), detail::kGrain / 8, [&](int64_t b, int64_t e) {
    g_level->gelu(x + b, y + b, dydx ? dydx + b : nullptr, static_cast<size_t>(e - b));
  });
}

// An operand that repeats (a bias row of nb elements) splits on whole repeats, so that every
// part sees it from its start; a scalar or a full operand splits anywhere.
void binary_split(Binary op, const float* a, size_t na, const float* b, size_t nb, float* y,
                  size_t n) {
  const auto N = static_cast<int64_t>(n);
  const bool a_full = na == n || na == 1, b_full = nb == n || nb == 1;
  auto run = [&](int64_t s, int64_t e) {  // elements [s, e)
    const auto len = static_cast<size_t>(e - s);
    g_level->binary(op, na == 1 ? a : a + s, na == 1 ? 1 : len, nb == 1 ? b : b + s,
                    nb == 1 ? 1 : len, y + s, len);
  };
  if (a_full && b_full) {
    detail::for_range(N, detail::kGrain, run);
    return;
  }
  const size_t period = a_full ? nb : na;  // the repeating operand's length
  if (!(a_full || b_full) || period == 0 || n % period != 0) {
    g_level->binary(op, a, na, b, nb, y, n);  // both repeat (no caller sends it): at once
    return;
  }
  const auto P = static_cast<int64_t>(period);
  detail::for_rows(N / P, P, detail::kGrain, [&](int64_t r0, int64_t r1) {
    const auto s = static_cast<size_t>(r0 * P), len = static_cast<size_t>((r1 - r0) * P);
    if (a_full)
      g_level->binary(op, na == 1 ? a : a + s, na == 1 ? 1 : len, b, nb, y + s, len);
    else
      g_level->binary(op, a, na, nb == 1 ? b : b + s, nb == 1 ? 1 : len, y + s, len);
  });
}

void adam_split(const AdamStep& s, float* p, const float* g, float* m, float* v, float* vmax,
                int64_t n) {
  detail::for_range(n, detail::kGrain, [&](int64_t b, int64_t e) {
    g_level->adam(s, p + b, g + b, m + b, v + b, vmax ? vmax + b : nullptr, e - b);
  });
}

Kernels split_table(const Kernels* level) {
  g_level = level;
  return {level->level,
          &unary_split<&Kernels::exp, detail::kGrain / 2>,
          &unary_split<&Kernels::tanh, detail::kGrain / 4>,
          &unary_split<&Kernels::sigmoid, detail::kGrain / 2>,
          &gelu_split,
          &backward_split<&Kernels::tanh_backward>,
          &backward_split<&Kernels::sigmoid_backward>,
          &binary_split,
          &adam_split};
}

struct Choice {
  const Kernels* kernels = nullptr;  // the level's own
  Kernels split;                     // the same, large calls split across threads
  std::string why;
};

Choice choose() {
  const char* env = std::getenv(kVar);
  const std::string request = env ? env : "";
  const std::string level = choose_level(request, cpu::read_cpu().features);
  Choice c;
  c.kernels = kernels_for(level);
  c.split = split_table(c.kernels);
  if (level == "native")
    c.why = "native kernels (-march=native build)";
  else if (request.empty() || request == "auto")
    c.why = level + " kernels (the best this CPU runs)";
  else
    c.why = level + " kernels (" + kVar + "=" + request + ")";
  return c;
}

const Choice& chosen() {
  static const Choice c = choose();  // a throw leaves it unset: the next call throws again
  return c;
}

}  // namespace

bool runs(const std::string& level, const cpu::Features& f) {
  if (level == "baseline" || level == "native") return true;  // native: the build machine's
  return known(level) && missing(level, f).empty();
}

std::vector<std::string> built_levels() {
  std::vector<std::string> out;
  for (const Level& l : kBuilt) out.push_back(l.name);
  return out;
}

const Kernels* kernels_for(const std::string& level) {
  for (const Level& l : kBuilt)
    if (level == l.name) return l.table;
  return nullptr;
}

std::string choose_level(const std::string& request, const cpu::Features& f) {
  std::string names;
  for (const Level& l : kBuilt) names += std::string(names.empty() ? "" : ", ") + l.name;
  if (request.empty() || request == "auto") {
    std::string best = kBuilt[0].name;
    for (const Level& l : kBuilt)
      if (runs(l.name, f)) best = l.name;
    return best;
  }
  if (!known(request))
    throw ValueError(std::string(kVar) + ": expected auto, " + names + ", got '" + request + "'");
  if (!kernels_for(request))
    throw ValueError(std::string(kVar) + "=" + request + ": this library holds only " + names +
                     " kernels (a native build, TAPEGRAD_NATIVE=ON, has one set; a portable "
                     "build, TAPEGRAD_NATIVE=OFF, has baseline, avx2 and avx512)");
  if (!runs(request, f))
    throw ValueError(std::string(kVar) + "=" + request + ": this CPU lacks " +
                     missing(request, f) + "; " + kVar + "=auto picks the best it runs");
  return request;
}

const Kernels& kernels() { return chosen().split; }

std::string describe_choice() { return chosen().why; }

}  // namespace vec
}  // namespace tg
