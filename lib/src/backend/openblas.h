#pragma once
// Library-internal: OpenBLAS, loaded at run time so that tapegrad can choose its kernels.
//
// OpenBLAS reads OPENBLAS_CORETYPE once, while it loads, so tapegrad does not link it: on
// first use it dlopens libopenblas.so.0 (RTLD_LOCAL) and resolves the few entry points it
// calls. Then, in order:
//   1. OpenBLAS already in the process (the program linked or loaded it, e.g. through
//      PyTorch's libblas.so.3): tapegrad uses that copy, one library and one thread pool,
//      and if its kernels are of a slower class than this CPU runs, prints one line naming
//      OPENBLAS_CORETYPE and the expected gain (the only line a default run may print).
//   2. OPENBLAS_CORETYPE set (any value): the user's choice stands.
//   3. Otherwise tapegrad reads OpenBLAS's own choice (openblas_get_corename) and the kernel
//      sets the build has (its gotoblas_<NAME> tables), and asks choose_kernel
//      (blas_kernel.h). If that names a faster set, OpenBLAS is unloaded and loaded again
//      with OPENBLAS_CORETYPE set for the moment of the load (then restored), and the
//      new kernels must report the name asked for and pass check_products(); if not, the
//      library is loaded a third time with OpenBLAS's own choice, and one line says so.
// TAPEGRAD_BLAS_KERNEL changes step 2 and 3: "auto" (default) as above, "openblas" never
// replaces OpenBLAS's choice, "best" replaces it even when OPENBLAS_CORETYPE is set (for
// environments that set it for every program). Every mode ends with check_products() on the
// kernels that will run; a failure there is a tg::Error, never a wrong product.
// TAPEGRAD_OPENBLAS names the library file to load instead of libopenblas.so.0.
#include <string>
#include <vector>

#include "backend/cpu_features.h"

namespace tg {
namespace blas {

/// How the running kernels were decided.
enum class Origin {
  OpenBlas,     ///< OpenBLAS's own choice, kept (it is of the best class, or mode "openblas")
  Tapegrad,     ///< tapegrad's choice (OpenBLAS's own was of a slower class)
  Environment,  ///< OPENBLAS_CORETYPE was set
  Host,         ///< OpenBLAS was in the process before tapegrad: its choice, as it was
  Fallback,     ///< tapegrad's choice failed its check; OpenBLAS's own choice runs
};

struct Status {
  std::string library;          ///< the file ("/usr/lib/.../libopenblas.so.0")
  std::string version;          ///< "0.3.21"
  std::string config;           ///< openblas_get_config()
  std::string kernel;           ///< the kernel set that runs products ("Cooperlake")
  std::string openblas_choice;  ///< OpenBLAS's own choice, before tapegrad stepped in
  std::string best;             ///< the best set of this build this CPU runs ("" if none)
  Origin origin = Origin::OpenBlas;
  std::string detail;           ///< how `kernel` was decided, in a few words
  std::string message;          ///< the line printed to stderr, if any ("" when silent)
};

/// "OpenBLAS 0.3.21, kernel Cooperlake (tapegrad's choice; OpenBLAS chose Haswell)".
std::string summary(const Status& status);

/// The library: its handle and entry points (resolved with dlsym), and how it was loaded.
class Library {
 public:
  const Status& status() const { return status_; }
  /// C = alpha op(A) op(B) + beta C, row-major (cblas_sgemm).
  void sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
             int lda, const float* B, int ldb, float beta, float* C, int ldc) const;
  /// y = alpha op(A) x + beta y with A (rows, cols) row-major (cblas_sgemv).
  void sgemv(bool trans, int rows, int cols, float alpha, const float* A, int lda,
             const float* x, int incx, float beta, float* y, int incy) const;
  void set_num_threads(int n) const;
  int get_num_threads() const;

 private:
  friend struct Loader;
  Status status_;
  void* handle_ = nullptr;
  void* sgemm_ = nullptr;
  void* sgemv_ = nullptr;
  void* set_threads_ = nullptr;
  void* get_threads_ = nullptr;
  void* corename_ = nullptr;
  void* config_ = nullptr;
};

/// This process's OpenBLAS, loaded (with the kernel choice) on the first call. Throws
/// tg::Error, naming what was tried, if it cannot be loaded; the next call tries again.
const Library& library();

// ---- the load itself, for tests (run them in a child process: they dlopen and setenv) ----

struct LoadOptions {
  std::vector<std::string> libraries;  ///< tried in order until one loads
  cpu::CpuInfo cpu;                    ///< the processor the choice is made for
  bool print = true;                   ///< print the hint / fallback line to stderr
  /// This process's: TAPEGRAD_OPENBLAS, else libopenblas.so.0 and the path found at build
  /// time; read_cpu().
  static LoadOptions defaults();
};

/// Finds or loads OpenBLAS and applies the kernel choice (the steps above). The library is
/// never unloaded.
Library load(const LoadOptions& options);

/// Products through `lib` against a plain double-precision loop: every transpose, odd
/// sizes that reach the edge kernels, both sgemv forms. "" if all agree, else the first
/// disagreement ("sgemm NT 37x29x53: C[4][17] = 1.25, expected 3.5").
std::string check_products(const Library& lib);

}  // namespace blas
}  // namespace tg
