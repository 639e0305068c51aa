// What running a graph costs beyond its kernels, on a decoder-like chain of small nodes built in a
// fresh Context per iteration (as a generation step builds them): the graph allocator plans every
// call; the Scheduler reuses its plan while the shape repeats, and builds one when it changes.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "tessera/allocator.h"
#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/scheduler.h"

namespace {

using namespace tessera;

constexpr int64_t kDim = 64;
constexpr int kLayers = 16;  // 8 nodes each, about the size of a small model's token graph

struct Weights {
  Context ctx;
  std::vector<Tensor*> w, norm;
  std::unique_ptr<Buffer> buffer;
  Weights() {
    for (int l = 0; l < kLayers; ++l) {
      w.push_back(ctx.new_tensor(DType::F32, kDim, kDim));
      norm.push_back(ctx.new_tensor(DType::F32, kDim));
    }
    size_t total = 0;
    for (const auto& t : ctx.tensors()) total += (t.nbytes() + 63) / 64 * 64;
    buffer = host_buffer_type().allocate(total);
    buffer->clear(0);
    size_t offset = 0;
    for (auto& t : ctx.tensors()) {
      buffer->place(t, offset);
      offset += (t.nbytes() + 63) / 64 * 64;
    }
  }
};

// x -> per layer: rms_norm, mul(norm), mul_mat(w), silu, reshape, cont(transpose(transpose)), add(x).
Tensor* build(Context& ctx, const Weights& weights, Tensor* x) {
  for (int l = 0; l < kLayers; ++l) {
    Tensor* h = ops::mul(ctx, ops::rms_norm(ctx, x, 1e-5f), weights.norm[l]);
    h = ops::silu(ctx, ops::mul_mat(ctx, weights.w[l], h));
    h = ops::cont(ctx, ops::transpose(ctx, ops::transpose(ctx, h)));
    x = ops::add(ctx, x, ops::reshape(ctx, h, kDim, x->ne[1]));
  }
  return x;
}

struct Inputs {
  std::unique_ptr<Buffer> buffer = host_buffer_type().allocate(kDim * 64 * 4);
  Tensor* make(Context& ctx, int64_t n) {
    Tensor* x = ctx.new_tensor(DType::F32, kDim, n);
    buffer->place(*x, 0);
    return x;
  }
};

// Columns of x per call: 1 always (range 0), or cycling through 1..40 (range 1: a new shape per
// call, more shapes than the Scheduler's plan cache holds).
int64_t columns(const benchmark::State& state, int64_t call) { return state.range(0) ? 1 + call % 40 : 1; }

void BM_Allocator(benchmark::State& state) {
  Weights weights;
  Inputs inputs;
  cpu::CpuBackend cpu(1);
  GraphAllocator alloc(host_buffer_type());
  int64_t call = 0;
  for (auto _ : state) {
    Context ctx;
    Graph graph{build(ctx, weights, inputs.make(ctx, columns(state, call++)))};
    alloc.allocate(graph);
    cpu.compute(graph);
  }
}
BENCHMARK(BM_Allocator)->Arg(0)->Arg(1);

void BM_Scheduler(benchmark::State& state) {
  Weights weights;
  Inputs inputs;
  cpu::CpuBackend cpu(1);
  Scheduler sched({&cpu});
  int64_t call = 0;
  for (auto _ : state) {
    Context ctx;
    Graph graph{build(ctx, weights, inputs.make(ctx, columns(state, call++)))};
    sched.compute(graph);
  }
  state.counters["plans"] = static_cast<double>(sched.plans_built());
}
BENCHMARK(BM_Scheduler)->Arg(0)->Arg(1);

}  // namespace
