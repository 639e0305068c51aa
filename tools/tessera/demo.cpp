// `tessera demo`: lists the devices, then computes a built-in graph on each and prints a result
// checksum and the time per device.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "commands.h"
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
    for (const auto& d : Registry::instance().devices()) {
      Context ctx;
      Tensor* h = ops::rms_norm(ctx, demo.x, 1e-5f);
      h = ops::mul_mat(ctx, demo.w1, h);
      h = ops::silu(ctx, h);
      h = ops::mul_mat(ctx, demo.w2, h);
      Tensor* out = ops::soft_max(ctx, h, nullptr, 1.0f / std::sqrt(float(Demo::kDim)));
      Graph graph{out};
      auto backend = d->make_backend();
      const Tensor* missing = nullptr;
      for (const Tensor* n : graph.nodes())
        if (missing == nullptr && !backend->supports(*n)) missing = n;
      if (missing != nullptr) {
        fmt::print("  {:<10} not run: {} is not supported there yet\n", d->name(), op_name(missing->op));
        continue;
      }
      GraphAllocator alloc(d->buffer_type());
      alloc.allocate(graph);
      const auto t0 = std::chrono::steady_clock::now();
      backend->compute(graph);
      backend->synchronize();
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::vector<float> result(static_cast<size_t>(out->nelements()));
      tensor_get(*out, result.data(), 0, out->nbytes());
      double checksum = 0.0;
      for (size_t i = 0; i < result.size(); ++i) checksum += result[i] * static_cast<double>(i % 97);
      fmt::print("  {:<10} checksum {:.6f}  {:.2f} ms\n", d->name(), checksum, ms);
    }
  });
}

}  // namespace tessera::cli
