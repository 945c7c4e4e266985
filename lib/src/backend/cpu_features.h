#pragma once
// Library-internal: what this processor and its operating system can execute, read with
// cpuid and xgetbv. The input of the OpenBLAS kernel choice (blas_kernel.h), which is a pure
// function of this struct so that tests can hand it the feature sets of other CPUs.
#include <string>

namespace tg {
namespace cpu {

/// cpuid's feature bits that decide which OpenBLAS kernels may run, and what the operating
/// system saves on a context switch (XCR0). An extension is usable only when both say so:
/// cpuid may announce AVX-512 on a kernel that does not save the ZMM registers.
struct Features {
  bool sse3 = false, ssse3 = false, sse4_1 = false, sse4_2 = false;   // leaf 1
  bool avx = false, fma = false;                                      // leaf 1
  bool avx2 = false;                                                  // leaf 7
  bool avx512f = false, avx512cd = false, avx512dq = false, avx512bw = false,
       avx512vl = false;                                              // leaf 7
  bool avx512_bf16 = false;                                           // leaf 7.1
  bool avx512_fp16 = false, amx_tile = false, amx_bf16 = false;       // leaf 7
  bool os_ymm = false;  ///< XCR0 has the SSE and AVX state
  bool os_zmm = false;  ///< XCR0 also has the opmask and both halves of the ZMM state
  bool os_amx = false;  ///< XCR0 has the tile configuration and tile data state
};

/// The processor: vendor string, display family and model (base plus extended fields, as
/// Intel and AMD define them), brand string, features.
struct CpuInfo {
  std::string vendor;  ///< "GenuineIntel", "AuthenticAMD", "HygonGenuine", ...; "" off x86-64
  int family = 0;
  int model = 0;
  std::string brand;   ///< "AMD EPYC 9B45 128-Core Processor"; may be empty
  Features features;
};

/// This machine's processor (x86-64: cpuid and xgetbv; elsewhere an empty CpuInfo).
CpuInfo read_cpu();

/// "AMD EPYC (AuthenticAMD family 26 model 2)", for messages.
std::string describe(const CpuInfo& cpu);

}  // namespace cpu
}  // namespace tg
