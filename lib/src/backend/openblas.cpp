// OpenBLAS at run time (openblas.h): finding, loading and reloading it with the kernel
// choice of blas_kernel.h. <cblas.h> is included only for the entry points' exact types;
// nothing here links OpenBLAS.
#include "backend/openblas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <link.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/blas_kernel.h"
#include "tapegrad/error.h"

#ifndef TAPEGRAD_OPENBLAS_BUILD_PATH
#define TAPEGRAD_OPENBLAS_BUILD_PATH ""
#endif

namespace tg {
namespace blas {

namespace {

using sgemm_fn = decltype(&cblas_sgemm);
using sgemv_fn = decltype(&cblas_sgemv);
using set_threads_fn = decltype(&openblas_set_num_threads);
using get_threads_fn = decltype(&openblas_get_num_threads);
using corename_fn = decltype(&openblas_get_corename);
using config_fn = decltype(&openblas_get_config);

constexpr const char* kCoreVar = "OPENBLAS_CORETYPE";
constexpr const char* kSoname = "libopenblas.so.0";

enum class Mode { Auto, OpenBlas, Best };

Mode mode_from_env() {
  const char* env = std::getenv("TAPEGRAD_BLAS_KERNEL");
  const std::string v = env ? env : "";
  if (v.empty() || v == "auto") return Mode::Auto;
  if (v == "openblas") return Mode::OpenBlas;
  if (v == "best") return Mode::Best;
  throw ValueError("TAPEGRAD_BLAS_KERNEL: expected auto, openblas or best, got '" + v + "'");
}

std::string upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool same_name(const std::string& a, const std::string& b) { return upper(a) == upper(b); }

std::string dl_error(const std::string& fallback) {
  const char* e = dlerror();
  return e ? e : fallback;
}

/// OPENBLAS_CORETYPE as it is now; "" and unset are the same to OpenBLAS's users.
std::string core_env() {
  const char* e = std::getenv(kCoreVar);
  return e ? e : "";
}

/// Sets OPENBLAS_CORETYPE for the lifetime of this object, then puts back what was there.
class CoreEnv {
 public:
  explicit CoreEnv(const std::string& value) {
    const char* e = std::getenv(kCoreVar);
    had_ = e != nullptr;
    if (had_) old_ = e;
    setenv(kCoreVar, value.c_str(), 1);
  }
  ~CoreEnv() {
    if (had_)
      setenv(kCoreVar, old_.c_str(), 1);
    else
      unsetenv(kCoreVar);
  }
  CoreEnv(const CoreEnv&) = delete;
  CoreEnv& operator=(const CoreEnv&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

int collect_name(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name && *info->dlpi_name)
    static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
  return 0;
}

/// An OpenBLAS already in this process (any file name: Debian's libblas.so.3 is OpenBLAS
/// too): a handle that keeps it, and its path. {nullptr, ""} if there is none.
std::pair<void*, std::string> find_loaded() {
  std::vector<std::string> names;
  dl_iterate_phdr(collect_name, &names);
  for (const std::string& name : names) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!h) continue;
    void* sym = dlsym(h, "openblas_get_corename");
    Dl_info where{};
    // dlsym also searches the object's dependencies: take the object that defines it.
    if (sym && dladdr(sym, &where) && where.dli_fname && name == where.dli_fname)
      return {h, name};
    dlclose(h);
  }
  if (dlsym(RTLD_DEFAULT, "openblas_get_corename"))  // linked statically into the program
    return {dlopen(nullptr, RTLD_NOW), "the program itself"};
  return {nullptr, ""};
}

/// The kernel sets this build has: a DYNAMIC_ARCH build exports a gotoblas_<NAME> table for
/// each set it compiled (one it left out is an alias of another, with no symbol).
std::vector<std::string> known_kernels(void* handle) {
  std::vector<std::string> known;
  for (const std::string& name : ranked_kernels())
    if (dlsym(handle, ("gotoblas_" + upper(name)).c_str())) known.push_back(name);
  return known;
}

/// Deterministic operands in [-1, 1].
void fill(std::vector<float>& v, uint32_t seed) {
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
}

bool close_enough(double got, double want, double magnitude, int64_t terms) {
  return std::fabs(got - want) <= 1e-5 * static_cast<double>(terms + 4) * magnitude + 1e-6;
}

std::string mismatch(const char* what, int i, int j, double got, double want) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: C[%d][%d] = %.7g, expected %.7g", what, i, j, got, want);
  return buf;
}

std::string check_gemm(const Library& lib, bool ta, bool tb, int M, int N, int K, float alpha,
                       float beta, uint32_t seed) {
  const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  std::vector<float> A(static_cast<size_t>(ta ? K : M) * lda);
  std::vector<float> B(static_cast<size_t>(tb ? N : K) * ldb);
  std::vector<float> C(static_cast<size_t>(M) * ldc);
  fill(A, seed);
  fill(B, seed + 1);
  fill(C, seed + 2);
  const std::vector<float> C0 = C;
  lib.sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  char what[64];
  std::snprintf(what, sizeof what, "sgemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double a = ta ? A[static_cast<size_t>(k) * lda + i] : A[static_cast<size_t>(i) * lda + k];
        const double b = tb ? B[static_cast<size_t>(j) * ldb + k] : B[static_cast<size_t>(k) * ldb + j];
        sum += a * b;
        mag += std::fabs(a * b);
      }
      const double c0 = C0[static_cast<size_t>(i) * ldc + j];
      const double want = alpha * sum + beta * c0;
      const double got = C[static_cast<size_t>(i) * ldc + j];
      if (!close_enough(got, want, std::fabs(alpha) * mag + std::fabs(beta * c0), K))
        return mismatch(what, i, j, got, want);
    }
  return "";
}

