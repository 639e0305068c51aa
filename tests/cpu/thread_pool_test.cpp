// The CPU thread pool: every index runs once per job, errors come back, a refused thread is an Error
// (never a deadlock), parallel_for splits evenly, and the backend's thread count is bounded by the machine.
#include "cpu/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
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

// Runs one job on the pool and returns how often each index was called.
std::vector<int> calls_per_index(ThreadPool& pool) {
  std::vector<std::atomic<int>> calls(static_cast<size_t>(pool.size()));
  pool.run([&](int ith) { calls[static_cast<size_t>(ith)].fetch_add(1); });
  std::vector<int> out;
  for (auto& c : calls) out.push_back(c.load());
  return out;
}

}  // namespace

TEST(CpuThreadPool, EveryIndexRunsOncePerJobWhetherWorkersSpinOrPark) {
  ThreadPool pool(3);
  ASSERT_EQ(pool.size(), 3);
  // Back to back: the workers are still spinning.
  for (int job = 0; job < 2000; ++job) ASSERT_EQ(calls_per_index(pool), (std::vector<int>{1, 1, 1})) << job;
  // After 20 ms idle they have parked on the futex and must wake for the next job.
  for (int job = 0; job < 3; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(calls_per_index(pool), (std::vector<int>{1, 1, 1})) << job;
  }
}

TEST(CpuThreadPool, AJobsResultsAreVisibleToTheCaller) {
  ThreadPool pool(2);
  for (int job = 0; job < 500; ++job) {
    std::vector<int> out(2, 0);
    pool.run([&](int ith) { out[static_cast<size_t>(ith)] = job * 10 + ith; });  // plain stores
    ASSERT_EQ(out, (std::vector<int>{job * 10, job * 10 + 1}));
  }
}

TEST(CpuThreadPool, AnExceptionOnAWorkerIsRethrownAndThePoolStaysUsable) {
  ThreadPool pool(3);
  try {
    pool.run([](int ith) {
      if (ith == 2) throw Error(ErrorCode::InvalidArgument, "worker two failed");
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "worker two failed")) << e.what();
  }
  EXPECT_EQ(calls_per_index(pool), (std::vector<int>{1, 1, 1}));
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
  EXPECT_EQ(calls_per_index(*std::make_unique<ThreadPool>(5)), (std::vector<int>{1, 1, 1, 1, 1}));
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

TEST(CpuParallelFor, ChunksDifferByAtMostOneAndCoverEveryItemOnce) {
  ThreadPool pool(3);
  cpu::ComputeContext ctx;
  ctx.pool = &pool;
  ctx.n_threads = 3;
  for (int64_t n : {1, 2, 3, 7, 8, 100}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::vector<int64_t> sizes(3, 0);
    ctx.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      // Chunks are contiguous and ordered, so the thread owning `begin` is found from the sizes.
      const int64_t base = n / 3, extra = n % 3;
      const int64_t ith =
          begin < extra * (base + 1) ? begin / (base + 1) : extra + (begin - extra * (base + 1)) / base;
      sizes[static_cast<size_t>(ith)] = end - begin;
    });
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n << " item " << i;
    const std::vector<int64_t> expected = n == 1   ? std::vector<int64_t>{1, 0, 0}
                                          : n == 2 ? std::vector<int64_t>{1, 1, 0}
                                          : n == 3 ? std::vector<int64_t>{1, 1, 1}
                                          : n == 7 ? std::vector<int64_t>{3, 2, 2}
                                          : n == 8 ? std::vector<int64_t>{3, 3, 2}
                                                   : std::vector<int64_t>{34, 33, 33};
    EXPECT_EQ(sizes, expected) << "n " << n;
  }
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
