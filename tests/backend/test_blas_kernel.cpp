// The OpenBLAS kernel choice (lib/src/backend/blas_kernel.h) and the run-time loader
// (lib/src/backend/openblas.h):
//   (a) the choice, table-driven, for the feature sets of CPUs this machine is not;
//   (b) never a kernel the CPU cannot run, over every CPU, build and OpenBLAS choice;
//   (c) the cpuid reader against /proc/cpuinfo;
//   (d) the loader's every branch, driven through tests/fake_openblas in child processes
//       (they dlopen, dlclose and set OPENBLAS_CORETYPE);
//   (e) the real OpenBLAS: loaded at run time, not linked; its kernels pass the check; the
//       status agrees with the environment (which these tests never change).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backend/blas_kernel.h"
#include "backend/cpu_features.h"
#include "backend/openblas.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"

namespace {

using tg::blas::Level;
using tg::cpu::CpuInfo;
using tg::cpu::Features;

// ---- feature sets ----------------------------------------------------------------------------

Features sse42() {
  Features f;
  f.sse3 = f.ssse3 = f.sse4_1 = f.sse4_2 = true;
  return f;
}
Features avx() {  // Sandy Bridge
  Features f = sse42();
  f.avx = f.os_ymm = true;
  return f;
}
Features avx2() {  // Haswell, Zen 1-3
  Features f = avx();
  f.avx2 = f.fma = true;
  return f;
}
Features avx512() {  // Skylake-X
  Features f = avx2();
  f.avx512f = f.avx512cd = f.avx512dq = f.avx512bw = f.avx512vl = f.os_zmm = true;
  return f;
}
Features bf16() {  // Cooper Lake, Zen 4, Zen 5
  Features f = avx512();
  f.avx512_bf16 = true;
  return f;
}
Features amx() {  // Sapphire Rapids, Emerald Rapids
  Features f = bf16();
  f.avx512_fp16 = f.amx_tile = f.amx_bf16 = f.os_amx = true;
  return f;
}

CpuInfo intel(int model, Features f) { return {"GenuineIntel", 6, model, "", f}; }
CpuInfo amd(int family, int model, Features f) { return {"AuthenticAMD", family, model, "", f}; }

struct NamedCpu {
  const char* name;
  CpuInfo cpu;
};

std::vector<NamedCpu> cpus() {
  Features no_zmm = avx512();  // AVX-512 in cpuid, but the OS does not save ZMM state
  no_zmm.os_zmm = false;
  Features no_ymm = avx2();  // AVX in cpuid, but the OS does not save YMM state
  no_ymm.os_ymm = false;
  Features knl = avx2();  // Knights Landing: AVX-512 F and CD only
  knl.avx512f = knl.avx512cd = knl.os_zmm = true;
  return {
      {"Haswell", intel(0x3f, avx2())},         {"Skylake-X", intel(0x55, avx512())},
      {"Cooperlake", intel(0x55, bf16())},      {"Sapphire Rapids", intel(0x8f, amx())},
      {"Emerald Rapids", intel(0xcf, amx())},   {"Zen 2", amd(0x17, 0x31, avx2())},
      {"Zen 3", amd(0x19, 0x01, avx2())},       {"Zen 4", amd(0x19, 0x11, bf16())},
      {"Zen 5", amd(0x1a, 0x02, bf16())},       {"Westmere (no AVX)", intel(0x2c, sse42())},
      {"Sandy Bridge", intel(0x2a, avx())},     {"Skylake-X, OS without ZMM", intel(0x55, no_zmm)},
      {"AVX2 CPU, OS without YMM", intel(0x3c, no_ymm)},
      {"Knights Landing", intel(0x57, knl)},    {"Hygon Dhyana", {"HygonGenuine", 0x18, 0, "", avx2()}},
  };
}

CpuInfo cpu_named(const std::string& name) {
  for (const NamedCpu& c : cpus())
    if (name == c.name) return c.cpu;
  ADD_FAILURE() << "no CPU named " << name;
  return {};
}

// Kernel sets of OpenBLAS builds: 0.3.21 (Debian 12), one with SapphireRapids (0.3.22 on),
// one built without AVX-512 (NO_AVX512), one without anything tapegrad ranks.
const std::vector<std::string> k0321 = {"Cooperlake", "SkylakeX", "Zen", "Haswell", "Sandybridge"};
const std::vector<std::string> k0322 = {"SapphireRapids", "Cooperlake", "SkylakeX", "Zen",
                                        "Haswell", "Sandybridge"};
const std::vector<std::string> kAvx2Only = {"Zen", "Haswell", "Sandybridge"};
const std::vector<std::string> kNone = {};

}  // namespace

