// The OpenBLAS kernel choice (blas_kernel.h): pure functions, no OpenBLAS, no cpuid.
#include "backend/blas_kernel.h"

#include <algorithm>
#include <cctype>

namespace tg {
namespace blas {

namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool same_name(const std::string& a, const std::string& b) { return lower(a) == lower(b); }

/// The kernel names of OpenBLAS's x86-64 dynamic dispatch (driver/others/dynamic.c), by class.
struct Named {
  const char* name;
  Level level;
};
constexpr Named kNames[] = {
    {"Katmai", Level::SSE},        {"Coppermine", Level::SSE},   {"Northwood", Level::SSE},
    {"Prescott", Level::SSE},      {"Banias", Level::SSE},       {"Atom", Level::SSE},
    {"Core2", Level::SSE},         {"Penryn", Level::SSE},       {"Dunnington", Level::SSE},
    {"Nehalem", Level::SSE},       {"Athlon", Level::SSE},       {"Opteron(SSE3)", Level::SSE},
    {"Opteron", Level::SSE},       {"Barcelona", Level::SSE},    {"Nano", Level::SSE},
    {"Bobcat", Level::SSE},        {"Sandybridge", Level::AVX},  {"Bulldozer", Level::AVX},
    {"Piledriver", Level::AVX},    {"Steamroller", Level::AVX},  {"Haswell", Level::AVX2},
    {"Excavator", Level::AVX2},    {"Zen", Level::AVX2},         {"SkylakeX", Level::AVX512},
    {"Cooperlake", Level::AVX512}, {"SapphireRapids", Level::AVX512},
};

bool avx_ok(const cpu::Features& f) { return f.avx && f.os_ymm; }
bool avx2_ok(const cpu::Features& f) { return avx_ok(f) && f.avx2 && f.fma; }
/// The AVX-512 subsets of Skylake-X; OpenBLAS compiles those kernels with
/// -march=skylake-avx512, so any of them may appear. Knights Landing (F and CD only) fails.
bool avx512_ok(const cpu::Features& f) {
  return avx2_ok(f) && f.os_zmm && f.avx512f && f.avx512cd && f.avx512dq && f.avx512bw &&
         f.avx512vl;
}
bool bf16_ok(const cpu::Features& f) { return avx512_ok(f) && f.avx512_bf16; }
/// Sapphire Rapids' kernels use AMX tiles (bf16 products) and may use AVX512-FP16.
bool amx_ok(const cpu::Features& f) {
  return bf16_ok(f) && f.avx512_fp16 && f.amx_tile && f.amx_bf16 && f.os_amx;
}

bool zen_family(const cpu::CpuInfo& cpu) {
  return (cpu.vendor == "AuthenticAMD" && cpu.family >= 0x17) || cpu.vendor == "HygonGenuine";
}

bool is_known(const std::vector<std::string>& known, const std::string& name) {
  return std::any_of(known.begin(), known.end(),
                     [&](const std::string& k) { return same_name(k, name); });
}

/// Relative large-sgemm speed of each class (see expected_gain in the header).
double speed(Level level) {
  switch (level) {
    case Level::SSE: return 40;
    case Level::AVX: return 98;
    case Level::AVX2: return 108;
    case Level::AVX512: return 190;
    case Level::Unranked: break;
  }
  return 0;
}

}  // namespace

Level kernel_level(const std::string& core) {
  for (const Named& n : kNames)
    if (same_name(core, n.name)) return n.level;
  return Level::Unranked;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::SSE: return "SSE3";
    case Level::AVX: return "AVX";
    case Level::AVX2: return "AVX2";
    case Level::AVX512: return "AVX-512";
    case Level::Unranked: break;
  }
  return "unranked";
}

bool can_run(const std::string& core, const cpu::CpuInfo& cpu) {
  const cpu::Features& f = cpu.features;
  const std::string c = lower(core);
  if (c == "sapphirerapids") return amx_ok(f);
  if (c == "cooperlake") return bf16_ok(f);
  if (c == "skylakex") return avx512_ok(f);
  if (c == "haswell" || c == "zen") return avx2_ok(f);
  if (c == "sandybridge") return avx_ok(f);
  return false;
}

const std::vector<std::string>& ranked_kernels() {
  static const std::vector<std::string> names = {"SapphireRapids", "Cooperlake", "SkylakeX",
                                                 "Zen",            "Haswell",    "Sandybridge"};
  return names;
}

std::string best_kernel(const cpu::CpuInfo& cpu, const std::vector<std::string>& known) {
  std::vector<std::string> order = ranked_kernels();
  if (!zen_family(cpu)) {  // Haswell's blocking before Zen's on every other processor
    auto zen = std::find(order.begin(), order.end(), "Zen");
    auto haswell = std::find(order.begin(), order.end(), "Haswell");
    std::iter_swap(zen, haswell);
  }
  for (const std::string& name : order)
    if (is_known(known, name) && can_run(name, cpu)) return name;
  return "";
}

Choice choose_kernel(const cpu::CpuInfo& cpu, const std::string& openblas_core,
                     const std::vector<std::string>& known) {
  const Level own = kernel_level(openblas_core);
  if (own == Level::Unranked)
    return {"", "OpenBLAS chose " + openblas_core + ", a kernel tapegrad does not rank"};
  const std::string best = best_kernel(cpu, known);
  if (best.empty())
    return {"", std::string("no kernel of this build above OpenBLAS's ") + level_name(own) +
                    " ones runs on this CPU"};
  const Level level = kernel_level(best);
  if (level <= own)
    return {"", "OpenBLAS's choice is of the best class this CPU runs (" +
                    std::string(level_name(own)) + ")"};
  return {best, "OpenBLAS chose " + openblas_core + " (" + level_name(own) + "); this CPU runs " +
                    best + " (" + level_name(level) + ")"};
}

double expected_gain(Level from, Level to) {
  if (from == Level::Unranked || to == Level::Unranked || to <= from) return 1.0;
  return speed(to) / speed(from);
}

}  // namespace blas
}  // namespace tg
