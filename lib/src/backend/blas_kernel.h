#pragma once
// Library-internal: which of OpenBLAS's kernel sets to run on this CPU. A pure function of
// the processor (cpu_features.h), the kernel OpenBLAS chose by itself, and the kernel sets
// this OpenBLAS build has, so that a table-driven test covers the CPUs this machine is not.
//
// OpenBLAS built with DYNAMIC_ARCH picks its kernels from a table of CPU models when it
// loads. On a model it does not know it falls back, sometimes far: 0.3.21 runs its SSE3
// "Prescott" kernels on an Emerald Rapids Xeon and its AVX2 "Haswell" ones on a Zen 5.
// OPENBLAS_CORETYPE, read once as it loads, overrides the table. tapegrad asks for a better
// set only when this CPU and its operating system can execute every instruction of it and
// it belongs to a faster class (SSE < AVX < AVX2 < AVX-512) than OpenBLAS's own choice.
#include <string>
#include <vector>

#include "backend/cpu_features.h"

namespace tg {
namespace blas {

/// The vector instruction class of a kernel set, which decides its sgemm speed.
enum class Level : int {
  Unranked = 0,  ///< a name tapegrad does not rank (it never replaces those)
  SSE = 1,       ///< Prescott, Core2, Nehalem, Barcelona, ...
  AVX = 2,       ///< Sandybridge, Bulldozer, Piledriver, Steamroller
  AVX2 = 3,      ///< Haswell, Zen, Excavator (AVX2 and FMA3)
  AVX512 = 4,    ///< SkylakeX, Cooperlake (with BF16), SapphireRapids (with AMX)
};

/// The class of the kernel set named `core` (as openblas_get_corename() writes it; any case).
Level kernel_level(const std::string& core);

/// "SSE3", "AVX", "AVX2", "AVX-512" (or "unranked").
const char* level_name(Level level);

/// Whether this CPU and its operating system can execute every instruction the kernels of
/// `core` may use. Known only for the sets tapegrad may ask for (ranked_kernels()); false
/// for every other name.
bool can_run(const std::string& core, const cpu::CpuInfo& cpu);

/// The sets tapegrad may ask for, best first: SapphireRapids, Cooperlake, SkylakeX, Zen,
/// Haswell, Sandybridge.
const std::vector<std::string>& ranked_kernels();

/// The best set among `known` (the names this OpenBLAS build has) that `cpu` can run, with
/// Zen before Haswell on AMD and Hygon processors from family 17h (Zen) on, Haswell first
/// elsewhere; "" if there is none (a processor without AVX: OpenBLAS's own table knows the
/// older processors better).
std::string best_kernel(const cpu::CpuInfo& cpu, const std::vector<std::string>& known);

struct Choice {
  std::string core;    ///< the set to ask OpenBLAS for; "" keeps OpenBLAS's own choice
  std::string reason;  ///< why, in a few words (for device_status and the hint)
};

/// What to run, given OpenBLAS's own choice `openblas_core`: best_kernel() if it is of a
/// faster class, else nothing.
Choice choose_kernel(const cpu::CpuInfo& cpu, const std::string& openblas_core,
                     const std::vector<std::string>& known);

/// The expected speed-up of a large sgemm on one thread going from kernels of class `from`
/// to `to` (1 if not faster). From 1024³ sgemm measured on a Zen 5 with each class forced:
/// SSE3 40, AVX 98, AVX2 108, AVX-512 190-207 GFLOP/s; on an Emerald Rapids Xeon
/// SSE3 12-15 against AVX-512 97-150, so the figures are conservative.
double expected_gain(Level from, Level to);

}  // namespace blas
}  // namespace tg
