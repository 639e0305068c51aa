// `tessera demo`: lists the devices, then computes a built-in graph on each and prints a result
// checksum and the time per device.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "commands.h"
#include "tessera/scheduler.h"
#include "tessera/tessera.h"

namespace tessera::cli {
namespace {

// One transformer-style block: RMS_NORM -> MUL_MAT (Q8_0 weights) -> SILU -> MUL_MAT -> SOFT_MAX.
struct Demo {
  Context weights{true};
  Tensor* w1;
  Tensor* w2;
  Tensor* x;
  static constexpr int kDim = 512, kHidden = 1024, kTokens = 64;

  Demo() {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto fill = [&](Tensor* t) {
      std::vector<float> v(static_cast<size_t>(t->nelements()));
      for (auto& e : v) e = dist(rng);
      for (int64_t r = 0; r < t->nrows(); ++r)
        from_f32_row(t->type, v.data() + r * t->ne[0], t->at(0, r), t->ne[0]);
    };
    w1 = weights.new_tensor(DType::Q8_0, kDim, kHidden);
    w2 = weights.new_tensor(DType::Q8_0, kHidden, kDim);
    x = weights.new_tensor(DType::F32, kDim, kTokens);
    fill(w1);
    fill(w2);
    fill(x);
  }
};

}  // namespace

void add_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "List devices, then run a built-in demo graph on each");
  cmd->callback([] {
    Demo demo;
    fmt::print("devices:\n");
    for (const auto& d : Registry::instance().devices())
      fmt::print("  {:<10} {:<12} {}\n", d->name(), to_string(d->kind()), d->description());
    fmt::print(
        "\ndemo graph: rms_norm -> mul_mat {}x{} q8_0 -> silu -> mul_mat {}x{} q8_0 -> soft_max, {} tokens\n",
        Demo::kDim, Demo::kHidden, Demo::kHidden, Demo::kDim, Demo::kTokens);
    cpu::CpuBackend cpu_backend;
    for (const auto& d : Registry::instance().devices()) {
      // The inputs and weights go into the device's own memory (its weight layout applies); the
      // scheduler runs what the device cannot on the CPU.
      Context wctx;
      std::vector<Tensor*> leafs;
      for (const Tensor* src : {demo.w1, demo.w2, demo.x})
        leafs.push_back(wctx.new_tensor(src->type, std::span<const int64_t>(src->ne.data(), 4)));
      BufferType& type = d->buffer_type();
      size_t total = 0;
      for (const Tensor* t : leafs)
        total += (type.alloc_size(*t) + type.alignment() - 1) / type.alignment() * type.alignment();
      auto buffer = type.allocate(total);
      size_t offset = 0;
      for (size_t i = 0; i < leafs.size(); ++i) {
        buffer->place(*leafs[i], offset);
        offset += (type.alloc_size(*leafs[i]) + type.alignment() - 1) / type.alignment() * type.alignment();
        const Tensor* src = i == 0 ? demo.w1 : i == 1 ? demo.w2 : demo.x;
        tensor_set(*leafs[i], src->data, 0, src->nbytes());
      }
      Context ctx;
      Tensor* h = ops::rms_norm(ctx, leafs[2], 1e-5f);
      h = ops::mul_mat(ctx, leafs[0], h);
      h = ops::silu(ctx, h);
      h = ops::mul_mat(ctx, leafs[1], h);
      Tensor* out = ops::soft_max(ctx, h, nullptr, 1.0f / std::sqrt(float(Demo::kDim)));
      Graph graph{out};
      auto backend = d->make_backend();
      Scheduler sched({backend.get(), &cpu_backend});
      GraphAllocator alloc(type);
      double ms = 0.0;
      for (int run = 0; run < 2; ++run) {  // the first run compiles device programs: time the second
        const auto t0 = std::chrono::steady_clock::now();
        if (d->kind() == DeviceKind::Cpu) {
          alloc.allocate(graph);
          backend->compute(graph);
        } else {
          sched.compute(graph);
        }
        backend->synchronize();
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
      std::vector<float> result(static_cast<size_t>(out->nelements()));
      tensor_get(d->kind() == DeviceKind::Cpu ? *out : sched.result(*out), result.data(), 0, out->nbytes());
      double checksum = 0.0;
      for (size_t i = 0; i < result.size(); ++i) checksum += result[i] * static_cast<double>(i % 97);
      fmt::print(
          "  {:<10} checksum {:.6f}  {:.2f} ms{}\n", d->name(), checksum, ms,
          sched.fallbacks().empty() ? "" : fmt::format("  ({} nodes on the CPU)", sched.fallbacks().size()));
    }
  });
}

}  // namespace tessera::cli
