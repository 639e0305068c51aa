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

// Chunks per thread: enough that a thread descheduled for a while leaves little for the others to
// wait on, few enough that claiming one (an atomic on a shared line) stays negligible.
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kMaxChunks = 0xffff;  // what the claim word's 16-bit fields hold
// How long an idle worker keeps spinning after its last chunk before it parks: longer than the
// serial work between two parallel nodes (a few us) and than the host's work between two graphs of
// a generation loop (building and scheduling the next token's graph, reading the logits: 0.3-1 ms
// for a small model), which a parked worker would otherwise spend waking up (a futex wake-up of an
// idle vCPU is tens of us, and the caller runs the first nodes alone meanwhile).
constexpr auto kIdleSpin = std::chrono::milliseconds(2);
// After this much of it the spinning worker also yields its core at every look at the clock, so
// that other threads of the process (an HTTP server's, a caller's) and of the machine still run
// when all cores are taken; with nothing else to run a yield returns at once.
constexpr auto kSpinAlone = std::chrono::microseconds(50);
// Pauses between two looks at the clock.
constexpr int kSpinsPerClockCheck = 256;
// How long the caller spins for the last chunks before it sleeps until they are done.
constexpr auto kCallerSpin = std::chrono::microseconds(30);

// Read-ahead pieces: small enough that a worker prefetching one joins a new loop within a
// fraction of a microsecond.
constexpr size_t kReadAheadPiece = 4096;

constexpr uint64_t claim_word(uint32_t seq, uint64_t end, uint64_t next) noexcept {
  return static_cast<uint64_t>(seq) << 32 | end << 16 | next;
}

}  // namespace

void ThreadPool::fail_worker_start_for_testing(int index) noexcept {
  g_fail_worker_start.store(index, std::memory_order_relaxed);
}

