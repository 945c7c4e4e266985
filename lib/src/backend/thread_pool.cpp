// tapegrad's worker threads (thread_pool.h).
//
// One job at a time. The caller publishes the job (its sequence number, its number of parts
// and the next unclaimed part, packed in one atomic word `claim_`), wakes the workers and then
// claims parts itself, like they do, until none is left; it then waits only for the parts
// that workers are still running. So a worker that is slow to wake (another process has its
// core) costs nothing: the caller takes its part. A part is claimed with a compare-and-swap
// that also checks the sequence number, so a late worker can never take a part of a later
// job. An idle worker spins for kSpin, then sleeps on a condition variable. The pool is
// created on first use and never destroyed (its threads end with the process), so no static
// destructor can wait on it. A child process made by fork() has none of the workers: there
// every job runs on the caller.
#include "backend/thread_pool.h"

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
constexpr int kMaxParts = 255;  // claim_ = (sequence << 16) | (parts << 8) | next part

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
  uint64_t jobs() const { return jobs_.load(std::memory_order_relaxed); }

  void resize(int n) {
    if (g_forked.load(std::memory_order_relaxed)) {  // the workers are not in this process
      threads_.store(n, std::memory_order_relaxed);
      return;
    }
    std::lock_guard<std::mutex> use(use_);
    stop_workers();
    for (int i = 1; i < n; ++i) {
      const uint64_t seen = epoch_.load(std::memory_order_seq_cst);
      workers_.emplace_back([this, seen] { work(seen); });
    }
    threads_.store(n, std::memory_order_relaxed);
  }

  void run(int parts, const std::function<void(int)>& f) {
    std::unique_lock<std::mutex> use(use_, std::defer_lock);
    if (parts > 1 && !t_in_job && !g_forked.load(std::memory_order_relaxed)) use.try_lock();
    if (!use.owns_lock() || workers_.empty() || parts > kMaxParts) {
      for (int p = 0; p < parts; ++p) f(p);  // busy, nested, single-threaded or too many
      return;
    }
    const uint64_t seq = ++seq_;
    jobs_.fetch_add(1, std::memory_order_relaxed);
    job_ = &f;
    done_.store(0, std::memory_order_relaxed);
    claim_.store((seq << 16) | (static_cast<uint64_t>(parts) << 8), std::memory_order_release);
    wake(seq);
    int mine = 0, p;
    t_in_job = true;
    while (claim(seq, p)) {
      f(p);
      ++mine;
    }
    t_in_job = false;
    for (int spins = 0; done_.load(std::memory_order_acquire) + mine < parts;) {
      if (++spins < 4096)
        cpu_relax();
      else
        std::this_thread::yield();  // the worker running a part may need this core
    }
  }

 private:
  /// Claims the next part of job `seq`; false when that job has no unclaimed part left.
  bool claim(uint64_t seq, int& part) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    for (;;) {
      if ((w >> 16) != seq) return false;  // a later job: not ours
      const int parts = static_cast<int>((w >> 8) & 0xff), next = static_cast<int>(w & 0xff);
      if (next >= parts) return false;
      if (claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) {
        part = next;
        return true;
      }
    }
  }

  /// Makes the workers look at job `seq` (or at stop_), waking those that sleep.
  void wake(uint64_t seq) {
    epoch_.store(seq, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mu_);
      wake_.notify_all();
    }
  }

  void stop_workers() {  // under use_
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_relaxed);
    wake(++seq_);
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_.store(false, std::memory_order_relaxed);
  }

  void work(uint64_t seen) {
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
      int p;
      while (claim(e, p)) {  // job_ is stable until our part is counted in done_
        (*job_)(p);
        done_.fetch_add(1, std::memory_order_release);
      }
    }
  }

  std::mutex use_;  // held by the thread whose job the pool runs
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  uint64_t seq_ = 0;  // the last job's sequence number (under use_)
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};        // parts finished by workers
  std::atomic<uint64_t> epoch_{0};  // the sequence number workers should look at
  std::atomic<bool> stop_{false};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<uint64_t> jobs_{0};  // jobs handed to the workers (pool_jobs)
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

void set_pool_threads(int n) { pool().resize(std::max(1, std::min(n, kMaxParts))); }

void parallel_for(int parts, const std::function<void(int)>& f) { pool().run(parts, f); }

bool in_parallel_part() { return t_in_job; }

uint64_t pool_jobs() { return pool().jobs(); }

}  // namespace detail
}  // namespace tg
