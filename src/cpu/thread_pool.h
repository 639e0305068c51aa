#pragma once
// A fixed pool of persistent worker threads that runs one parallel job at a time.
//
// Between jobs the workers spin (with a pause instruction) on a generation counter, then park on a
// futex (std::atomic::wait) and cost nothing until the next job; the caller waits for them the same
// way. No mutex, no condition variable, no allocation per job. How long to spin is one constant
// (kSpinBeforePark): ~1 ms of spinning cost 25-30% of generation speed on a loaded 2-core machine
// (spinning threads lose their CFS share), so it is short until it is tuned on a quiet one.
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace tessera::cpu {

class ThreadPool {
 public:
  using Job = FunctionRef<void(int)>;

  // Starts n_threads - 1 workers (the caller is thread 0). Throws Error(OutOfMemory) naming how many
  // could not be started when the system refuses a thread; the workers already started are joined.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return n_threads_; }
  // Calls job(ith) for ith in [0, size()) on the workers and the caller; returns when all finish.
  // The first exception thrown by any call is rethrown here. One caller at a time.
  void run(Job job);

  // Test seam: the start of worker number `index` (1-based, as the caller is 0) throws as if the
  // system had refused the thread; 0 turns it off.
  static void fail_worker_start_for_testing(int index) noexcept;

 private:
  void worker(int ith);
  uint32_t wait_for_job(uint32_t seen);
  void stop_workers() noexcept;

  int n_threads_;
  std::vector<std::thread> workers_;
  Job job_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job (and to stop)
  alignas(64) std::atomic<int> pending_{0};          // workers still running the current job
  alignas(64) std::atomic<int> parked_{0};           // workers asleep in generation_.wait
  std::atomic<bool> main_parked_{false};             // the caller sleeps in pending_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace tessera::cpu