int64_t ThreadPool::chunk_count(int64_t n, int threads) noexcept {
  if (n <= 0) return 0;
  if (threads <= 1) return 1;
  return std::min({n, static_cast<int64_t>(threads) * kChunksPerThread, kMaxChunks});
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads),
      spin_when_idle_(n_threads_ <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      shares_(std::make_unique<Share[]>(static_cast<size_t>(n_threads_))) {
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

ThreadPool::GraphScope::GraphScope(ThreadPool& pool) noexcept : pool_(pool) {
  pool_.graph_scopes_.fetch_add(1, std::memory_order_relaxed);
}

ThreadPool::GraphScope::~GraphScope() { pool_.graph_scopes_.fetch_sub(1, std::memory_order_relaxed); }

void ThreadPool::parallel_for(int64_t n, RangeFn fn) {
  if (n <= 0) return;
  const int64_t chunks = chunk_count(n, n_threads_);
  if (workers_.empty() || chunks == 1) {
    fn(0, n);
    return;
  }
  loop_ = {fn, n, chunks};
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  const uint32_t seq = ++seq_;
  for (int t = 0; t < n_threads_; ++t)  // thread t's share: chunks [begin, end), sizes differ by one at most
    shares_[static_cast<size_t>(t)].claim.store(
        claim_word(seq, static_cast<uint64_t>(chunk_begin(chunks, n_threads_, t + 1)),
                   static_cast<uint64_t>(chunk_begin(chunks, n_threads_, t))),
        std::memory_order_release);
  // seq_cst pairs with the parking worker's parked_ increment: either it sees the new generation or
  // we see it parked and wake it. Taking the count to 0 wakes each parked worker once: the loops
  // published while it is still waking up make no futex call of their own.
  generation_.store(seq, std::memory_order_seq_cst);
  if (parked_.load(std::memory_order_seq_cst) > 0 && parked_.exchange(0, std::memory_order_seq_cst) > 0)
    generation_.notify_all();

  run_chunks(seq, 0);
  // Only chunks claimed by others and still running are left: wait for them, not for every worker.
  const auto target = static_cast<uint32_t>(chunks);
  const auto spin_until = std::chrono::steady_clock::now() + kCallerSpin;
  for (int64_t spins = 0;; ++spins) {
    const uint32_t d = done_.load(std::memory_order_acquire);
    if (d == target) break;
    cpu_relax();
    if (spins % kSpinsPerClockCheck != kSpinsPerClockCheck - 1 ||
        std::chrono::steady_clock::now() < spin_until)
      continue;
    // Sleep rather than yield: a woken thread gets its core back sooner than one that yielded it.
    main_parked_.store(true, std::memory_order_seq_cst);
    if (done_.load(std::memory_order_seq_cst) == d) done_.wait(d, std::memory_order_acquire);
    main_parked_.store(false, std::memory_order_relaxed);
  }
  loop_ = {};
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::run_chunks(uint32_t seq, int self) {
  Loop loop;
  uint32_t ran = 0;
  for (int q = 0; q < n_threads_; ++q) {
    std::atomic<uint64_t>& claim = shares_[static_cast<size_t>((self + q) % n_threads_)].claim;
    uint64_t c = claim.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(c >> 32) != seq) break;  // a later loop (or stop): not ours
      const uint64_t end = (c >> 16) & 0xffff, next = c & 0xffff;
      if (next >= end) break;
      if (!claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        continue;
      // Loop `seq` cannot finish (and loop_ be rewritten) before this claimed chunk is counted done.
      if (!loop.fn) loop = loop_;
      const auto i = static_cast<int64_t>(next);
      try {
        loop.fn(chunk_begin(loop.n, loop.chunks, i), chunk_begin(loop.n, loop.chunks, i + 1));
      } catch (...) {
        record_error();
      }
      ++ran;
      c = claim.load(std::memory_order_acquire);
    }
  }
  // Counted once, when no chunk is left to claim: one write to the shared line per thread and loop.
  if (ran > 0 &&
      done_.fetch_add(ran, std::memory_order_seq_cst) + ran == static_cast<uint32_t>(loop.chunks) &&
      main_parked_.load(std::memory_order_seq_cst))
    done_.notify_one();
}

void ThreadPool::record_error() noexcept {
  std::lock_guard lock(error_mutex_);
  if (!error_) error_ = std::current_exception();
}

void ThreadPool::read_ahead_while_idle(const Range* ranges, int count) noexcept {
  count = std::clamp(count, 0, kMaxReadAhead);
  uint64_t pieces = 0;
  for (int i = 0; i < count; ++i) {
    ahead_data_[i].store(static_cast<const char*>(ranges[i].data), std::memory_order_relaxed);
    ahead_size_[i].store(ranges[i].size, std::memory_order_relaxed);
    pieces += (ranges[i].size + kReadAheadPiece - 1) / kReadAheadPiece;
  }
  ahead_count_.store(count, std::memory_order_relaxed);
  ahead_pieces_.store(static_cast<uint32_t>(std::min<uint64_t>(pieces, UINT32_MAX)),
                      std::memory_order_relaxed);
  const uint64_t call = (ahead_claim_.load(std::memory_order_relaxed) >> 32) + 1;
  ahead_claim_.store(call << 32, std::memory_order_release);
}

bool ThreadPool::read_ahead_piece() noexcept {
  uint64_t c = ahead_claim_.load(std::memory_order_acquire);
  uint32_t piece = 0;
  do {
    piece = static_cast<uint32_t>(c);
    if (piece >= ahead_pieces_.load(std::memory_order_relaxed)) return false;
  } while (
      !ahead_claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire));
  const int count = ahead_count_.load(std::memory_order_relaxed);
  size_t skip = static_cast<size_t>(piece) * kReadAheadPiece;
  for (int i = 0; i < count; ++i) {
    const size_t size = ahead_size_[i].load(std::memory_order_relaxed);
    const size_t padded = (size + kReadAheadPiece - 1) / kReadAheadPiece * kReadAheadPiece;
    if (skip >= padded) {
      skip -= padded;
      continue;
    }
    const char* p = ahead_data_[i].load(std::memory_order_relaxed) + skip;
    const size_t n = std::min(kReadAheadPiece, size - skip);
#if defined(__x86_64__) || defined(__i386__)
    for (size_t off = 0; off < n; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
#else
    for (size_t off = 0; off < n; off += 64) __builtin_prefetch(p + off, 0, 2);
#endif
    break;
  }
  return true;
}

uint32_t ThreadPool::wait_for_loop(uint32_t seen) {
  auto idle_since = std::chrono::steady_clock::now();
  for (int64_t spins = 0;; ++spins) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    // Idle inside a graph: read ahead for the next nodes (and stay awake while there is some).
    if (spin_when_idle_ && graph_scopes_.load(std::memory_order_relaxed) > 0 && read_ahead_piece()) {
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    cpu_relax();
    if (spins % kSpinsPerClockCheck != kSpinsPerClockCheck - 1) continue;
    if (spin_when_idle_) {
      const auto idle = std::chrono::steady_clock::now() - idle_since;
      if (idle < kSpinAlone) continue;
      if (idle < kIdleSpin) {
        std::this_thread::yield();
        continue;
      }
    }
    parked_.fetch_add(1, std::memory_order_seq_cst);    // the waker takes it back (see parallel_for)
    generation_.wait(seen, std::memory_order_seq_cst);  // returns once generation_ != seen
    idle_since = std::chrono::steady_clock::now();
  }
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;  // the constructor publishes no loop before the workers start
  for (;;) {
    seen = wait_for_loop(seen);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(seen, index);
  }
}

}  // namespace tessera::cpu