std::string check_gemv(const Library& lib, bool trans, int rows, int cols, int incx,
                       uint32_t seed) {
  const int lda = cols + 5;
  const int n_in = trans ? rows : cols, n_out = trans ? cols : rows;
  std::vector<float> A(static_cast<size_t>(rows) * lda), x(static_cast<size_t>(n_in) * incx),
      y(static_cast<size_t>(n_out));
  fill(A, seed);
  fill(x, seed + 1);
  fill(y, seed + 2);
  const std::vector<float> y0 = y;
  const float alpha = 0.75f, beta = -0.5f;
  lib.sgemv(trans, rows, cols, alpha, A.data(), lda, x.data(), incx, beta, y.data(), 1);
  char what[64];
  std::snprintf(what, sizeof what, "sgemv %c %dx%d incx %d", trans ? 'T' : 'N', rows, cols, incx);
  for (int o = 0; o < n_out; ++o) {
    double sum = 0, mag = 0;
    for (int k = 0; k < n_in; ++k) {
      const double a = trans ? A[static_cast<size_t>(k) * lda + o] : A[static_cast<size_t>(o) * lda + k];
      const double v = x[static_cast<size_t>(k) * incx];
      sum += a * v;
      mag += std::fabs(a * v);
    }
    const double want = alpha * sum + beta * y0[o];
    if (!close_enough(y[o], want, std::fabs(alpha) * mag + std::fabs(beta * y0[o]), n_in))
      return mismatch(what, o, 0, y[o], want);
  }
  return "";
}

std::string gain_text(double gain) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", gain);
  return buf;
}

}  // namespace

// ---- Library ----------------------------------------------------------------------------

void Library::sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                    const float* A, int lda, const float* B, int ldb, float beta, float* C,
                    int ldc) const {
  reinterpret_cast<sgemm_fn>(sgemm_)(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                                     trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                                     lda, B, ldb, beta, C, ldc);
}

void Library::sgemv(bool trans, int rows, int cols, float alpha, const float* A, int lda,
                    const float* x, int incx, float beta, float* y, int incy) const {
  reinterpret_cast<sgemv_fn>(sgemv_)(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, rows,
                                     cols, alpha, A, lda, x, incx, beta, y, incy);
}

void Library::set_num_threads(int n) const { reinterpret_cast<set_threads_fn>(set_threads_)(n); }

int Library::get_num_threads() const { return reinterpret_cast<get_threads_fn>(get_threads_)(); }

// ---- loading ------------------------------------------------------------------------------

