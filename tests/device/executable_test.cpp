// Executable splits (src/device/executable.h): DeviceBackend prepares a split once per shape,
// launches it, captures it when the shape repeats and replays it after; a library's fused chain
// (the host runtime's RMS_NORM + MUL) gives the node-by-node bits. Runs on host-runtime devices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cpu/kernels.h"
#include "device/backend.h"
#include "device/device.h"
#include "host/oplib.h"
#include "host/runtime.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/scheduler.h"

using namespace tessera;

namespace {

host::RuntimeOptions two_devices() {
  host::RuntimeOptions o;
  o.devices = 2;
  return o;
}

std::unique_ptr<Buffer> place_all(BufferType& type, const std::vector<Tensor*>& tensors) {
  size_t total = 0;
  for (Tensor* t : tensors) total += (type.alloc_size(*t) + 255) / 256 * 256;
  auto buffer = type.allocate(total);
  size_t offset = 0;
  for (Tensor* t : tensors) {
    buffer->place(*t, offset);
    offset += (type.alloc_size(*t) + 255) / 256 * 256;
  }
  return buffer;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// What a library's executables were asked to do.
struct Calls {
  int prepare = 0, launch = 0, capture = 0, replay = 0;
};

// Wraps the host library's executable and records every call; "captures" by remembering that it
// did, and replays by launching again (what a graph replay computes).
class RecordingExecutable final : public device::Executable {
 public:
  RecordingExecutable(std::unique_ptr<device::Executable> inner, Calls& calls)
      : inner_(std::move(inner)), calls_(&calls) {}
  void launch(const device::OpContext& ctx, const device::SplitView& split) override {
    ++calls_->launch;
    inner_->launch(ctx, split);
  }
  bool capture(const device::OpContext& ctx, const device::SplitView& split) override {
    ++calls_->capture;
    inner_->launch(ctx, split);
    return true;
  }
  void replay(const device::OpContext& ctx, const device::SplitView& split) override {
    ++calls_->replay;
    inner_->launch(ctx, split);
  }

 private:
  std::unique_ptr<device::Executable> inner_;
  Calls* calls_;
};

bool supports_any(const Tensor& node) { return cpu::supports_node(node); }
void never_run(const device::OpContext&, Tensor&) { FAIL() << "the recording library runs through prepare"; }

class RecordingLibrary final : public device::OpLibrary {
 public:
  explicit RecordingLibrary(Calls& calls) : calls_(&calls), inner_(host::make_op_library()) {
    for (int i = 0; i < kOpCount; ++i) set(static_cast<Op>(i), {&supports_any, &never_run});
  }
  std::unique_ptr<device::Executable> prepare(const device::SplitView& split) const override {
    ++calls_->prepare;
    return std::make_unique<RecordingExecutable>(inner_->prepare(split), *calls_);
  }

 private:
  Calls* calls_;
  std::shared_ptr<const device::OpLibrary> inner_;
};

// y = MUL(RMS_NORM(x), w) + x over `tokens` rows of 64, on the device; returns y.
std::vector<float> norm_graph(Device& dev, Backend& backend, int64_t tokens, uint32_t seed,
                              bool norm_is_output = false, std::vector<float>* norm_out = nullptr) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 64, tokens);
  Tensor* w = ctx.new_tensor(DType::F32, 64);
  Tensor* n = ops::rms_norm(ctx, x, 1e-5f);
  Tensor* h = ops::mul(ctx, n, w);
  Tensor* y = ops::add(ctx, h, x);
  auto buffer = place_all(dev.buffer_type(), {x, w, n, h, y});
  const auto xs = random_floats(static_cast<size_t>(64 * tokens), seed);
  const auto ws = random_floats(64, seed + 1);
  backend.set_async(*x, xs.data(), 0, xs.size() * 4);
  backend.set_async(*w, ws.data(), 0, ws.size() * 4);
  Graph graph = norm_is_output ? Graph({y, n}) : Graph({y});
  backend.compute(graph);
  std::vector<float> out(xs.size());
  backend.get_async(*y, out.data(), 0, out.size() * 4);
  if (norm_out != nullptr) {
    norm_out->resize(xs.size());
    backend.get_async(*n, norm_out->data(), 0, xs.size() * 4);
  }
  backend.synchronize();
  return out;
}

// The same graph node by node on the CPU backend (its fast kernels, as the host library's).
std::vector<float> norm_graph_on_cpu(int64_t tokens, uint32_t seed, std::vector<float>* norm_out = nullptr) {
  Context ctx(true);
  Tensor* x = ctx.new_tensor(DType::F32, 64, tokens);
  Tensor* w = ctx.new_tensor(DType::F32, 64);
  Tensor* n = ops::rms_norm(ctx, x, 1e-5f);
  Tensor* y = ops::add(ctx, ops::mul(ctx, n, w), x);
  const auto xs = random_floats(static_cast<size_t>(64 * tokens), seed);
  const auto ws = random_floats(64, seed + 1);
  tensor_set(*x, xs.data(), 0, xs.size() * 4);
  tensor_set(*w, ws.data(), 0, ws.size() * 4);
  Graph graph({y, n});
  cpu::CpuBackend cpu(2);
  cpu.compute(graph);
  std::vector<float> out(xs.size());
  tensor_get(*y, out.data(), 0, out.size() * 4);
  if (norm_out != nullptr) {
    norm_out->resize(xs.size());
    tensor_get(*n, norm_out->data(), 0, xs.size() * 4);
  }
  return out;
}

}  // namespace

