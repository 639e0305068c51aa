// MUL_MAT on the CPU fast kernels: K = M = 4096 weights of each type times N columns of f32.
// Reports GFLOP/s (2*M*N*K per run) and the weight bytes streamed per second.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace {

using namespace tessera;

constexpr int64_t kK = 4096, kM = 4096;
constexpr DType kTypes[] = {DType::Q4_0, DType::Q8_0,   DType::F16,   DType::F32,  DType::Q4_K,
                            DType::Q6_K, DType::Q5_K,   DType::Q3_K,  DType::Q2_K, DType::Q4_1,
                            DType::Q5_0, DType::IQ4_NL, DType::IQ4_XS};

void fill_random(Tensor* t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(t->ne[0]));
  for (int64_t r = 0; r < t->nrows(); ++r) {
    for (auto& x : row) x = dist(rng);
    from_f32_row(t->type, row.data(), static_cast<char*>(t->data) + r * t->row_size(), t->ne[0]);
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

}  // namespace
