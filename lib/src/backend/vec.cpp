// Which vector kernels run (backend/vec.h): the levels this library holds, what each needs
// from the CPU, and the choice, made once. TAPEGRAD_VEC_DISPATCH (lib/CMakeLists.txt) marks a
// portable build, which holds three levels; a native build holds one.
#include "backend/vec.h"

#include <cstdlib>

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

struct Choice {
  const Kernels* kernels = nullptr;
  std::string why;
};

Choice choose() {
  const char* env = std::getenv(kVar);
  const std::string request = env ? env : "";
  const std::string level = choose_level(request, cpu::read_cpu().features);
  Choice c;
  c.kernels = kernels_for(level);
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

const Kernels& kernels() { return *chosen().kernels; }

std::string describe_choice() { return chosen().why; }

}  // namespace vec
}  // namespace tg