struct Loader {
  /// Resolves the entry points of `handle` into `lib` and reads its name, version, kernel.
  static void resolve(Library& lib, void* handle, const std::string& path) {
    auto need = [&](const char* sym) {
      void* p = dlsym(handle, sym);
      if (!p)
        throw Error("tapegrad: " + path + " is not OpenBLAS: it lacks " + sym +
                    " (set TAPEGRAD_OPENBLAS to an OpenBLAS library, or unset it)");
      return p;
    };
    lib.handle_ = handle;
    lib.sgemm_ = need("cblas_sgemm");
    lib.sgemv_ = need("cblas_sgemv");
    lib.set_threads_ = need("openblas_set_num_threads");
    lib.get_threads_ = need("openblas_get_num_threads");
    lib.corename_ = need("openblas_get_corename");
    lib.config_ = need("openblas_get_config");
    Status& st = lib.status_;
    st.library = path;
    const char* core = reinterpret_cast<corename_fn>(lib.corename_)();
    const char* config = reinterpret_cast<config_fn>(lib.config_)();
    st.kernel = core ? core : "unknown";
    st.config = config ? config : "";
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
    const size_t sp = st.config.find(' ');
    st.version = sp == std::string::npos ? "" : st.config.substr(sp + 1, st.config.find(' ', sp + 1) - sp - 1);
    if (st.config.find("USE64BITINT") != std::string::npos)
      throw Error("tapegrad: " + path + " is OpenBLAS built with 64-bit integers (" + st.config +
                  "); tapegrad passes 32-bit ones: use the LP64 build (Debian's libopenblas0)");
  }

  /// dlopen the first of `libraries` that loads.
  static std::pair<void*, std::string> open_first(const std::vector<std::string>& libraries) {
    std::string tried;
    for (const std::string& path : libraries) {
      if (path.empty()) continue;
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) return {h, path};
      tried += (tried.empty() ? "" : "; ") + dl_error(path + ": cannot load");
    }
    throw Error("tapegrad: cannot load OpenBLAS (" + (tried.empty() ? "no library named" : tried) +
                "): install Debian's libopenblas0, or set TAPEGRAD_OPENBLAS to its path");
  }

  /// Unloads `lib` and loads `path` again with OPENBLAS_CORETYPE=core. On success returns
  /// "" and `out` holds the new library; else why not (and nothing is loaded).
  static std::string reload_with(Library& lib, const std::string& path, const std::string& core,
                                 Library& out) {
    dlclose(lib.handle_);
    lib.handle_ = nullptr;
    if (void* still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {  // someone else holds it
      Library again;
      resolve(again, still, path);
      out = again;
      return "could not be loaded: OpenBLAS stayed in the process when tapegrad unloaded it";
    }
    void* h = nullptr;
    {
      CoreEnv env(core);
      h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) return "could not be loaded (" + dl_error(path) + ")";
    Library chosen;
    resolve(chosen, h, path);
    std::string why;
    if (!same_name(chosen.status_.kernel, core))
      why = "were not loaded: OpenBLAS ran " + chosen.status_.kernel + " when asked for them";
    else {
      const std::string bad = check_products(chosen);
      if (!bad.empty()) why = "failed tapegrad's check (" + bad + ")";
    }
    if (!why.empty()) {
      dlclose(h);
      return why;
    }
    out = chosen;
    return "";
  }

  static Library load(const LoadOptions& o) {
    const Mode mode = mode_from_env();
    const std::string env = core_env();
    Library lib;
    Status& st = lib.status_;

    auto [found, found_path] = find_loaded();
    if (found) {  // 1. the program brought its own OpenBLAS: use it as it is
      resolve(lib, found, found_path);
      const std::vector<std::string> known = known_kernels(found);
      st.openblas_choice = st.kernel;
      st.best = best_kernel(o.cpu, known);
      st.origin = Origin::Host;
      const Choice c = choose_kernel(o.cpu, st.kernel, known);
      st.detail = "loaded before tapegrad" + (env.empty() ? "" : " with " + std::string(kCoreVar) + "=" + env);
      if (!c.core.empty() && (env.empty() || mode == Mode::Best)) {
        const std::string gain =
            gain_text(expected_gain(kernel_level(st.kernel), kernel_level(c.core)));
        st.detail += "; " + std::string(kCoreVar) + "=" + c.core + " would be about " + gain + " faster";
        st.message = "tapegrad: OpenBLAS was loaded before tapegrad and runs its " + st.kernel +
                     " kernels (" + level_name(kernel_level(st.kernel)) + "); this CPU runs " +
                     c.core + " (" + level_name(kernel_level(c.core)) + "): set " + kCoreVar +
                     "=" + c.core + " before the program starts for about " + gain +
                     " faster products";
      }
    } else {
      auto [h, path] = open_first(o.libraries);
      resolve(lib, h, path);
      const std::vector<std::string> known = known_kernels(h);
      st.openblas_choice = st.kernel;
      st.best = best_kernel(o.cpu, known);
      const Choice c = choose_kernel(o.cpu, st.kernel, known);
      const std::string env_note = env.empty() ? "" : " with " + std::string(kCoreVar) + "=" + env;
      if (mode == Mode::OpenBlas) {
        st.origin = Origin::OpenBlas;
        st.detail = "OpenBLAS's choice" + env_note + " (TAPEGRAD_BLAS_KERNEL=openblas)";
      } else if (!env.empty() && mode == Mode::Auto) {  // 2. the user's choice stands
        st.origin = Origin::Environment;
        st.detail = std::string(kCoreVar) + "=" + env;
        if (!c.core.empty())
          st.detail += "; this CPU runs " + c.core + " (TAPEGRAD_BLAS_KERNEL=best to use it)";
      } else if (c.core.empty()) {  // 3. OpenBLAS's choice is as good as any
        st.origin = env.empty() ? Origin::OpenBlas : Origin::Environment;
        st.detail = env.empty() ? "OpenBLAS's choice, the best class this CPU runs"
                                : std::string(kCoreVar) + "=" + env + ", the best class this CPU runs";
      } else {  // 3. a faster set: load OpenBLAS again with it
        Library chosen;
        const std::string own = st.kernel;
        const std::string why = reload_with(lib, path, c.core, chosen);
        if (why.empty()) {
          lib = chosen;
          st.openblas_choice = own;
          st.best = c.core;
          st.origin = Origin::Tapegrad;
          st.detail = "tapegrad's choice; OpenBLAS chose " + own + env_note;
        } else {
          if (!chosen.handle_) {  // load OpenBLAS's own choice again
            void* again = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!again) throw Error("tapegrad: cannot load OpenBLAS again (" + dl_error(path) + ")");
            resolve(chosen, again, path);
          }
          lib = chosen;
          st.openblas_choice = own;
          st.best = c.core;
          st.origin = Origin::Fallback;
          st.detail = "OpenBLAS's choice" + env_note + "; its " + c.core + " kernels " + why;
          st.message = "tapegrad: OpenBLAS's " + c.core + " kernels " + why + "; using " +
                       lib.status_.kernel + ", OpenBLAS's own choice";
        }
      }
    }
    const std::string bad = check_products(lib);
    if (!bad.empty())
      throw Error("tapegrad: OpenBLAS (" + st.library + ", kernel " + st.kernel +
                  ") computes wrong products on this machine: " + bad);
    if (o.print && !st.message.empty()) std::fprintf(stderr, "%s\n", st.message.c_str());
    return lib;
  }
};

