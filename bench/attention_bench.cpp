// One layer's attention over an F16 KV cache on the CPU fast kernels: the graph ops MUL_MAT(K, Q),
// SOFT_MAX (causal mask, scale), MUL_MAT(V, KQ) and the head merge (mode 0, what the model graphs
// built before FLASH_ATTN_EXT replaced them), FLASH_ATTN_EXT as the model graphs build it (mode 1:
// the CPU kernel's choice, the composed ops per group of query rows), and FLASH_ATTN_EXT with the
// online softmax asked for (mode 2). Shapes of the 250M Llama of the benchmarks: head size 64, 16
// query heads over 4 K/V heads; n_kv cells in the context and n_q queries (1: a generation step).
#include <benchmark/benchmark.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"

namespace {

using namespace tessera;

constexpr int64_t kHead = 64, kHeads = 16, kKvHeads = 4;

void fill_random(Tensor* t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(t->nelements()));
  for (auto& x : v) x = dist(rng);
  if (t->type == DType::F16)
    fp32_to_fp16_row(v.data(), static_cast<uint16_t*>(t->data), t->nelements());
  else
    std::copy(v.begin(), v.end(), static_cast<float*>(t->data));
}

// args: mode (0 graph ops, 1 FLASH_ATTN_EXT, 2 its online softmax), n_kv, n_q, threads
void BM_Attention(benchmark::State& state) {
  const int64_t mode = state.range(0);
  const int64_t n_kv = state.range(1), n_q = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  Context ctx(true);
  Tensor* q = ctx.new_tensor(DType::F32, kHead, kHeads, n_q);           // as ROPE leaves it
  Tensor* k = ctx.new_tensor(DType::F16, kHead, n_kv, kKvHeads);        // the cache's K
  Tensor* v_cells = ctx.new_tensor(DType::F16, n_kv, kHead, kKvHeads);  // the cache's V, transposed
  Tensor* mask = ctx.new_tensor(DType::F32, n_kv, n_q);
  fill_random(q, 1);
  fill_random(k, 2);
  fill_random(v_cells, 3);
  auto* m = static_cast<float*>(mask->data);
  for (int64_t i = 0; i < n_q; ++i)  // causal: query i sees cells [0, n_kv - n_q + i]
    for (int64_t j = 0; j < n_kv; ++j)
      m[i * n_kv + j] = j > n_kv - n_q + i ? -std::numeric_limits<float>::infinity() : 0.0f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHead));
  Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);
  Tensor* out = nullptr;
  if (mode > 0) {
    out = ops::flash_attn_ext(ctx, qp, k, ops::transpose(ctx, v_cells), mask, scale, 0.0f, 0.0f, mode == 2);
  } else {
    Tensor* kq = ops::soft_max(ctx, ops::mul_mat(ctx, k, qp), mask, scale);
    out = ops::cont(ctx, ops::permute(ctx, ops::mul_mat(ctx, v_cells, kq), 0, 2, 1, 3));
  }
  Graph graph({out});
  cpu::CpuBackend backend(threads, cpu::KernelSet::Fast);
  backend.compute(graph);  // warm up
  for (auto _ : state) {
    backend.compute(graph);
    benchmark::DoNotOptimize(out->data);
  }
  // K and V bytes one run reads
  state.SetBytesProcessed(state.iterations() * 2 * k->nbytes());
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t n_kv : {512, 2048, 4096})
    for (int mode : {0, 1, 2}) b->Args({mode, n_kv, 1, 1});
  for (int64_t n_kv : {64, 128, 256, 512})
    for (int mode : {0, 1, 2}) b->Args({mode, n_kv, 1, 2});
  for (int64_t n_kv : {64, 128, 256})
    for (int mode : {0, 1, 2}) b->Args({mode, n_kv, 1, 1});
  for (int64_t n_kv : {512, 4096})
    for (int mode : {0, 1, 2}) b->Args({mode, n_kv, 512, 1});
  for (int mode : {0, 1, 2}) b->Args({mode, 4096, 512, 2});
  b->ArgNames({"mode", "n_kv", "n_q", "threads"});
}

BENCHMARK(BM_Attention)->Apply(args)->Unit(benchmark::kMicrosecond);

// A server's generation step: one query row for each of 8 sequences of `cells` cells each, through
// FLASH_ATTN_EXT. Placement 0: the cells interleaved (cell j holds sequence j % 8, as first-fit
// placement leaves a batch of one token per sequence), every row's span the whole cache;
// placement 1: each sequence in its own range of 1024 cells (the engine's slots on the CPU), each
// row over its own span.
// args: placement, cells, threads
void BM_ServerStep(benchmark::State& state) {
  constexpr int64_t kSeqs = 8, kRange = 1024;
  const bool ranges = state.range(0) == 1;
  const int64_t cells = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const int64_t n_kv = ranges ? (kSeqs - 1) * kRange + cells : kSeqs * cells;
  Context ctx(true);
  Tensor* q = ctx.new_tensor(DType::F32, kHead, kHeads, kSeqs);
  Tensor* k = ctx.new_tensor(DType::F16, kHead, n_kv, kKvHeads);
  Tensor* v_cells = ctx.new_tensor(DType::F16, n_kv, kHead, kKvHeads);
  Tensor* mask = ctx.new_tensor(DType::F32, n_kv, kSeqs);
  fill_random(q, 1);
  fill_random(k, 2);
  fill_random(v_cells, 3);
  auto* m = static_cast<float*>(mask->data);
  for (int64_t s = 0; s < kSeqs; ++s)
    for (int64_t j = 0; j < n_kv; ++j) {
      const bool mine = ranges ? j >= s * kRange && j < s * kRange + cells : j % kSeqs == s;
      m[s * n_kv + j] = mine ? 0.0f : -std::numeric_limits<float>::infinity();
    }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHead));
  Tensor* out = ops::flash_attn_ext(ctx, ops::permute(ctx, q, 0, 2, 1, 3), k, ops::transpose(ctx, v_cells),
                                    mask, scale);
  Graph graph({out});
  cpu::CpuBackend backend(threads, cpu::KernelSet::Fast);
  backend.compute(graph);  // warm up
  for (auto _ : state) {
    backend.compute(graph);
    benchmark::DoNotOptimize(out->data);
  }
}

BENCHMARK(BM_ServerStep)
    ->ArgsProduct({{0, 1}, {64, 128, 512}, {1, 2}})
    ->ArgNames({"placement", "cells", "threads"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