// ---- (a) the choice ----------------------------------------------------------------------------

TEST(BlasKernel, ChoiceTable) {
  struct Row {
    const char* cpu;
    const char* openblas;                  // OpenBLAS's own choice
    const std::vector<std::string>* known;  // the build's kernel sets
    const char* choice;                    // what tapegrad asks for ("" keeps OpenBLAS's)
    const char* best;                      // best_kernel
  };
  const Row rows[] = {
      {"Haswell", "Haswell", &k0321, "", "Haswell"},
      {"Haswell", "Prescott", &k0321, "Haswell", "Haswell"},
      {"Haswell", "Sandybridge", &k0321, "Haswell", "Haswell"},
      {"Skylake-X", "SkylakeX", &k0321, "", "SkylakeX"},
      {"Skylake-X", "Haswell", &k0321, "SkylakeX", "SkylakeX"},
      {"Cooperlake", "Cooperlake", &k0321, "", "Cooperlake"},
      {"Cooperlake", "SkylakeX", &k0321, "", "Cooperlake"},  // same class: no reload
      {"Cooperlake", "Prescott", &k0321, "Cooperlake", "Cooperlake"},
      {"Sapphire Rapids", "Prescott", &k0321, "Cooperlake", "Cooperlake"},
      {"Sapphire Rapids", "Prescott", &k0322, "SapphireRapids", "SapphireRapids"},
      {"Sapphire Rapids", "Cooperlake", &k0322, "", "SapphireRapids"},
      {"Emerald Rapids", "Prescott", &k0321, "Cooperlake", "Cooperlake"},  // the issue's Xeon
      {"Emerald Rapids", "Prescott", &k0322, "SapphireRapids", "SapphireRapids"},
      {"Emerald Rapids", "Prescott", &kAvx2Only, "Haswell", "Haswell"},
      {"Zen 2", "Zen", &k0321, "", "Zen"},
      {"Zen 2", "Prescott", &k0321, "Zen", "Zen"},
      {"Zen 3", "Zen", &k0321, "", "Zen"},
      {"Zen 3", "Sandybridge", &k0321, "Zen", "Zen"},
      {"Zen 4", "Cooperlake", &k0321, "", "Cooperlake"},
      {"Zen 4", "Zen", &k0321, "Cooperlake", "Cooperlake"},
      {"Zen 4", "Prescott", &k0322, "Cooperlake", "Cooperlake"},  // no AMX on Zen 4
      {"Zen 5", "Haswell", &k0321, "Cooperlake", "Cooperlake"},
      {"Zen 5", "Cooperlake", &k0321, "", "Cooperlake"},
      {"Zen 5", "Haswell", &kAvx2Only, "", "Zen"},
      {"Zen 5", "Zen5", &k0321, "", "Cooperlake"},  // a name tapegrad does not rank: untouched
      {"Zen 5", "Prescott", &kNone, "", ""},
      {"Westmere (no AVX)", "Nehalem", &k0321, "", ""},
      {"Westmere (no AVX)", "Prescott", &k0321, "", ""},
      {"Sandy Bridge", "Prescott", &k0321, "Sandybridge", "Sandybridge"},
      {"Sandy Bridge", "Sandybridge", &k0321, "", "Sandybridge"},
      {"Skylake-X, OS without ZMM", "Haswell", &k0321, "", "Haswell"},
      {"Skylake-X, OS without ZMM", "Prescott", &k0321, "Haswell", "Haswell"},
      {"AVX2 CPU, OS without YMM", "Nehalem", &k0321, "", ""},
      {"Knights Landing", "Haswell", &k0321, "", "Haswell"},
      {"Hygon Dhyana", "Prescott", &k0321, "Zen", "Zen"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.cpu) + ", OpenBLAS chose " + r.openblas);
    const CpuInfo cpu = cpu_named(r.cpu);
    EXPECT_EQ(tg::blas::best_kernel(cpu, *r.known), r.best);
    const tg::blas::Choice c = tg::blas::choose_kernel(cpu, r.openblas, *r.known);
    EXPECT_EQ(c.core, r.choice) << c.reason;
    EXPECT_FALSE(c.reason.empty());
  }
}

