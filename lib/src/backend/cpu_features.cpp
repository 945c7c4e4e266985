// Reading the processor's features (cpu_features.h). Bit positions from the Intel SDM,
// volume 2, CPUID, and AMD's CPUID specification; XCR0's layout from the SDM, volume 1, 13.
#include "backend/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TG_X86 1
#endif

namespace tg {
namespace cpu {

#ifdef TG_X86
namespace {

struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(uint32_t leaf, uint32_t sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

bool bit(uint32_t v, int n) { return (v >> n) & 1u; }

uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

}  // namespace

CpuInfo read_cpu() {
  CpuInfo info;
  const uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf == 0) return info;
  const Regs v = cpuid(0);
  char vendor[13] = {0};
  std::memcpy(vendor, &v.b, 4);
  std::memcpy(vendor + 4, &v.d, 4);
  std::memcpy(vendor + 8, &v.c, 4);
  info.vendor = vendor;

  Features& f = info.features;
  if (max_leaf >= 1) {
    const Regs l1 = cpuid(1);
    const int base_family = static_cast<int>((l1.a >> 8) & 0xf);
    const int base_model = static_cast<int>((l1.a >> 4) & 0xf);
    info.family = base_family == 0xf ? base_family + static_cast<int>((l1.a >> 20) & 0xff)
                                     : base_family;
    info.model = base_family == 0x6 || base_family == 0xf
                     ? (static_cast<int>((l1.a >> 16) & 0xf) << 4) + base_model
                     : base_model;
    f.sse3 = bit(l1.c, 0);
    f.ssse3 = bit(l1.c, 9);
    f.fma = bit(l1.c, 12);
    f.sse4_1 = bit(l1.c, 19);
    f.sse4_2 = bit(l1.c, 20);
    f.avx = bit(l1.c, 28);
    if (bit(l1.c, 27)) {  // OSXSAVE: xgetbv may be executed
      const uint64_t x = xcr0();
      f.os_ymm = (x & 0x6) == 0x6;
      f.os_zmm = f.os_ymm && (x & 0xe0) == 0xe0;
      f.os_amx = (x & 0x60000) == 0x60000;
    }
  }
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    f.avx2 = bit(l7.b, 5);
    f.avx512f = bit(l7.b, 16);
    f.avx512dq = bit(l7.b, 17);
    f.avx512cd = bit(l7.b, 28);
    f.avx512bw = bit(l7.b, 30);
    f.avx512vl = bit(l7.b, 31);
    f.amx_bf16 = bit(l7.d, 22);
    f.avx512_fp16 = bit(l7.d, 23);
    f.amx_tile = bit(l7.d, 24);
    if (l7.a >= 1) f.avx512_bf16 = bit(cpuid(7, 1).a, 5);
  }
  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    char brand[49] = {0};
    for (uint32_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    std::string b = brand;
    const size_t first = b.find_first_not_of(' '), last = b.find_last_not_of(' ');
    info.brand = first == std::string::npos ? "" : b.substr(first, last - first + 1);
  }
  return info;
}
#else
CpuInfo read_cpu() { return CpuInfo{}; }
#endif

std::string describe(const CpuInfo& cpu) {
  if (cpu.vendor.empty()) return "a processor without cpuid";
  const std::string ids = cpu.vendor + " family " + std::to_string(cpu.family) + " model " +
                          std::to_string(cpu.model);
  return cpu.brand.empty() ? ids : cpu.brand + " (" + ids + ")";
}

}  // namespace cpu
}  // namespace tg
