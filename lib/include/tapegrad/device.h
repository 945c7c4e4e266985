#pragma once
// Where matrix products run, and how many CPU threads they use.
//
// Every product goes through one GEMM interface. It runs on OpenBLAS, or on cuBLAS through
// the optional plugin libtapegrad_cuda.so, which is loaded with dlopen on first use. The
// core never links CUDA, so a program starts and works on a machine without it.
//
// The backend comes from set_device(), or else from TAPEGRAD_DEVICE=cpu|cuda|auto (default
// auto), read on the first product. If the plugin, the driver or a device is missing,
// tapegrad uses OpenBLAS: silently for Auto; when CUDA was asked for by name, with one line
// on stderr:
//   tapegrad: CUDA unavailable (<reason>); using OpenBLAS
// TAPEGRAD_VERBOSE=1 prints the choice (device_status()) on the first product.
#include <cstdint>
#include <string>

namespace tg {

enum class Device {
  CPU,   ///< OpenBLAS for every product
  CUDA,  ///< cuBLAS for every product (OpenBLAS, with the log line, if CUDA is unavailable)
  Auto,  ///< cuBLAS for products of at least TAPEGRAD_CUDA_MIN_FLOPS flops, else OpenBLAS
         ///< (and OpenBLAS for every product, silently, if CUDA is unavailable)
};

/// Choose the backend now (overrides TAPEGRAD_DEVICE). CUDA and Auto load and initialise
/// the plugin; if an earlier attempt failed, they try again (TAPEGRAD_CUDA_PLUGIN is re-read).
void set_device(Device device);

/// Where large products run now: Device::CPU or Device::CUDA (never Auto).
Device current_device();

/// Whether the plugin loaded and found a device. Probes the plugin if nobody has yet.
bool cuda_available();

/// One line for logs: where products run, the OpenBLAS kernels that run the CPU ones, then
/// the instruction set of tapegrad's own vector kernels (TAPEGRAD_CPU_LEVEL, README "Portable
/// build"):
///   "cpu; OpenBLAS 0.3.21, kernel Cooperlake (tapegrad's choice; OpenBLAS chose Haswell);
///    avx512 kernels (the best this CPU runs)"
///   "cpu (CUDA unavailable: <reason>); OpenBLAS ...; ..."   "cuda: <device>; OpenBLAS ...; ..."
/// Loads OpenBLAS if nothing has yet (see blas_kernel()).
std::string device_status();

/// The OpenBLAS kernel set that runs the CPU products ("Cooperlake", "Haswell"). OpenBLAS is
/// loaded at run time, on the first product: unless OPENBLAS_CORETYPE is set, tapegrad asks
/// it for the fastest kernels this CPU can execute where its own choice is of a slower class
/// (SSE < AVX < AVX2 < AVX-512), after checking a few products against a plain loop.
/// TAPEGRAD_BLAS_KERNEL=openblas keeps OpenBLAS's choice; =best overrides OPENBLAS_CORETYPE.
/// If the program loaded OpenBLAS before tapegrad, its kernels stay, and where a faster set
/// exists one line on stderr names OPENBLAS_CORETYPE and the expected gain.
std::string blas_kernel();

/// The GPU's cache of device copies: leaf operands of products (weights, constant inputs)
/// stay on the device and are uploaded again only after a write to them (an optimizer step,
/// copy_, loading a checkpoint, any in-place op, or a raw pointer handed out by data()). Least
/// recently used copies make room first; a copy is freed when its tensor's storage dies.
struct DeviceCacheStats {
  int64_t hits = 0, misses = 0, evictions = 0;  ///< lookups of leaf operands since start-up
  int64_t entries = 0, bytes = 0;               ///< held now
  int64_t budget = 0;                           ///< bytes
  int64_t uploaded_bytes = 0;                   ///< every host-to-device copy, cached or not
};
/// All zero but the budget when products run on the CPU.
DeviceCacheStats device_cache_stats();
/// The cache's size in bytes (default 1 GiB, or TAPEGRAD_CUDA_CACHE_MB); 0 turns it off.
void set_device_cache_budget(int64_t bytes);

/// CPU threads for every product. n >= 1. Once called, OpenBLAS runs single-threaded and
/// tapegrad splits each large product (about 10 µs of work or more) into up to n parts that
/// run at once on threads of its own; they spin for a moment between products, then sleep.
/// Until it is called, products use OpenBLAS's own threads (OPENBLAS_NUM_THREADS, or one per
/// core), and get_num_threads() reports OpenBLAS's count.
void set_num_threads(int n);
int get_num_threads();

}  // namespace tg
