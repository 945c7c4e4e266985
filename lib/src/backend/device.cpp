// Dispatch for the GEMM interface, and the device API (tapegrad/device.h).
//
// OpenBLAS always works. cuBLAS lives in an optional plugin, libtapegrad_cuda.so
// (lib/cuda), which is dlopened on first use, so the core links only libdl. The plugin is
// looked for, in order, wherever tapegrad was installed (or built):
//   1. $TAPEGRAD_CUDA_PLUGIN (a file path; if set, nothing else is tried);
//   2. next to libtapegrad.so (dladdr), for a shared build; for a static one, in the
//      library folder beside the executable's folder: <exe dir>/../lib (the install
//      layout's libdir, TAPEGRAD_PLUGIN_LIBDIR; in a build tree, build/lib);
//   3. the dynamic loader's search path (LD_LIBRARY_PATH, ld.so.cache).
// If the plugin, the driver or a device is missing, the products run on OpenBLAS. Only an
// explicit request for CUDA (set_device(Device::CUDA), TAPEGRAD_DEVICE=cuda) says so on
// stderr, in one line; Auto is silent. TAPEGRAD_VERBOSE=1 prints the choice (device_status())
// on the first product. A loaded plugin is never unloaded (the CUDA runtime dislikes it).
//
// Auto sends a product to the GPU when 2·M·N·K·batch >= TAPEGRAD_CUDA_MIN_FLOPS (default
// kDefaultMinFlops); CUDA sends every product. A product that fails on the GPU before its
// result was written is redone on the CPU, and the GPU is not used again (one log line).
#include <dlfcn.h>
#include <sys/stat.h>

#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "plugin_abi.h"  // lib/cuda: the ABI the plugin implements
#include "backend/gemm.h"
#include "backend/openblas.h"
#include "backend/vec.h"
#include "tapegrad/device.h"
#include "tapegrad/error.h"

#ifndef TAPEGRAD_PLUGIN_LIBDIR
#define TAPEGRAD_PLUGIN_LIBDIR "lib"
#endif

namespace tg {
namespace {

/// 2^26 flops (a square product of about 320). A guess made without a GPU: the transfer of
/// A, B and C over PCIe must be paid for by the GPU's speed. Measure it with
/// bench/gpu_check.sh, which prints the crossover.
constexpr double kDefaultMinFlops = 67108864.0;
constexpr const char* kPluginName = "libtapegrad_cuda.so";

/// The cache of device copies (plugin_abi.h): 1 GiB unless TAPEGRAD_CUDA_CACHE_MB says.
constexpr double kDefaultCacheMiB = 1024.0;

struct Plugin {
  bool loaded = false;  // dlopen and dlsym succeeded
  bool ready = false;   // init succeeded
  std::string info;     // the device on success, the reason on failure
  tg_cuda_sgemm_fn sgemm = nullptr;
  tg_cuda_sgemm_strided_batched_fn sgemm_batched = nullptr;
  tg_cuda_forget_fn forget = nullptr;
  tg_cuda_set_cache_budget_fn set_cache_budget = nullptr;
  tg_cuda_cache_stats_fn cache_stats = nullptr;
};

std::mutex g_mu;             // guards everything below except the atomics
std::once_flag g_once;       // the first use: read TAPEGRAD_DEVICE unless set_device came first
bool g_explicit = false;     // set_device was called
bool g_probed = false;       // a probe has run (successfully or not)
Plugin g_plugin;
std::atomic<bool> g_on_cuda{false};     // products may go to the GPU
std::atomic<double> g_min_flops{kDefaultMinFlops};  // 0 in Device::CUDA mode
std::atomic<bool> g_cache_on{false};    // products may go to the GPU and its cache has room
std::atomic<int64_t> g_cache_budget{-1};  // bytes; -1: not set yet (the environment decides)

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

/// Where to look for the plugin before the loader's path: libtapegrad.so's folder, or, when
/// tapegrad is linked into the executable, <exe dir>/../<libdir> (and <exe dir>/../lib, the
/// build tree's layout, where the libdir is longer).
std::vector<std::string> plugin_directories() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&tg::set_device), &info) || !info.dli_fname) return {};
  const std::string code = real_path(info.dli_fname), exe = real_path("/proc/self/exe");
  if (code != exe) return {directory_of(code)};  // the shared library
  const std::string prefix = directory_of(directory_of(exe)), libdir = TAPEGRAD_PLUGIN_LIBDIR;
  std::vector<std::string> dirs = {libdir.rfind('/', 0) == 0 ? libdir : prefix + "/" + libdir};
  if (dirs[0] != prefix + "/lib") dirs.push_back(prefix + "/lib");
  return dirs;
}

