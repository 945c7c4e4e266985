// The gemm trace (gemm_trace.h): one list under a lock, filled while g_tracing is set.
#include "backend/gemm_trace.h"

#include <mutex>
#include <utility>

#include "backend/thread_pool.h"
#include "tapegrad/error.h"

namespace tg {
namespace gemm {

namespace {
std::mutex g_mu;
std::vector<Call> g_calls;  // under g_mu
bool g_running = false;     // under g_mu
uint64_t g_trace = 0;       // which trace runs (under g_mu)
int g_threads = 0;          // threads seen by this trace (under g_mu)
thread_local uint64_t t_trace = 0;  // the trace this thread last recorded into
thread_local int t_thread = 0;      // and its number there
}  // namespace

std::atomic<bool> g_tracing{false};

void trace_record(Call call) {
  call.concurrent = tg::detail::in_parallel_part();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_running) return;
  if (t_trace != g_trace) {  // this thread's first product in this trace
    t_trace = g_trace;
    t_thread = g_threads++;
  }
  call.thread = t_thread;
  g_calls.push_back(call);
}

void trace_start() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_running) throw ValueError("gemm::trace_start: a trace is already running");
  g_calls.clear();
  g_running = true;
  ++g_trace;
  g_threads = 0;
  g_tracing.store(true, std::memory_order_relaxed);
}

std::vector<Call> trace_stop() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_running) throw ValueError("gemm::trace_stop: no trace is running (call trace_start first)");
  g_running = false;
  g_tracing.store(false, std::memory_order_relaxed);
  return std::exchange(g_calls, {});
}

}  // namespace gemm
}  // namespace tg
