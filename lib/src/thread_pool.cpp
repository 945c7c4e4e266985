// tapegrad's worker threads (thread_pool.h).
//
// One job at a time: the caller publishes (job, parts) by bumping `epoch_`, whose low bits
// carry the number of parts, runs part 0 itself and spins until the workers have finished
// theirs. Worker i runs part i when i < parts. An idle worker spins for kSpin, then sleeps on
// a condition variable. The pool is created on first use and never destroyed (its threads
// end with the process), so no static destructor can wait on it. A child process made by
// fork() has none of the workers: there every job runs on the caller.
#include "thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace tg {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;
/// How long an idle worker spins before it sleeps: longer than the gaps between the products
/// of one training step, short enough to give the core back soon after the step.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr uint64_t kPartsBits = 8;  // epoch_ = (sequence << kPartsBits) | parts
constexpr int kMaxThreads = 1 << kPartsBits;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

thread_local bool t_in_job = false;  // a part calling parallel_for runs it serially
std::atomic<bool> g_forked{false};   // this process is a fork() child: no workers here

class Pool {
 public:
  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int n) {
    if (g_forked.load(std::memory_order_relaxed)) {  // the workers are not in this process
      threads_.store(n, std::memory_order_relaxed);
      return;
    }
    std::lock_guard<std::mutex> use(use_);
    stop_workers();
    for (int id = 1; id < n; ++id) {
      const uint64_t seen = epoch_.load(std::memory_order_seq_cst);
      workers_.emplace_back([this, id, seen] { work(id, seen); });
    }
    threads_.store(n, std::memory_order_relaxed);
  }

  void run(int parts, const std::function<void(int)>& f) {
    std::unique_lock<std::mutex> use(use_, std::defer_lock);
    if (parts > 1 && !t_in_job && !g_forked.load(std::memory_order_relaxed)) use.try_lock();
    if (!use.owns_lock() || workers_.empty()) {  // busy, nested or single-threaded
      for (int p = 0; p < parts; ++p) f(p);
      return;
    }
    const int shared = std::min(parts, threads());  // parts 1..shared-1 go to workers
    job_ = &f;
    pending_.store(shared - 1, std::memory_order_relaxed);
    publish(static_cast<uint64_t>(shared));
    t_in_job = true;
    f(0);
    for (int p = shared; p < parts; ++p) f(p);  // more parts than threads: the rest here
    t_in_job = false;
    for (int spins = 0; pending_.load(std::memory_order_acquire) > 0;) {
      if (++spins < 4096)
        cpu_relax();
      else
        std::this_thread::yield();  // a worker may be waiting for this core
    }
  }

 private:
  /// Starts epoch `(sequence + 1, parts)` and wakes sleeping workers.
  void publish(uint64_t parts) {
    const uint64_t next = ((epoch_.load(std::memory_order_relaxed) >> kPartsBits) + 1);
    epoch_.store((next << kPartsBits) | parts, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mu_);
      wake_.notify_all();
    }
  }

  void stop_workers() {  // under use_
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_relaxed);
    publish(0);
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_.store(false, std::memory_order_relaxed);
  }

  void work(int id, uint64_t seen) {
    t_in_job = true;  // products inside a part never split again
    for (;;) {
      uint64_t e;
      const auto t0 = Clock::now();
      for (int spins = 0; (e = epoch_.load(std::memory_order_acquire)) == seen;) {
        if (++spins % 256 != 0 || Clock::now() - t0 < kSpin) {
          cpu_relax();
          continue;
        }
        std::unique_lock<std::mutex> lock(sleep_mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return epoch_.load(std::memory_order_seq_cst) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      seen = e;
      if (stop_.load(std::memory_order_relaxed)) return;
      const int parts = static_cast<int>(e & (kMaxThreads - 1));
      if (id < parts) {
        (*job_)(id);
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  std::mutex use_;  // held by the thread whose job the workers run
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> pending_{0};  // workers' parts not finished
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

Pool& pool() {
  static Pool* p = [] {
    pthread_atfork(nullptr, nullptr, [] { g_forked.store(true, std::memory_order_relaxed); });
    return new Pool;  // never destroyed: see the top of the file
  }();
  return *p;
}

}  // namespace

int pool_threads() { return pool().threads(); }

void set_pool_threads(int n) { pool().resize(std::max(1, std::min(n, kMaxThreads - 1))); }

void parallel_for(int parts, const std::function<void(int)>& f) { pool().run(parts, f); }

}  // namespace detail
}  // namespace tg