TEST(BlasKernel, LevelsNamesAndGains) {
  EXPECT_EQ(tg::blas::kernel_level("Prescott"), Level::SSE);
  EXPECT_EQ(tg::blas::kernel_level("nehalem"), Level::SSE);  // any case
  EXPECT_EQ(tg::blas::kernel_level("Sandybridge"), Level::AVX);
  EXPECT_EQ(tg::blas::kernel_level("HASWELL"), Level::AVX2);
  EXPECT_EQ(tg::blas::kernel_level("Zen"), Level::AVX2);
  EXPECT_EQ(tg::blas::kernel_level("SkylakeX"), Level::AVX512);
  EXPECT_EQ(tg::blas::kernel_level("Cooperlake"), Level::AVX512);
  EXPECT_EQ(tg::blas::kernel_level("Zen5"), Level::Unranked);
  EXPECT_EQ(tg::blas::kernel_level(""), Level::Unranked);
  EXPECT_NEAR(tg::blas::expected_gain(Level::AVX2, Level::AVX512), 190.0 / 108, 1e-9);
  EXPECT_NEAR(tg::blas::expected_gain(Level::SSE, Level::AVX512), 190.0 / 40, 1e-9);
  EXPECT_EQ(tg::blas::expected_gain(Level::AVX512, Level::AVX2), 1.0);
  EXPECT_EQ(tg::blas::expected_gain(Level::Unranked, Level::AVX512), 1.0);
}

// ---- (b) never a kernel the CPU cannot run -----------------------------------------------------

// What each set tapegrad may ask for executes, written out flag by flag (independently of
// blas_kernel.cpp's helpers).
bool executes(const std::string& core, const Features& f) {
  const bool ymm = f.avx && f.os_ymm;
  const bool avx2 = ymm && f.avx2 && f.fma;
  const bool zmm = avx2 && f.os_zmm && f.avx512f && f.avx512cd && f.avx512dq && f.avx512bw &&
                   f.avx512vl;
  if (core == "Sandybridge") return ymm;
  if (core == "Haswell" || core == "Zen") return avx2;
  if (core == "SkylakeX") return zmm;
  if (core == "Cooperlake") return zmm && f.avx512_bf16;
  if (core == "SapphireRapids")
    return zmm && f.avx512_bf16 && f.avx512_fp16 && f.amx_tile && f.amx_bf16 && f.os_amx;
  return false;
}

TEST(BlasKernel, NeverAKernelTheCpuCannotRun) {
  const char* own_choices[] = {"Prescott", "Nehalem", "Core2",    "Barcelona", "Sandybridge",
                               "Bulldozer", "Haswell", "Zen",     "Excavator", "SkylakeX",
                               "Cooperlake", "SapphireRapids", "Zen5", ""};
  int asked = 0;
  for (const NamedCpu& c : cpus())
    for (const auto* known : {&k0321, &k0322, &kAvx2Only, &kNone})
      for (const char* own : own_choices) {
        const tg::blas::Choice choice = tg::blas::choose_kernel(c.cpu, own, *known);
        if (choice.core.empty()) continue;
        ++asked;
        EXPECT_TRUE(executes(choice.core, c.cpu.features))
            << c.name << ": asked for " << choice.core << " over " << own;
        EXPECT_TRUE(tg::blas::can_run(choice.core, c.cpu));
        EXPECT_NE(std::find(known->begin(), known->end(), choice.core), known->end())
            << "asked for a kernel the build does not have";
        EXPECT_GT(tg::blas::kernel_level(choice.core), tg::blas::kernel_level(own))
            << c.name << ": " << choice.core << " is no faster than " << own;
      }
  EXPECT_GT(asked, 50);  // the table does exercise replacements
  // A processor without AVX gets nothing from tapegrad, whatever the build.
  for (const std::string& core : tg::blas::ranked_kernels())
    EXPECT_FALSE(tg::blas::can_run(core, cpu_named("Westmere (no AVX)"))) << core;
}

// ---- (c) this machine's processor ----------------------------------------------------------

TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  const CpuInfo cpu = tg::cpu::read_cpu();
#if !defined(__x86_64__)
  GTEST_SKIP() << "cpuid is x86-64 only";
