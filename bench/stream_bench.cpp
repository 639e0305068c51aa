// The machine's read bandwidth, STREAM-like: 1..N threads each sum their contiguous share of a
// buffer much larger than the caches (as a generation step streams its weights once per token).
// Generation figures (bytes of weights read per token x tok/s) are stated as a fraction of it.
// Run: build/release/bench/tessera_bench --benchmark_filter=StreamRead (read_GB/s: take the median).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBufferBytes = size_t{512} << 20;  // 16x a 32 MiB L3

// Eight independent chains so the adds never limit the loads (the compiler vectorises them), one
// cache line per step; `ahead` > 0 adds a software prefetch that many bytes ahead (what the
// matrix-vector kernels do), to see what it buys over the hardware prefetchers.
uint64_t sum_words(const uint64_t* p, size_t words, size_t ahead) {
  uint64_t s[8] = {};
  size_t i = 0;
  const size_t ahead_words = ahead / sizeof(uint64_t);
  for (; i + 8 <= words; i += 8) {
    if (ahead_words != 0) __builtin_prefetch(p + i + ahead_words, 0, 3);
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  }
  for (; i < words; ++i) s[0] += p[i];
  uint64_t total = 0;
  for (uint64_t v : s) total += v;
  return total;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

const uint64_t* buffer() {
  static const std::unique_ptr<uint64_t[]> data = [] {
    auto d = std::make_unique<uint64_t[]>(kBufferBytes / sizeof(uint64_t));
    // Written, so every page is backed by its own memory (an untouched page reads the zero page).
    std::memset(d.get(), 0x5a, kBufferBytes);
    return d;
  }();
  return data.get();
}

// args: threads, prefetch distance in bytes (0: none)
void BM_StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto ahead = static_cast<size_t>(state.range(1));
  const uint64_t* data = buffer();
  const size_t words = kBufferBytes / sizeof(uint64_t);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);  // a cache line apart
  std::vector<double> cpu(static_cast<size_t>(threads) * 8);
  double cpu_seconds = 0.0;  // per iteration, the slowest thread's
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const size_t w0 = words * t / threads, w1 = words * (t + 1) / threads;
      pool.emplace_back([&, t, w0, w1] {
        const double c0 = thread_cpu_seconds();
        sums[static_cast<size_t>(t) * 8] = sum_words(data + w0, w1 - w0, ahead);
        cpu[static_cast<size_t>(t) * 8] = thread_cpu_seconds() - c0;
      });
    }
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
    double slowest = 0.0;
    for (int t = 0; t < threads; ++t) slowest = std::max(slowest, cpu[static_cast<size_t>(t) * 8]);
    cpu_seconds += slowest;
  }
  const double bytes = static_cast<double>(kBufferBytes) * static_cast<double>(state.iterations());
  state.counters["read_GB"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsRate);
  // On a loaded machine, what the threads read while they ran (an upper estimate once the threads
  // outnumber the free cores); equal to read_GB/s on a quiet one.
  state.counters["read_GB_per_cpu_s"] = cpu_seconds > 0.0 ? bytes * 1e-9 / cpu_seconds : 0.0;
}

void stream_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "prefetch"});
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  for (int64_t ahead : {0, 1024, 4096})
    for (int64_t t = 1; t <= hw; t = t < hw && 2 * t > hw ? hw : 2 * t) b->Args({t, ahead});
}

BENCHMARK(BM_StreamRead)
    ->Apply(stream_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinWarmUpTime(0.2)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace
