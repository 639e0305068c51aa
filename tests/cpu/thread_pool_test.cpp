// The CPU thread pool: every item runs once per loop in chunks that depend only on the size, errors
// come back, a refused thread is an Error (never a deadlock), and the backend's thread count is
// bounded by the machine.
#include "cpu/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu/kernels.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/log.h"

using namespace tessera;
using tessera::cpu::ThreadPool;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Runs one loop of n items on the pool and returns how often each item was visited.
std::vector<int> visits_per_item(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(n));
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
  });
  std::vector<int> out;
  for (auto& v : visits) out.push_back(v.load());
  return out;
}

}  // namespace

TEST(CpuThreadPool, EveryItemRunsOncePerLoopWhetherWorkersSpinOrPark) {
  ThreadPool pool(3);
  ASSERT_EQ(pool.size(), 3);
  const std::vector<int> once(50, 1);
  // Back to back, inside and outside a graph scope: the workers are still spinning.
  for (int loop = 0; loop < 2000; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << loop;
  {
    ThreadPool::GraphScope scope(pool);
    for (int loop = 0; loop < 2000; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << loop;
  }
  // After 20 ms idle they have parked on the futex (even in a scope) and must wake for the next
  // loops: the loops published while they are still waking up (one wake-up for all) run whole too.
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int loop = 0; loop < 50; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << round << loop;
    ThreadPool::GraphScope scope(pool);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int loop = 0; loop < 50; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << round << loop;
  }
}

TEST(CpuThreadPool, ReadAheadWhileIdleIsOnlyAHint) {
  // Idle workers prefetch the ranges given (here 64 MiB, more than they get through between loops)
  // and still take their share of every loop exactly; ranges past kMaxReadAhead are ignored, memory
  // freed (or never mapped) meanwhile is harmless, and no ranges lets them park again.
  ThreadPool pool(3);
  const std::vector<int> once(50, 1);
  ThreadPool::GraphScope scope(pool);
  auto memory = std::make_unique<std::vector<char>>(size_t{64} << 20);
  std::vector<ThreadPool::Range> ranges(ThreadPool::kMaxReadAhead + 3, {memory->data(), memory->size()});
  ranges[1] = {reinterpret_cast<const void*>(uintptr_t{4096}), size_t{1} << 20};  // not mapped
  pool.read_ahead_while_idle(ranges.data(), static_cast<int>(ranges.size()));
  for (int loop = 0; loop < 500; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << loop;
  memory.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int loop = 0; loop < 500; ++loop) ASSERT_EQ(visits_per_item(pool, 50), once) << loop;
  pool.read_ahead_while_idle(nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(visits_per_item(pool, 50), once);
}

TEST(CpuThreadPool, ALoopsResultsAreVisibleToTheCaller) {
  ThreadPool pool(2);
  ThreadPool::GraphScope scope(pool);
  for (int loop = 0; loop < 500; ++loop) {
    std::vector<int> out(64, 0);
    pool.parallel_for(64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[static_cast<size_t>(i)] = loop * 100 + static_cast<int>(i);
    });  // plain stores
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], loop * 100 + i) << loop;
  }
}

// Chunks go to whichever thread is free, not to a thread fixed in advance: while the first chunk to
// start is held up (as by a descheduled thread) the other threads run all the rest. With a fixed
// split the held thread's remaining chunks would never run and this would fail at the deadline.
TEST(CpuThreadPool, AHeldUpThreadsShareIsTakenByTheOthers) {
  ThreadPool pool(3);
  for (int round = 0; round < 20; ++round) {
    const int64_t chunks = ThreadPool::chunk_count(12, 3);
    std::atomic<int> started{0}, finished{0};
    std::atomic<bool> others_done{false};
    pool.parallel_for(12, [&](int64_t, int64_t) {
      if (started.fetch_add(1) == 0) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (finished.load() < chunks - 1 && std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        others_done = finished.load() == chunks - 1;
      }
      finished.fetch_add(1);
    });
    ASSERT_TRUE(others_done.load()) << round;
    ASSERT_EQ(finished.load(), chunks);
  }
}

