// A stand-in for OpenBLAS, loaded by tests/backend/test_blas_kernel.cpp through
// TAPEGRAD_OPENBLAS-style options to drive the loader (lib/src/backend/openblas.cpp) through
// every branch without depending on the CPU: which kernel "runs", whether OPENBLAS_CORETYPE
// is honoured, and which kernel computes wrong products are set by environment variables,
// read once when the library loads, as OpenBLAS reads OPENBLAS_CORETYPE:
//   FAKE_OPENBLAS_DEFAULT          its own choice (default "Prescott")
//   FAKE_OPENBLAS_IGNORE_CORETYPE  if set, OPENBLAS_CORETYPE is ignored
//   FAKE_OPENBLAS_BROKEN           the kernel whose sgemm adds 1 to C[0][0]
//   FAKE_OPENBLAS_ILP64            if set, the config says USE64BITINT
//   FAKE_OPENBLAS_LOG              a file that gets one line "load <kernel>" per load
// The products are plain loops. It has the kernel tables gotoblas_<NAME> of PRESCOTT,
// SANDYBRIDGE, HASWELL, ZEN, SKYLAKEX and COOPERLAKE (no SAPPHIRERAPIDS), like 0.3.21.
#include <cblas.h>
#include <strings.h>

#include <cstdio>
#include <cstdlib>

namespace {

const char* const kKnown[] = {"Prescott", "Sandybridge", "Haswell", "Zen", "SkylakeX",
                              "Cooperlake"};
// Plain arrays, not std::string: the constructor below may run before this file's other
// static constructors.
char g_core[32];
char g_config[128];
bool g_broken = false;
int g_threads = 1;

__attribute__((constructor)) void fake_load() {
  const char* def = std::getenv("FAKE_OPENBLAS_DEFAULT");
  std::snprintf(g_core, sizeof g_core, "%s", def && *def ? def : "Prescott");
  const char* want = std::getenv("OPENBLAS_CORETYPE");
  if (want && *want && !std::getenv("FAKE_OPENBLAS_IGNORE_CORETYPE"))
    for (const char* k : kKnown)
      if (!strcasecmp(k, want)) std::snprintf(g_core, sizeof g_core, "%s", k);
  const char* broken = std::getenv("FAKE_OPENBLAS_BROKEN");
  g_broken = broken && !strcasecmp(broken, g_core);
  std::snprintf(g_config, sizeof g_config, "OpenBLAS 0.0.1-fake %sDYNAMIC_ARCH %s",
                std::getenv("FAKE_OPENBLAS_ILP64") ? "USE64BITINT " : "", g_core);
  if (const char* log = std::getenv("FAKE_OPENBLAS_LOG")) {
    if (FILE* f = std::fopen(log, "a")) {
      std::fprintf(f, "load %s\n", g_core);
      std::fclose(f);
    }
  }
}

float at(const float* X, int ld, bool trans, int r, int c) {
  return trans ? X[static_cast<size_t>(c) * ld + r] : X[static_cast<size_t>(r) * ld + c];
}

}  // namespace

extern "C" {

// The kernel tables (their contents do not matter; the loader only looks for the symbols).
int gotoblas_PRESCOTT[4] = {64};
int gotoblas_SANDYBRIDGE[4] = {64};
int gotoblas_HASWELL[4] = {64};
int gotoblas_ZEN[4] = {64};
int gotoblas_SKYLAKEX[4] = {64};
int gotoblas_COOPERLAKE[4] = {64};

void cblas_sgemm(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE ta,
                 OPENBLAS_CONST enum CBLAS_TRANSPOSE tb, OPENBLAS_CONST blasint M,
                 OPENBLAS_CONST blasint N, OPENBLAS_CONST blasint K, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float* A, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float* B,
                 OPENBLAS_CONST blasint ldb, OPENBLAS_CONST float beta, float* C,
                 OPENBLAS_CONST blasint ldc) {
  if (order != CblasRowMajor) std::abort();
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k)
        s += static_cast<double>(at(A, lda, ta == CblasTrans, i, k)) *
             at(B, ldb, tb == CblasTrans, k, j);
      float& c = C[static_cast<size_t>(i) * ldc + j];
      c = static_cast<float>(alpha * s + (beta == 0 ? 0.0 : beta * c));
    }
  if (g_broken && M > 0 && N > 0) C[0] += 1.0f;
}

void cblas_sgemv(OPENBLAS_CONST enum CBLAS_ORDER order, OPENBLAS_CONST enum CBLAS_TRANSPOSE trans,
                 OPENBLAS_CONST blasint m, OPENBLAS_CONST blasint n, OPENBLAS_CONST float alpha,
                 OPENBLAS_CONST float* a, OPENBLAS_CONST blasint lda, OPENBLAS_CONST float* x,
                 OPENBLAS_CONST blasint incx, OPENBLAS_CONST float beta, float* y,
                 OPENBLAS_CONST blasint incy) {
  if (order != CblasRowMajor) std::abort();
  const bool t = trans == CblasTrans;
  const int n_out = t ? n : m, n_in = t ? m : n;
  for (int o = 0; o < n_out; ++o) {
    double s = 0;
    for (int k = 0; k < n_in; ++k)
      s += static_cast<double>(t ? a[static_cast<size_t>(k) * lda + o] : a[static_cast<size_t>(o) * lda + k]) *
           x[static_cast<size_t>(k) * incx];
    float& v = y[static_cast<size_t>(o) * incy];
    v = static_cast<float>(alpha * s + (beta == 0 ? 0.0 : beta * v));
  }
}

void openblas_set_num_threads(int n) { g_threads = n; }
int openblas_get_num_threads(void) { return g_threads; }
char* openblas_get_corename(void) { return g_core; }
char* openblas_get_config(void) { return g_config; }

}  // extern "C"