#endif
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags, vendor;
  while (std::getline(in, line)) {
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 1);
    if (vendor.empty() && line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  }
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  std::set<std::string> has;
  std::istringstream words(flags);
  for (std::string w; words >> w;) has.insert(w);
  EXPECT_EQ(cpu.vendor, vendor);
  EXPECT_GT(cpu.family, 0);
  const Features& f = cpu.features;
  // Linux lists an extension only if it also enabled its state, so compare "usable".
  EXPECT_EQ(f.avx && f.os_ymm, has.count("avx") == 1);
  EXPECT_EQ(f.avx2 && f.os_ymm, has.count("avx2") == 1);
  EXPECT_EQ(f.fma, has.count("fma") == 1);
  EXPECT_EQ(f.avx512f && f.os_zmm, has.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw && f.os_zmm, has.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512vl && f.os_zmm, has.count("avx512vl") == 1);
  EXPECT_EQ(f.avx512_bf16 && f.os_zmm, has.count("avx512_bf16") == 1);
  EXPECT_EQ(f.sse4_2, has.count("sse4_2") == 1);
  EXPECT_NE(tg::cpu::describe(cpu).find("family " + std::to_string(cpu.family)),
            std::string::npos);
}

// ---- (d) the loader, on a stand-in OpenBLAS --------------------------------------------------