TEST(Executable, PreparedOncePerShapeCapturedOnTheRepeatThenReplayed) {
  Calls calls;
  auto runtime = std::make_shared<host::HostRuntime>(two_devices());
  auto lib = std::make_shared<RecordingLibrary>(calls);
  device::AcceleratorDevice dev(runtime, 0, lib);
  auto backend = dev.make_backend();
  auto& db = static_cast<device::DeviceBackend&>(*backend);
  // Generation: one shape, fresh graphs and data every step.
  for (uint32_t step = 0; step < 5; ++step)
    ASSERT_EQ(norm_graph(dev, *backend, 1, step), norm_graph_on_cpu(1, step)) << "step " << step;
  EXPECT_EQ(calls.prepare, 1);
  EXPECT_EQ(calls.launch, 1);
  EXPECT_EQ(calls.capture, 1);
  EXPECT_EQ(calls.replay, 3);
  // A prompt: a new shape is prepared, launched, then captured when it repeats.
  EXPECT_EQ(norm_graph(dev, *backend, 7, 50), norm_graph_on_cpu(7, 50));
  EXPECT_EQ(calls.prepare, 2);
  EXPECT_EQ(calls.launch, 2);
  EXPECT_EQ(norm_graph(dev, *backend, 7, 51), norm_graph_on_cpu(7, 51));
  EXPECT_EQ(calls.capture, 2);
  // Back to generation: still prepared, still captured.
  EXPECT_EQ(norm_graph(dev, *backend, 1, 60), norm_graph_on_cpu(1, 60));
  EXPECT_EQ(calls.prepare, 2);
  EXPECT_EQ(calls.replay, 4);
  // Another set of outputs is another split.
  norm_graph(dev, *backend, 1, 61, true);
  EXPECT_EQ(calls.prepare, 3);
  const auto& s = db.executable_stats();
  EXPECT_EQ(s.prepared, 3u);
  EXPECT_EQ(s.launched + s.captured + s.replayed, 9u);
}

TEST(Executable, TheSchedulersSplitsArePreparedOncePerShape) {
  Calls calls;
  auto runtime = std::make_shared<host::HostRuntime>(two_devices());
  auto lib = std::make_shared<RecordingLibrary>(calls);
  device::AcceleratorDevice dev(runtime, 0, lib);
  auto backend = dev.make_backend();
  cpu::CpuBackend cpu(1);
  Scheduler sched({backend.get(), &cpu});
  // A weight on the device; each step's input in host memory, in a fresh context.
  Context weights;
  Tensor* w = weights.new_tensor(DType::F32, 64);
  w->flags |= kFlagWeight;
  auto wbuf = place_all(dev.buffer_type(), {w});
  const auto ws = random_floats(64, 3);
  tensor_set(*w, ws.data(), 0, ws.size() * 4);
  for (int step = 0; step < 6; ++step) {
    const int64_t tokens = step < 4 ? 1 : 3;
    Context inputs(true), ctx;  // the input in host memory, the nodes in the scheduler's
    Tensor* x = inputs.new_tensor(DType::F32, 64, tokens);
    const auto xs = random_floats(static_cast<size_t>(64 * tokens), 100 + static_cast<uint32_t>(step));
    tensor_set(*x, xs.data(), 0, xs.size() * 4);
    Tensor* y = ops::mul(ctx, ops::rms_norm(ctx, x, 1e-5f), w);  // runs where w is
    sched.compute(Graph({y}));
    EXPECT_EQ(sched.backend_of(y), backend.get()) << sched.report();
    std::vector<float> out(xs.size());
    tensor_get(sched.result(*y), out.data(), 0, out.size() * 4);
    for (int64_t r = 0; r < tokens; ++r) {
      double ss = 0;
      for (int i = 0; i < 64; ++i) ss += static_cast<double>(xs[r * 64 + i] * xs[r * 64 + i]);
      const float scale = 1.0f / std::sqrt(static_cast<float>(ss / 64) + 1e-5f);
      for (int i = 0; i < 64; ++i) ASSERT_EQ(out[r * 64 + i], (xs[r * 64 + i] * scale) * ws[i]);
    }
  }
  EXPECT_EQ(calls.prepare, 2);  // one per shape
  EXPECT_EQ(calls.launch, 2);
  EXPECT_EQ(calls.capture, 2);
  EXPECT_EQ(calls.replay, 2);
}

TEST(Executable, TheHostLibraryFusesRmsNormAndMulBitForBit) {
  auto runtime = std::make_shared<host::HostRuntime>(two_devices());
  device::AcceleratorDevice dev(runtime, 0, host::make_op_library());
  auto backend = dev.make_backend();
  auto& db = static_cast<device::DeviceBackend&>(*backend);
  for (int64_t tokens : {1, 5, 33}) {
    EXPECT_EQ(norm_graph(dev, *backend, tokens, 7), norm_graph_on_cpu(tokens, 7)) << tokens << " tokens";
    EXPECT_EQ(db.executable_stats().fused_nodes, 1u);
  }
  // The norm read after the split: not fused, and its value is there.
  std::vector<float> norm, cpu_norm;
  EXPECT_EQ(norm_graph(dev, *backend, 5, 9, true, &norm), norm_graph_on_cpu(5, 9, &cpu_norm));
  EXPECT_EQ(db.executable_stats().fused_nodes, 0u);
  EXPECT_EQ(norm, cpu_norm);
}
