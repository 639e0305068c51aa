// MUL_MAT on the CPU fast kernels: K = M = 4096 weights of each type times N columns of f32.
// Reports GFLOP/s (2*M*N*K per run) and the weight bytes streamed per second.
#include <benchmark/benchmark.h>

#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace {

using namespace tessera;

constexpr int64_t kK = 4096, kM = 4096;
constexpr DType kTypes[] = {DType::Q4_0,    DType::Q8_0,   DType::F16,    DType::F32,     DType::Q4_K,
                            DType::Q6_K,    DType::Q5_K,   DType::Q3_K,   DType::Q2_K,    DType::Q4_1,
                            DType::Q5_0,    DType::IQ4_NL, DType::IQ4_XS, DType::IQ2_XXS, DType::IQ3_S,
                            DType::IQ3_XXS, DType::IQ2_XS};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void fill_random(Tensor* t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(t->ne[0]));
  for (int64_t r = 0; r < t->nrows(); ++r) {
    char* dst = static_cast<char*>(t->data) + r * t->row_size();
    if (is_grid_iquant(t->type)) {  // not written from floats: random blocks
      random_blocks(t->type, seed * 1000003u + static_cast<uint64_t>(r), 1.0f, dst, t->ne[0]);
      continue;
    }
    for (auto& x : row) x = dist(rng);
    from_f32_row(t->type, row.data(), dst, t->ne[0]);
  }
}

// args: weight type index, N, threads
void BM_MulMat(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const int64_t n = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  Context ctx(true);
  Tensor* a = ctx.new_tensor(type, kK, kM);
  Tensor* b = ctx.new_tensor(DType::F32, kK, n);
  fill_random(a, 1);
  fill_random(b, 2);
  Tensor* out = ops::mul_mat(ctx, a, b);
  Graph graph({out});
  cpu::CpuBackend backend(threads, cpu::KernelSet::Fast);
  backend.compute(graph);  // warm up: scratch memory, page faults
  for (auto _ : state) {
    backend.compute(graph);
    benchmark::DoNotOptimize(out->data);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(name(type)));
  const double flops = 2.0 * static_cast<double>(kM) * static_cast<double>(n) * static_cast<double>(kK);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weights_GB/s"] = benchmark::Counter(static_cast<double>(a->nbytes()) * 1e-9,
                                                      benchmark::Counter::kIsIterationInvariantRate);
}

void mul_mat_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "N", "threads"});
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t)
    for (int64_t n : {1, 32, 512}) b->Args({t, n, 2});
  for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t)
    for (int64_t n : {1, 32, 512}) b->Args({t, n, 1});
}

BENCHMARK(BM_MulMat)->Apply(mul_mat_args)->UseRealTime()->Unit(benchmark::kMillisecond);

// Generation's case: matrix-vector products over more weights than the caches hold (about 96 MB of
// [1024 x 2816] and [2816 x 1024] matrices, m250's feed-forward shapes), so the weights stream from
// memory as they do once per token. GB/s of weights, to hold against BM_StreamRead (stream_bench.cpp);
// weights_GB_per_cpu_s divides by the process's CPU time per thread instead (steadier on a loaded
// machine; it counts the workers' waits too).
// args: weight type index, threads
// args: weight type index, threads, interleaved (1: the weights in cpu::interleaved_buffer_type(),
// as a model on the CPU keeps its Q4_0 / Q8_0 / F16 matrices)
void BM_MatVecFromMemory(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  const bool interleaved = state.range(2) != 0;
  constexpr int64_t kDim = 1024, kFf = 2816;
  constexpr double kTotalBytes = 96e6;
  Context ctx(true);
  Context weights(false);
  std::unique_ptr<Buffer> buffer;
  if (interleaved) buffer = cpu::interleaved_buffer_type().allocate(static_cast<size_t>(kTotalBytes * 1.1));
  size_t offset = 0;
  Tensor* x = ctx.new_tensor(DType::F32, kDim);
  Tensor* h = ctx.new_tensor(DType::F32, kFf);
  fill_random(x, 2);
  fill_random(h, 3);
  std::vector<Tensor*> outs;
  double bytes = 0.0;
  for (int i = 0; bytes < kTotalBytes; ++i) {
    Tensor* a = i % 2 == 0 ? ctx.new_tensor(type, kDim, kFf) : ctx.new_tensor(type, kFf, kDim);
    fill_random(a, 10 + static_cast<uint32_t>(i));
    if (interleaved) {  // the same values, moved into the interleaved buffer
      Tensor* w = weights.new_tensor(type, a->ne[0], a->ne[1]);
      buffer->place(*w, offset);
      offset += (a->nbytes() + 63) / 64 * 64;
      tensor_set(*w, a->data, 0, a->nbytes());
      a = w;
    }
    outs.push_back(ops::mul_mat(ctx, a, i % 2 == 0 ? x : h));
    bytes += static_cast<double>(a->nbytes());
  }
  Graph graph(outs);
  cpu::CpuBackend backend(threads, cpu::KernelSet::Fast);
  backend.compute(graph);  // warm up
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    backend.compute(graph);
    benchmark::ClobberMemory();
  }
  const double cpu_seconds = process_cpu_seconds() - cpu0;
  state.SetLabel(std::string(name(type)) + (interleaved ? " interleaved" : ""));
  state.counters["weights_GB"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weights_GB_per_cpu_s"] =
      bytes * 1e-9 * static_cast<double>(state.iterations()) * threads / cpu_seconds;
}

void mat_vec_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "threads", "interleaved"});
  for (int64_t threads : {1, 2})
    for (int64_t t = 0; t < static_cast<int64_t>(std::size(kTypes)); ++t) {
      b->Args({t, threads, 0});
      if (kTypes[t] == DType::Q4_0 || kTypes[t] == DType::Q8_0 || kTypes[t] == DType::F16)
        b->Args({t, threads, 1});
    }
}

BENCHMARK(BM_MatVecFromMemory)->Apply(mat_vec_args)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