#ifdef TAPEGRAD_FAKE_OPENBLAS
namespace {

/// The loader's options for the stand-in and a Zen 5 (or another CPU of the table).
tg::blas::LoadOptions fake(const char* cpu = "Zen 5") {
  tg::blas::LoadOptions o;
  o.libraries = {TAPEGRAD_FAKE_OPENBLAS};
  o.cpu = cpu_named(cpu);
  return o;
}

/// The stand-in's load log: how many times it was loaded, and with which kernel.
std::string log_path() {
  return testing::TempDir() + "fake_openblas_" + std::to_string(getpid()) + ".log";
}
std::string read_log() {
  std::ifstream in(log_path());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `body` in a child process with a clean loader environment; the child exits 0 if
/// `body` returns true, and prints what it was told to on stderr either way.
void start_child() {
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("TAPEGRAD_BLAS_KERNEL");
  for (const char* v : {"FAKE_OPENBLAS_DEFAULT", "FAKE_OPENBLAS_IGNORE_CORETYPE",
                        "FAKE_OPENBLAS_BROKEN", "FAKE_OPENBLAS_ILP64"})
    unsetenv(v);
  setenv("FAKE_OPENBLAS_LOG", log_path().c_str(), 1);
  std::remove(log_path().c_str());
}

bool report(bool ok, const tg::blas::Status& s) {
  if (!ok)
    std::fprintf(stderr, "status: kernel %s, own %s, origin %d, detail '%s', message '%s'; log '%s'\n",
                 s.kernel.c_str(), s.openblas_choice.c_str(), static_cast<int>(s.origin),
                 s.detail.c_str(), s.message.c_str(), read_log().c_str());
  return ok;
}

}  // namespace

class BlasLoader : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// OpenBLAS chose SSE kernels on a Zen 5: tapegrad loads it again with Cooperlake, silently.
TEST_F(BlasLoader, ReplacesASlowerChoice) {
  EXPECT_EXIT(
      {
        start_child();
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const bool ok = s.origin == tg::blas::Origin::Tapegrad && s.kernel == "Cooperlake" &&
                        s.openblas_choice == "Prescott" && s.message.empty() &&
                        read_log() == "load Prescott\nload Cooperlake\n" &&
                        std::getenv("OPENBLAS_CORETYPE") == nullptr &&  // put back as it was
                        tg::blas::summary(s) ==
                            "OpenBLAS 0.0.1-fake, kernel Cooperlake (tapegrad's choice; OpenBLAS "
                            "chose Prescott)" &&
                        tg::blas::check_products(lib).empty();
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// OPENBLAS_CORETYPE set: the user's choice stands, OpenBLAS is loaded once, nothing printed.
TEST_F(BlasLoader, RespectsOpenblasCoretype) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const bool ok = s.origin == tg::blas::Origin::Environment && s.kernel == "Haswell" &&
                        read_log() == "load Haswell\n" && s.message.empty() &&
                        s.detail == "OPENBLAS_CORETYPE=Haswell; this CPU runs Cooperlake "
                                    "(TAPEGRAD_BLAS_KERNEL=best to use it)";
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// TAPEGRAD_BLAS_KERNEL=best overrides OPENBLAS_CORETYPE, and puts the variable back.
TEST_F(BlasLoader, BestOverridesTheEnvironment) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
        setenv("TAPEGRAD_BLAS_KERNEL", "best", 1);
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const char* env = std::getenv("OPENBLAS_CORETYPE");
        const bool ok = s.origin == tg::blas::Origin::Tapegrad && s.kernel == "Cooperlake" &&
                        s.openblas_choice == "Haswell" && env && std::string(env) == "Haswell" &&
                        read_log() == "load Haswell\nload Cooperlake\n";
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// TAPEGRAD_BLAS_KERNEL=openblas keeps OpenBLAS's choice; a bad value is an error.
TEST_F(BlasLoader, ModeOpenblasAndBadMode) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("TAPEGRAD_BLAS_KERNEL", "openblas", 1);
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const bool ok = s.origin == tg::blas::Origin::OpenBlas && s.kernel == "Prescott" &&
                        read_log() == "load Prescott\n";
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
  EXPECT_EXIT(
      {
        start_child();
        setenv("TAPEGRAD_BLAS_KERNEL", "fastest", 1);
        try {
          tg::blas::load(fake());
        } catch (const tg::ValueError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3),
      "^TAPEGRAD_BLAS_KERNEL: expected auto, openblas or best, got 'fastest'\n$");
}

// The chosen kernels compute a wrong product: OpenBLAS is loaded a third time with its own
// choice, and one line says so.
TEST_F(BlasLoader, FallsBackWhenTheCheckFails) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("FAKE_OPENBLAS_BROKEN", "Cooperlake", 1);
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const bool ok = s.origin == tg::blas::Origin::Fallback && s.kernel == "Prescott" &&
                        read_log() == "load Prescott\nload Cooperlake\nload Prescott\n" &&
                        tg::blas::check_products(lib).empty();
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "^tapegrad: OpenBLAS's Cooperlake kernels failed tapegrad's check \\(sgemm NN 37x29x53: "
      "C\\[0\\]\\[0\\] = [-0-9.e]+, expected [-0-9.e]+\\); using Prescott, OpenBLAS's own "
      "choice\n$");
}

// OpenBLAS ignores the request (a name it does not know falls back to its own table).
TEST_F(BlasLoader, FallsBackWhenTheRequestIsIgnored) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("FAKE_OPENBLAS_IGNORE_CORETYPE", "1", 1);
        const tg::blas::Library lib = tg::blas::load(fake());
        const tg::blas::Status& s = lib.status();
        const bool ok = s.origin == tg::blas::Origin::Fallback && s.kernel == "Prescott" &&
                        read_log() == "load Prescott\nload Prescott\nload Prescott\n";
        std::exit(report(ok, s) ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      "^tapegrad: OpenBLAS's Cooperlake kernels were not loaded: OpenBLAS ran Prescott when "
      "asked for them; using Prescott, OpenBLAS's own choice\n$");
}

// OpenBLAS's own choice computes wrong products: an error, never a wrong answer.
TEST_F(BlasLoader, WrongProductsAreAnError) {
  EXPECT_EXIT(
      {
        start_child();
        setenv("FAKE_OPENBLAS_BROKEN", "Prescott", 1);
        try {
          tg::blas::load(fake("Westmere (no AVX)"));  // nothing better to ask for
        } catch (const tg::Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3),
      "^tapegrad: OpenBLAS \\(.*fake_openblas.*, kernel Prescott\\) computes wrong products "
      "on this machine: sgemm NN 37x29x53: C\\[0\\]\\[0\\] = .*, expected .*\n$");
}

// OpenBLAS already in the process (the program loaded it): used as it is, with one line
// naming the variable and the expected gain; found whether it was loaded globally or not.
TEST_F(BlasLoader, HostLoadedPrintsTheHint) {
  for (int mode : {RTLD_GLOBAL, RTLD_LOCAL}) {
    EXPECT_EXIT(
        {
          start_child();
          void* host = dlopen(TAPEGRAD_FAKE_OPENBLAS, RTLD_NOW | mode);
          if (!host) std::exit(2);
          const tg::blas::Library lib = tg::blas::load(fake());
          const tg::blas::Status& s = lib.status();
          const bool ok = s.origin == tg::blas::Origin::Host && s.kernel == "Prescott" &&
                          read_log() == "load Prescott\n" &&
                          s.detail == "loaded before tapegrad; OPENBLAS_CORETYPE=Cooperlake would "
                                      "be about 4.8x faster";
          std::exit(report(ok, s) ? 0 : 1);
        },
        testing::ExitedWithCode(0),
        "^tapegrad: OpenBLAS was loaded before tapegrad and runs its Prescott kernels \\(SSE3\\); "
        "this CPU runs Cooperlake \\(AVX-512\\): set OPENBLAS_CORETYPE=Cooperlake before the "
        "program starts for about 4.8x faster products\n$");
  }
  // Already the best class, or the user set the variable: silent.
  EXPECT_EXIT(
      {
        start_child();
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
        if (!dlopen(TAPEGRAD_FAKE_OPENBLAS, RTLD_NOW | RTLD_GLOBAL)) std::exit(2);
        const tg::blas::Status s = tg::blas::load(fake()).status();
        std::exit(report(s.origin == tg::blas::Origin::Host && s.kernel == "SkylakeX" &&
                             s.message.empty(), s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// A processor without AVX: OpenBLAS's own choice, loaded once.
TEST_F(BlasLoader, NoAvxKeepsOpenblasChoice) {
  EXPECT_EXIT(
      {
        start_child();
        const tg::blas::Status s = tg::blas::load(fake("Westmere (no AVX)")).status();
        std::exit(report(s.origin == tg::blas::Origin::OpenBlas && s.kernel == "Prescott" &&
                             s.best.empty() && read_log() == "load Prescott\n", s) ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// Errors name what was tried and what to do.
TEST_F(BlasLoader, LoadErrors) {
  EXPECT_EXIT(
      {
        start_child();
        tg::blas::LoadOptions o = fake();
        o.libraries.assign(1, "/nonexistent/libopenblas.so.0");
        o.libraries.push_back("libnot-a-blas.so.9");
        try {
          tg::blas::load(o);
        } catch (const tg::Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3),
      "^tapegrad: cannot load OpenBLAS \\(/nonexistent/libopenblas.so.0: .*; libnot-a-blas.so.9: "
      ".*\\): install Debian's libopenblas0, or set TAPEGRAD_OPENBLAS to its path\n$");
  EXPECT_EXIT(
      {
        start_child();
        setenv("FAKE_OPENBLAS_ILP64", "1", 1);
        try {
          tg::blas::load(fake());
        } catch (const tg::Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      testing::ExitedWithCode(3), "built with 64-bit integers");
}
#endif  // TAPEGRAD_FAKE_OPENBLAS

// ---- (e) the real OpenBLAS ---------------------------------------------------------------------

// Nothing links OpenBLAS: it is not in the process until the first product, then it is.
TEST(BlasRuntime, LoadedOnFirstUseNotLinked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const bool before = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD) != nullptr;
        const std::string kernel = tg::blas_kernel();
        const bool after = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD) != nullptr;
        std::fprintf(stderr, "%s", before ? "linked\n" : "");
        std::exit(!before && after && !kernel.empty() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

// The kernels that run pass the check, and the status says how they were chosen, in
// agreement with this process's environment.
TEST(BlasRuntime, StatusAgreesWithTheEnvironment) {
  const tg::blas::Library& lib = tg::blas::library();
  const tg::blas::Status& s = lib.status();
  EXPECT_EQ(tg::blas::check_products(lib), "");
  EXPECT_EQ(tg::blas_kernel(), s.kernel);
  EXPECT_FALSE(s.version.empty()) << s.config;
  const std::string status = tg::device_status();
  EXPECT_NE(status.find("; OpenBLAS " + s.version + ", kernel " + s.kernel + " ("), std::string::npos)
      << status;
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  const char* mode = std::getenv("TAPEGRAD_BLAS_KERNEL");
  std::cout << "[          ] " << tg::blas::summary(s) << "\n";
  if (mode && *mode) return;  // set by hand: any origin is possible
  if (env && *env) {
    EXPECT_EQ(s.origin, tg::blas::Origin::Environment) << s.detail;
  } else {
    EXPECT_TRUE(s.origin == tg::blas::Origin::OpenBlas || s.origin == tg::blas::Origin::Tapegrad ||
                s.origin == tg::blas::Origin::Fallback)
        << s.detail;
    if (s.origin == tg::blas::Origin::Tapegrad)
      EXPECT_TRUE(tg::blas::can_run(s.kernel, tg::cpu::read_cpu())) << s.kernel;
  }
}
