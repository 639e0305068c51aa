#pragma once
// A fixed pool of persistent worker threads that runs one parallel loop at a time.
//
// A loop's range is cut into chunks, and each thread first claims the chunks of its own share from
// an atomic word on its own cache line (no line moves between cores per chunk), then claims what
// is left of the others' shares. So a thread that the OS has descheduled (or that is still waking
// up) costs nothing: the others take its chunks and the caller returns once every chunk is done,
// without waiting for threads that never showed up. Results never depend on who ran which chunk
// (every item is computed by exactly one call).
//
// Between loops the workers spin (with a pause instruction) on a generation counter for up to
// kIdleSpin (2 ms) after their last chunk, so the nodes of a graph, and the graphs of a generation
// loop, are separated by a spinning barrier rather than a wake-up (yielding the core now and then
// after the first 50 us, so that other threads still run on a busy machine); then they park on a futex
// (std::atomic::wait) and cost nothing. With more threads than the hardware has they park at once
// (a spinning thread would only take a core from one with work). The caller waits for the last
// chunks the same way. No mutex, no condition variable, no allocation per loop.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace tessera::cpu {

class ThreadPool {
 public:
  using RangeFn = FunctionRef<void(int64_t, int64_t)>;

  // Starts n_threads - 1 workers (the caller is thread 0). Throws Error(OutOfMemory) naming how many
  // could not be started when the system refuses a thread; the workers already started are joined.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const noexcept { return n_threads_; }

  // How parallel_for cuts [0, n) for a pool of `threads`: the number of chunks (a few per thread,
  // so that the threads finish together whatever the OS does to one of them) and where chunk c of
  // `chunks` begins (sizes differ by at most one). Depends only on n and threads.
  static int64_t chunk_count(int64_t n, int threads) noexcept;
  static int64_t chunk_begin(int64_t n, int64_t chunks, int64_t c) noexcept {
    return n / chunks * c + std::min(c, n % chunks);
  }

  // Calls fn(begin, end) once for every chunk of [0, n) (chunk_count(n, size()) of them) on the
  // workers and the caller; returns when all are done. The first exception thrown by a chunk is
  // rethrown here (the other chunks still run). One caller at a time.
  void parallel_for(int64_t n, RangeFn fn);

  // Open while a graph runs (the CPU backend holds one): the read-ahead below applies only then.
  class GraphScope {
   public:
    explicit GraphScope(ThreadPool& pool) noexcept;
    ~GraphScope();
    GraphScope(const GraphScope&) = delete;
    GraphScope& operator=(const GraphScope&) = delete;

   private:
    ThreadPool& pool_;
  };

  // Read-ahead while idle: inside a GraphScope, workers waiting for the next loop prefetch these
  // byte ranges (the weights the next nodes read), a few KiB at a time and back to real work as soon
  // as a loop comes, so a serial stretch of the graph (one-row ops on the caller) moves the next
  // matrices from memory into the caches. Replaces the ranges given before. Only a hint: prefetches
  // never fault, so ranges freed meanwhile cost nothing but the reads.
  struct Range {
    const void* data;
    size_t size;
  };
  static constexpr int kMaxReadAhead = 8;  // ranges per call (more are ignored)
  void read_ahead_while_idle(const Range* ranges, int count) noexcept;

  // Test seam: the start of worker number `index` (1-based, as the caller is 0) throws as if the
  // system had refused the thread; 0 turns it off.
  static void fail_worker_start_for_testing(int index) noexcept;

 private:
  // The loop being run: written by the caller before it publishes the shares, read by a worker only
  // after it has claimed a chunk of it (so never while the caller rewrites it for the next loop).
  struct Loop {
    RangeFn fn;
    int64_t n = 0;
    int64_t chunks = 0;
  };
  // Thread t's share of the current loop's chunks: loop sequence (high 32 bits), end of the share
  // (bits 16-31) and next unclaimed chunk (bits 0-15). One cache line each.
  struct alignas(64) Share {
    std::atomic<uint64_t> claim{0};
  };

  void worker(int index);
  uint32_t wait_for_loop(uint32_t seen);
  // Claims and runs chunks of loop `seq`, its own share first (thread `self`), then the others',
  // until none is left; then counts them done.
  void run_chunks(uint32_t seq, int self);
  void record_error() noexcept;
  // Claims and prefetches one piece of the read-ahead ranges; false when none is left.
  bool read_ahead_piece() noexcept;
  void stop_workers() noexcept;

  int n_threads_;
  bool spin_when_idle_;  // false when there are more threads than hardware threads
  std::vector<std::thread> workers_;
  Loop loop_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  uint32_t seq_ = 0;  // the caller's count of loops published
  std::unique_ptr<Share[]> shares_;                  // one per thread, the caller's first
  alignas(64) std::atomic<uint32_t> generation_{0};  // the latest loop's sequence (and bumped to stop)
  alignas(64) std::atomic<uint32_t> done_{0};        // chunks of the current loop finished
  std::atomic<bool> main_parked_{false};             // the caller sleeps in done_.wait
  alignas(64) std::atomic<int> parked_{0};           // workers gone to generation_.wait, not yet woken
  std::atomic<int> graph_scopes_{0};
  // Read-ahead ranges (relaxed: a torn view only prefetches the wrong bytes), their total in
  // pieces, and the claim word: call number (high 32 bits) and next piece (low 32 bits).
  std::atomic<const char*> ahead_data_[kMaxReadAhead] = {};
  std::atomic<size_t> ahead_size_[kMaxReadAhead] = {};
  std::atomic<int> ahead_count_{0};
  std::atomic<uint32_t> ahead_pieces_{0};
  alignas(64) std::atomic<uint64_t> ahead_claim_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tessera::cpu