bool verbose() {
  const char* v = std::getenv("TAPEGRAD_VERBOSE");
  return v && *v && std::string(v) != "0";
}

/// dlopen `path`; on failure, a reason. The handle is kept forever on success.
void* open_plugin(const std::string& path, std::string& reason) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    reason = err ? err : ("cannot load " + path);
  }
  return h;
}

/// TAPEGRAD_CUDA_CACHE_MB, in MiB (0 turns the cache off).
int64_t cache_budget_from_env() {
  const char* env = std::getenv("TAPEGRAD_CUDA_CACHE_MB");
  double mib = kDefaultCacheMiB;
  if (env && *env) {
    char* end = nullptr;
    mib = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(mib >= 0) || mib > 1e9)
      throw ValueError(std::string("TAPEGRAD_CUDA_CACHE_MB: expected a size in MiB >= 0, got '") +
                       env + "'");
  }
  return static_cast<int64_t>(mib * 1024.0 * 1024.0);
}

/// Hands the budget to a ready plugin (under g_mu).
void apply_cache_budget_locked() {
  if (g_cache_budget.load() < 0) g_cache_budget = cache_budget_from_env();
  g_plugin.set_cache_budget(static_cast<uint64_t>(g_cache_budget.load()));
  g_cache_on = g_on_cuda.load() && g_cache_budget.load() > 0;
}

/// Load and initialise the plugin (under g_mu). Sets g_plugin.
void probe_locked() {
  g_probed = true;
  if (g_plugin.ready) return;
  g_plugin = Plugin{};
  std::string reason;
  void* h = nullptr;
  const char* env = std::getenv("TAPEGRAD_CUDA_PLUGIN");
  if (env && *env) {
    if (!file_exists(env))
      reason = std::string("TAPEGRAD_CUDA_PLUGIN=") + env + ": no such file";
    else
      h = open_plugin(env, reason);
  } else {
    std::string tried;
    for (const std::string& dir : plugin_directories()) {
      tried += (tried.empty() ? "" : ", ") + dir;
      if (file_exists(dir + "/" + kPluginName)) {
        h = open_plugin(dir + "/" + kPluginName, reason);
        break;
      }
    }
    if (!h && reason.empty()) {  // not found in those directories: ask the loader
      h = dlopen(kPluginName, RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* err = dlerror();
        reason = std::string(kPluginName) + " not found in " + tried +
                 " or the library path (" + (err ? err : "dlopen failed") + ")";
      }
    }
  }
  if (!h) {
    g_plugin.info = reason;
    return;
  }
  auto abi = reinterpret_cast<tg_cuda_abi_version_fn>(dlsym(h, "tg_cuda_abi_version"));
  auto init = reinterpret_cast<tg_cuda_init_fn>(dlsym(h, "tg_cuda_init"));
  g_plugin.sgemm = reinterpret_cast<tg_cuda_sgemm_fn>(dlsym(h, "tg_cuda_sgemm"));
  g_plugin.sgemm_batched = reinterpret_cast<tg_cuda_sgemm_strided_batched_fn>(
      dlsym(h, "tg_cuda_sgemm_strided_batched"));
  g_plugin.forget = reinterpret_cast<tg_cuda_forget_fn>(dlsym(h, "tg_cuda_forget"));
  g_plugin.set_cache_budget =
      reinterpret_cast<tg_cuda_set_cache_budget_fn>(dlsym(h, "tg_cuda_set_cache_budget"));
  g_plugin.cache_stats = reinterpret_cast<tg_cuda_cache_stats_fn>(dlsym(h, "tg_cuda_get_cache_stats"));
  if (abi && abi() != TG_CUDA_ABI_VERSION) {  // before the symbols: an old plugin lacks some
    g_plugin.info = "plugin ABI version " + std::to_string(abi()) + ", expected " +
                    std::to_string(TG_CUDA_ABI_VERSION);
    return;
  }
  if (!abi || !init || !g_plugin.sgemm || !g_plugin.sgemm_batched || !g_plugin.forget ||
      !g_plugin.set_cache_budget || !g_plugin.cache_stats) {
    g_plugin.info = "the plugin lacks the tg_cuda_* entry points";
    return;
  }
  if (abi() != TG_CUDA_ABI_VERSION) {
    g_plugin.info = "plugin ABI version " + std::to_string(abi()) + ", expected " +
                    std::to_string(TG_CUDA_ABI_VERSION);
    return;
  }
  g_plugin.loaded = true;
  char msg[256] = {0};
  g_plugin.ready = init(msg, sizeof msg) == 0;
  g_plugin.info = msg;
  if (g_plugin.ready) apply_cache_budget_locked();
}