LoadOptions LoadOptions::defaults() {
  LoadOptions o;
  const char* env = std::getenv("TAPEGRAD_OPENBLAS");
  if (env && *env) {
    o.libraries = {env};
  } else {
    o.libraries = {kSoname};
    const std::string built = TAPEGRAD_OPENBLAS_BUILD_PATH;
    if (!built.empty() && built != kSoname) o.libraries.push_back(built);
  }
  o.cpu = cpu::read_cpu();
  return o;
}

Library load(const LoadOptions& options) { return Loader::load(options); }

const Library& library() {
  static const Library lib = load(LoadOptions::defaults());
  return lib;
}

std::string summary(const Status& s) {
  return "OpenBLAS " + (s.version.empty() ? std::string("?") : s.version) + ", kernel " + s.kernel +
         " (" + s.detail + ")";
}

std::string check_products(const Library& lib) {
  struct G {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
  };
  // 37x29x53: edges in every dimension (and OpenBLAS's small-matrix path); 96x80x160: the
  // blocked path with full register tiles.
  const G cases[] = {{false, false, 37, 29, 53, 1.0f, 0.0f},  {false, true, 37, 29, 53, 1.5f, 0.5f},
                     {true, false, 37, 29, 53, -0.75f, 1.0f}, {true, true, 37, 29, 53, 1.0f, -0.25f},
                     {false, false, 96, 80, 160, 1.0f, 0.0f}};
  uint32_t seed = 7;
  for (const G& g : cases) {
    const std::string bad = check_gemm(lib, g.ta, g.tb, g.M, g.N, g.K, g.alpha, g.beta, seed += 3);
    if (!bad.empty()) return bad;
  }
  for (int incx : {1, 3})
    for (bool trans : {false, true}) {
      const std::string bad = check_gemv(lib, trans, 41, 33, incx, seed += 3);
      if (!bad.empty()) return bad;
    }
  return "";
}

}  // namespace blas
}  // namespace tg