TEST(CpuThreadPool, ChunksAreClaimedAsThreadsComeFreeAndCoverEveryItemOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 3, 7, 8, 12, 13, 100, 100000}) {
    EXPECT_EQ(visits_per_item(pool, n), std::vector<int>(static_cast<size_t>(n), 1)) << n;
    const int64_t chunks = ThreadPool::chunk_count(n, 3);
    EXPECT_EQ(chunks, std::min<int64_t>(n, 12)) << n;
    std::vector<std::atomic<int>> calls(static_cast<size_t>(chunks));
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      // Each call is one whole chunk: its bounds are those chunk_begin gives.
      int64_t c = 0;
      while (ThreadPool::chunk_begin(n, chunks, c) != begin) ++c;
      ASSERT_LT(c, chunks);
      EXPECT_EQ(end, ThreadPool::chunk_begin(n, chunks, c + 1));
      calls[static_cast<size_t>(c)].fetch_add(1);
    });
    for (int64_t c = 0; c < chunks; ++c) EXPECT_EQ(calls[static_cast<size_t>(c)].load(), 1) << n << " " << c;
    EXPECT_EQ(ThreadPool::chunk_begin(n, chunks, chunks), n);
    // Sizes differ by at most one.
    EXPECT_LE(
        ThreadPool::chunk_begin(n, chunks, 1) - ThreadPool::chunk_begin(n, chunks, 0),
        ThreadPool::chunk_begin(n, chunks, chunks) - ThreadPool::chunk_begin(n, chunks, chunks - 1) + 1);
  }
  EXPECT_EQ(ThreadPool::chunk_count(1000, 1), 1);
  EXPECT_EQ(ThreadPool::chunk_count(0, 4), 0);
}

TEST(CpuThreadPool, AnExceptionInAChunkIsRethrownAndThePoolStaysUsable) {
  ThreadPool pool(3);
  for (int round = 0; round < 50; ++round) {
    try {
      pool.parallel_for(12, [](int64_t begin, int64_t) {
        if (begin == 7) throw Error(ErrorCode::InvalidArgument, "chunk seven failed");
      });
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "chunk seven failed")) << e.what();
    }
    ASSERT_EQ(visits_per_item(pool, 30), std::vector<int>(30, 1));
  }
}

// Issue 15 defect 3: a refused pthread_create unwound the constructor under running workers, and the
// caller blocked forever in pthread_cond_destroy.
TEST(CpuThreadPool, ARefusedWorkerIsAnErrorAndTheStartedOnesAreJoined) {
  ThreadPool::fail_worker_start_for_testing(3);
  try {
    ThreadPool pool(5);
    ThreadPool::fail_worker_start_for_testing(0);
    FAIL() << "no exception";
  } catch (const Error& e) {
    ThreadPool::fail_worker_start_for_testing(0);
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_TRUE(contains(e.what(), "could not start 2 of 4 worker threads (2 started)")) << e.what();
  }
  EXPECT_EQ(visits_per_item(*std::make_unique<ThreadPool>(5), 40), std::vector<int>(40, 1));
}

// The same through the real system: in a child whose address space has room for only a few thread
// stacks, asking for 1000 threads must end in an Error, within seconds.
TEST(CpuThreadPool, RunningOutOfAddressSpaceForThreadsIsAnError) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);  // a deadlock ends as SIGALRM, not as a hung suite
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (64 << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
      ThreadPool pool(1000);
      _exit(4);  // all started: the limit did not bite
    } catch (const Error& e) {
      _exit(e.code() == ErrorCode::OutOfMemory && contains(e.what(), "worker threads") ? 0 : 5);
    } catch (...) {
      _exit(6);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: setrlimit, 4: no failure, 5: wrong error, 6: not an Error";
}

TEST(CpuBackendThreads, MoreThanTheMachineIsClampedWithOneWarning) {
  std::vector<std::string> warnings;
  set_log_callback([&](LogLevel level, std::string_view message) {
    if (level == LogLevel::Warn) warnings.emplace_back(message);
  });
  const int cores = cpu::hardware_threads();
  {
    cpu::CpuBackend backend(100000);
    EXPECT_EQ(backend.threads(), cores);
    backend.set_threads(cores);
    backend.set_threads(cores + 1);
    EXPECT_EQ(backend.threads(), cores);
  }
  cpu::CpuBackend all(0);
  set_log_callback(nullptr);
  EXPECT_EQ(all.threads(), cores);
  ASSERT_EQ(warnings.size(), 2u);  // one per request over the limit (constructor, set_threads), none for 0
  EXPECT_TRUE(contains(warnings[0], "100000 threads requested but the machine has " + std::to_string(cores) +
                                        " hardware threads; using " + std::to_string(cores)))
      << warnings[0];
  EXPECT_EQ(cpu::bounded_threads(cores + 5, cpu::ThreadLimit::Exact), cores + 5);
  EXPECT_EQ(cpu::bounded_threads(cores + 5), cores);
  EXPECT_THROW(cpu::bounded_threads(-1), Error);
}