double min_flops_from_env() {
  const char* env = std::getenv("TAPEGRAD_CUDA_MIN_FLOPS");
  if (!env || !*env) return kDefaultMinFlops;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0))
    throw ValueError(std::string("TAPEGRAD_CUDA_MIN_FLOPS: expected a number >= 0, got '") +
                     env + "'");
  return v;
}

/// Apply a requested device (under g_mu): probe when CUDA is wanted; a fallback is logged
/// when CUDA was asked for by name (or TAPEGRAD_VERBOSE is set), never for Auto.
void resolve_locked(Device d) {
  if (d == Device::CPU) {
    g_on_cuda = false;
    g_cache_on = false;
    return;
  }
  const double min_flops = d == Device::CUDA ? 0.0 : min_flops_from_env();
  if (!g_plugin.ready) probe_locked();
  if (g_plugin.ready) {
    g_min_flops = min_flops;
    g_on_cuda = true;
    g_cache_on = g_cache_budget.load() > 0;
  } else {
    g_on_cuda = false;
    g_cache_on = false;
    if (d == Device::CUDA || verbose())
      std::fprintf(stderr, "tapegrad: CUDA unavailable (%s); using OpenBLAS\n",
                   g_plugin.info.c_str());
  }
}

Device device_from_env() {
  const char* env = std::getenv("TAPEGRAD_DEVICE");
  const std::string v = env ? env : "";
  if (v.empty() || v == "auto") return Device::Auto;
  if (v == "cpu") return Device::CPU;
  if (v == "cuda") return Device::CUDA;
  throw ValueError("TAPEGRAD_DEVICE: expected cpu, cuda or auto, got '" + v + "'");
}

std::string status_line();

void ensure_init() {
  std::call_once(g_once, [] {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_explicit) resolve_locked(device_from_env());
    }
    if (verbose()) std::fprintf(stderr, "tapegrad: %s\n", status_line().c_str());
  });
}

/// A GPU failure: log once, stop using the GPU. Throws if C was already clobbered.
void gpu_failed(int code, const char* msg) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_cache_on = false;
    if (g_on_cuda.exchange(false))
      std::fprintf(stderr, "tapegrad: CUDA gemm failed (%s); using OpenBLAS\n", msg);
  }
  if (code == TG_CUDA_E_CLOBBERED)
    throw Error(std::string("gemm: CUDA failed while writing the result back: ") + msg);
}

bool use_gpu(int64_t M, int64_t N, int64_t K, int64_t batch) {
  if (M == 0 || N == 0 || K == 0 || batch == 0) return false;
  ensure_init();
  if (!g_on_cuda.load(std::memory_order_acquire)) return false;
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) *
             static_cast<double>(batch) >=
         g_min_flops.load(std::memory_order_relaxed);
}

}  // namespace

// ---- the device API ----------------------------------------------------------------

void set_device(Device device) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_explicit = true;
    resolve_locked(device);
  }
  ensure_init();  // marks the first use as done; TAPEGRAD_DEVICE is ignored from now on
}

Device current_device() {
  ensure_init();
  return g_on_cuda ? Device::CUDA : Device::CPU;
}

