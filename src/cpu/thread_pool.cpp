#include "cpu/thread_pool.h"

#include <chrono>
#include <system_error>

#include "core/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera::cpu {
namespace {

std::atomic<int> g_fail_worker_start{0};

// Tells the core this is a spin-wait (saves power, frees the sibling hyper-thread).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker spins before parking (beyond kSpinsPerClockCheck pauses). Longer bridges
// the serial work between nodes on a quiet machine but costs CPU share on a loaded one (see header).
constexpr auto kSpinBeforePark = std::chrono::microseconds(0);
constexpr int kSpinsPerClockCheck = 256;
// After this many pauses (tens of microseconds) the caller sleeps until its workers finish, so that
// on a loaded machine it does not spend its share of the CPU waiting.
constexpr int kSpinsBeforeYield = 256;

}  // namespace

void ThreadPool::fail_worker_start_for_testing(int index) noexcept {
  g_fail_worker_start.store(index, std::memory_order_relaxed);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    try {
      if (g_fail_worker_start.load(std::memory_order_relaxed) == i)
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "injected thread start failure");
      workers_.emplace_back([this, i] { worker(i); });
    } catch (const std::exception& e) {  // std::system_error, or bad_alloc for the thread's state
      // Without this the members would be destroyed under running workers (a deadlock or terminate).
      const int started = static_cast<int>(workers_.size());
      stop_workers();
      raise(ErrorCode::OutOfMemory, "CPU: could not start {} of {} worker threads ({} started): {}",
            n_threads_ - 1 - started, n_threads_ - 1, started, e.what());
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void ThreadPool::run(Job job) {
  if (workers_.empty()) {
    job(0);
    return;
  }
  job_ = job;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  // seq_cst pairs with the parking worker's parked_ increment: either it sees the new generation or
  // we see it parked and wake it.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (parked_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

  std::exception_ptr own_error;
  try {
    job(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  // The workers' share is as long as ours (the splits are even), so this wait is usually short.
  for (int64_t spins = 0;; ++spins) {
    const int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    cpu_relax();
    if (spins < kSpinsBeforeYield) continue;
    // Sleep rather than yield: a woken thread gets its core back sooner than one that yielded it.
    main_parked_.store(true, std::memory_order_seq_cst);
    if (pending_.load(std::memory_order_seq_cst) == left) pending_.wait(left, std::memory_order_acquire);
    main_parked_.store(false, std::memory_order_relaxed);
  }
  job_ = Job();
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(error_);
}

uint32_t ThreadPool::wait_for_job(uint32_t seen) {
  auto idle_since = std::chrono::steady_clock::now();
  for (int64_t spins = 0;; ++spins) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    cpu_relax();
    if (spins % kSpinsPerClockCheck != kSpinsPerClockCheck - 1) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now - idle_since < kSpinBeforePark) continue;
    parked_.fetch_add(1, std::memory_order_seq_cst);
    generation_.wait(seen, std::memory_order_seq_cst);  // returns once generation_ != seen
    parked_.fetch_sub(1, std::memory_order_relaxed);
    idle_since = std::chrono::steady_clock::now();
  }
}

void ThreadPool::worker(int ith) {
  uint32_t seen = 0;  // the constructor publishes no job before the workers start
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      job_(ith);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && main_parked_.load(std::memory_order_seq_cst))
      pending_.notify_one();
  }
}

}  // namespace tessera::cpu