bool cuda_available() {
  ensure_init();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_probed) probe_locked();
  return g_plugin.ready;
}

std::string device_status() {
  ensure_init();
  return status_line();
}

namespace {
std::string status_line() {
  const std::string cpu = "; " + blas::summary(blas::library().status()) + "; " +
                          vec::describe_choice();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_on_cuda) return "cuda: " + g_plugin.info + cpu;
  if (g_probed && !g_plugin.ready) return "cpu (CUDA unavailable: " + g_plugin.info + ")" + cpu;
  return "cpu" + cpu;
}
}  // namespace

std::string blas_kernel() { return blas::library().status().kernel; }

DeviceCacheStats device_cache_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceCacheStats out;
  out.budget = g_cache_budget.load() < 0 ? cache_budget_from_env() : g_cache_budget.load();
  if (!g_plugin.ready) return out;
  tg_cuda_cache_stats s{};
  g_plugin.cache_stats(&s);
  out.hits = static_cast<int64_t>(s.hits);
  out.misses = static_cast<int64_t>(s.misses);
  out.evictions = static_cast<int64_t>(s.evictions);
  out.entries = static_cast<int64_t>(s.entries);
  out.bytes = static_cast<int64_t>(s.bytes);
  out.budget = static_cast<int64_t>(s.budget);
  out.uploaded_bytes = static_cast<int64_t>(s.uploaded_bytes);
  return out;
}

void set_device_cache_budget(int64_t bytes) {
  if (bytes < 0)
    throw ValueError("set_device_cache_budget: expected bytes >= 0, got " + std::to_string(bytes));
  std::lock_guard<std::mutex> lock(g_mu);
  g_cache_budget = bytes;
  if (g_plugin.ready) apply_cache_budget_locked();
}

namespace detail {
void forget_device_copies(uint64_t id) {
  // A storage that was named to the cache died. The plugin is never unloaded, so reading
  // g_plugin without the lock is safe once it was ready; its own lock guards the cache.
  if (g_plugin.ready && g_plugin.forget) g_plugin.forget(id);
}
}  // namespace detail

void set_num_threads(int n) {
  if (n < 1) throw ValueError("set_num_threads: expected n >= 1, got " + std::to_string(n));
  gemm::cpu_set_num_threads(n);
}

int get_num_threads() { return gemm::cpu_get_num_threads(); }

// ---- the GEMM interface --------------------------------------------------------------

namespace gemm {

bool device_cache_active() { return g_cache_on.load(std::memory_order_relaxed); }

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc, OperandId id_a, OperandId id_b) {
  if (use_gpu(M, N, K, 1)) {
    char msg[256] = {0};
    const tg_cuda_operand a{id_a.storage, id_a.stamp}, b{id_b.storage, id_b.stamp};
    const int rc = g_plugin.sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, &a, B, ldb, &b,
                                  beta, C, ldc, msg, sizeof msg);
    if (rc == 0) return;
    gpu_failed(rc, msg);
  }
  cpu_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          float alpha, const float* A, int64_t lda, int64_t stride_a,
                          const float* B, int64_t ldb, int64_t stride_b, float beta, float* C,
                          int64_t ldc, int64_t stride_c, int64_t batch, OperandId id_a,
                          OperandId id_b) {
  // cuBLAS runs the batch in parallel, so the outputs must not overlap (the CPU loop
  // below would accumulate into a shared C in order; keep that case on the CPU).
  const bool disjoint = batch == 1 || (stride_c >= (M - 1) * ldc + N && stride_a >= 0 &&
                                       stride_b >= 0);
  if (disjoint && use_gpu(M, N, K, batch)) {
    char msg[256] = {0};
    const tg_cuda_operand a{id_a.storage, id_a.stamp}, b{id_b.storage, id_b.stamp};
    const int rc = g_plugin.sgemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a,
                                          &a, B, ldb, stride_b, &b, beta, C, ldc, stride_c,
                                          batch, msg, sizeof msg);
    if (rc == 0) return;
    gpu_failed(rc, msg);
  }
  cpu_gemm_strided_batched(trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb,
                           stride_b, beta, C, ldc, stride_c, batch);
}

}  // namespace gemm
}  // namespace tg
