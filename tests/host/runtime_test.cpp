// What the host runtime adds to the seam's common contract (tests/device/seam_conformance_test.cpp):
// its device count from TESSERA_HOST_DEVICES, errors carried through events, its memory limit and
// address checks, and its op library (CPU kernels on the stream's worker, on a snapshot of the node).
#include "host/runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include "device/backend.h"
#include "device/device.h"
#include "host/oplib.h"
#include "support/cli.h"
#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

using namespace tessera;
using device::EventStatus;
using host::HostRuntime;

namespace {

host::RuntimeOptions options(int devices, size_t memory = 0) {
  host::RuntimeOptions o;
  o.devices = devices;
  o.memory_per_device = memory;
  return o;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HostDevices, AreRegisteredOnlyWhenAskedFor) {
  using testing_support::run_cli;
  const auto two = run_cli("devices", "TESSERA_HOST_DEVICES=2");
  EXPECT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("Host0"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("Host1"), std::string::npos) << two.out;
  EXPECT_EQ(two.out.find("Host2"), std::string::npos) << two.out;
  const auto none = run_cli("devices", "TESSERA_HOST_DEVICES=0");
  EXPECT_EQ(none.out.find("Host0"), std::string::npos) << none.out;
  for (const char* junk : {"lots", "-1", "65", "2x"}) {
    const auto r = run_cli("devices", std::string("TESSERA_HOST_DEVICES=") + junk);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(std::string("TESSERA_HOST_DEVICES='") + junk + "'"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Host0"), std::string::npos) << r.out;
  }
}

TEST(HostRuntime, AWaitCarriesTheRecordingStreamsErrorToTheWaiter) {
  HostRuntime rt(options(2));
  auto s0 = rt.create_stream(0);
  auto s1 = rt.create_stream(1);
  auto ev = rt.create_event(0);
  rt.launch_host_func(*s0, [] { throw Error(ErrorCode::DeviceError, "Host0 work failed"); });
  rt.event_record(*ev, *s0);
  rt.stream_wait_event(*s1, *ev);
  void* mem = rt.allocate(1, 16);
  rt.fill_async(*s1, mem, 1, 16);  // still runs
  EXPECT_EQ(message_of([&] { rt.stream_synchronize(*s1); }), "Host0 work failed");
  EXPECT_EQ(rt.event_query(*ev), EventStatus::Failed);
  EXPECT_EQ(message_of([&] { rt.event_synchronize(*ev); }), "Host0 work failed");
  EXPECT_EQ(message_of([&] { rt.stream_synchronize(*s0); }), "Host0 work failed");
  // Once taken, the error is gone: a new recording completes cleanly.
  rt.event_record(*ev, *s0);
  rt.event_synchronize(*ev);
  EXPECT_EQ(rt.event_query(*ev), EventStatus::Complete);
  char back[16];
  rt.copy_d2h(1, back, mem, 16);
  EXPECT_EQ(back[15], 1);
  rt.free(1, mem);
}

TEST(HostRuntime, AnEventIsPendingUntilTheWorkBeforeItIsDone) {
  // Host functions run on the stream's worker, never on the enqueuing thread: a gate can hold them.
  HostRuntime rt(options(2));
  auto s0 = rt.create_stream(0);
  auto s1 = rt.create_stream(1);
  auto ev = rt.create_event(0);
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  std::atomic<int> observed{-1};
  std::atomic<int> flag{0};
  rt.launch_host_func(*s0, [opened] { opened.wait_for(std::chrono::seconds(20)); });
  rt.launch_host_func(*s0, [&] { flag = 1; });
  rt.event_record(*ev, *s0);
  rt.stream_wait_event(*s1, *ev);
  rt.launch_host_func(*s1, [&] { observed = flag.load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(rt.event_query(*ev), EventStatus::Pending);
  EXPECT_EQ(observed.load(), -1);  // device 1 waits
  gate.set_value();
  rt.stream_synchronize(*s1);
  EXPECT_EQ(observed.load(), 1);
  EXPECT_EQ(rt.event_query(*ev), EventStatus::Complete);
}

TEST(HostRuntime, AllocationsStopAtTheDevicesMemory) {
  HostRuntime rt(options(1, size_t{1} << 20));
  EXPECT_EQ(rt.properties(0).total_memory, size_t{1} << 20);
  void* a = rt.allocate(0, 600 << 10);
  EXPECT_EQ(rt.free_memory(0), (size_t{1} << 20) - (600 << 10));
  const std::string msg = message_of([&] { rt.allocate(0, 600 << 10); });
  EXPECT_NE(msg.find("Host0: cannot allocate 0.6 MiB"), std::string::npos) << msg;
  EXPECT_THROW(rt.virtual_memory(0)->create_physical(size_t{2} << 20), Error);
  rt.free(0, a);
  void* b = rt.allocate(0, 600 << 10);  // room again
  rt.free(0, b);
}

TEST(HostRuntime, AnotherDevicesMemoryIsNotThisDevices) {
  HostRuntime rt(options(2));
  void* on1 = rt.allocate(1, 64);
  char host[64] = {};
  const std::string msg = message_of([&] { rt.copy_h2d(0, on1, host, 64); });
  EXPECT_NE(msg.find("Host0: copy_h2d"), std::string::npos) << msg;
  EXPECT_THROW(rt.copy_d2h(0, host, host, 64), Error);  // plain host memory is no device's
  auto s0 = rt.create_stream(0);
  EXPECT_THROW(rt.fill_async(*s0, on1, 0, 64), Error);
  rt.copy_d2d(0, on1, 1, on1, 0);  // empty copies check nothing
  rt.free(1, on1);
}

namespace {

// Two host devices with the host op library, outside the registry.
struct HostPair {
  std::shared_ptr<HostRuntime> runtime = std::make_shared<HostRuntime>(options(2));
  std::shared_ptr<const device::OpLibrary> ops = host::make_op_library();
  device::AcceleratorDevice d0{runtime, 0, ops}, d1{runtime, 1, ops};
};

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

}  // namespace

TEST(HostOpLibrary, KeepsNativeBlocksAndRunsTheCpuKernelsOnTheStream) {
  HostPair p;
  Context probe;
  EXPECT_FALSE(p.d0.weight_layout().encodes(*probe.new_tensor(DType::Q4_0, 64, 8)));
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, 64, 3);
  Tensor* x = ctx.new_tensor(DType::F32, 64, 2);
  Tensor* y = ops::mul_mat(ctx, w, x);
  auto buffer = place_all(p.d0.buffer_type(), {w, x, y});
  EXPECT_EQ(p.d0.buffer_type().alloc_size(*w), w->nbytes());  // no slack
  std::vector<float> wf(64 * 3), xf(64 * 2);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(i % 5) - 2.0f;
  std::vector<uint8_t> wq(w->nbytes());
  from_f32_row(DType::Q8_0, wf.data(), wq.data(), 64 * 3);
  auto backend = p.d0.make_backend();
  backend->set_async(*w, wq.data(), 0, wq.size());
  backend->set_async(*x, xf.data(), 0, xf.size() * 4);
  Graph graph({y});
  backend->compute(graph);
  std::vector<float> got(3 * 2);
  backend->get_async(*y, got.data(), 0, got.size() * 4);
  backend->synchronize();
  // The CPU backend's fast kernels on the same inputs: the host runtime runs exactly those.
  Context hctx(true);
  Tensor* hw = hctx.new_tensor(DType::Q8_0, 64, 3);
  Tensor* hx = hctx.new_tensor(DType::F32, 64, 2);
  Tensor* hy = ops::mul_mat(hctx, hw, hx);
  tensor_set(*hw, wq.data(), 0, wq.size());
  tensor_set(*hx, xf.data(), 0, xf.size() * 4);
  Graph hgraph({hy});
  cpu::CpuBackend(1, cpu::KernelSet::Fast).compute(hgraph);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<const float*>(hy->data)[i]) << i;
  std::vector<uint8_t> w_back(wq.size());
  tensor_get(*w, w_back.data(), 0, w_back.size());
  EXPECT_EQ(w_back, wq);
}

TEST(HostOpLibrary, AKernelErrorNamesTheOpAndLeavesTheBackendUsable) {
  HostPair p;
  Context ctx;
  Tensor* table = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* rows = ctx.new_tensor(DType::I32, 2);
  Tensor* out = ops::get_rows(ctx, table, rows);
  out->name = "embd";
  auto buffer = place_all(p.d1.buffer_type(), {table, rows, out});
  buffer->clear(0);
  auto backend = p.d1.make_backend();
  const int32_t bad[2] = {1, 3};
  backend->set_async(*rows, bad, 0, sizeof bad);
  Graph graph({out});
  ASSERT_NO_THROW(backend->compute(graph));  // the kernel runs later, on the stream's worker
  const std::string msg = message_of([&] { backend->synchronize(); });
  EXPECT_NE(msg.find("Host1: GET_ROWS (node embd"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
  // The next graph runs.
  const int32_t good[2] = {2, 0};
  const float values[12] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
  backend->set_async(*table, values, 0, sizeof values);
  backend->set_async(*rows, good, 0, sizeof good);
  backend->compute(graph);
  float got[8];
  backend->get_async(*out, got, 0, sizeof got);
  backend->synchronize();
  const float expect[8] = {20, 21, 22, 23, 0, 1, 2, 3};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], expect[i]) << i;
}

TEST(HostOpLibrary, AKernelReadsTheNodeAsItWasWhenEnqueued) {
  // The caller may rewrite its descriptors (as the scheduler swaps sources) once compute returns.
  HostPair p;
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  Tensor* b = ctx.new_tensor(DType::F32, 4);
  Tensor* c = ctx.new_tensor(DType::F32, 4);
  Tensor* sum = ops::add(ctx, a, b);
  auto buffer = place_all(p.d0.buffer_type(), {a, b, c, sum});
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40}, cv[4] = {100, 200, 300, 400};
  tensor_set(*a, av, 0, sizeof av);
  tensor_set(*b, bv, 0, sizeof bv);
  tensor_set(*c, cv, 0, sizeof cv);
  auto backend = p.d0.make_backend();
  auto* db = dynamic_cast<device::DeviceBackend*>(backend.get());
  ASSERT_NE(db, nullptr);
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  db->host_func(nullptr, [opened] { opened.wait_for(std::chrono::seconds(20)); });  // holds the stream
  Graph graph({sum});
  backend->compute(graph);
  sum->src[1] = c;  // rewritten before the kernel has run
  b->ne[0] = 2;
  gate.set_value();
  backend->synchronize();
  float got[4];
  tensor_get(*sum, got, 0, sizeof got);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], av[i] + bv[i]) << i;
}

TEST(HostDevices, RunAStoryWithEveryLayerOnHost0AsTheCpuDoes) {
  using testing_support::run_cli;
  const std::string args = std::string("run -m ") + TESSERA_SHARED_DIR +
                           "/models/stories260K.gguf -p 'Once upon a time' -n 40 --temp 0";
  const auto cpu = run_cli(args);
  const auto host = run_cli(args + " -ngl 99 --device Host0 --report", "TESSERA_HOST_DEVICES=2");
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  ASSERT_EQ(host.code, 0) << host.out;
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
      "she "
      "saw a big, red ball.";
  EXPECT_NE(cpu.out.find(story), std::string::npos) << cpu.out;
  EXPECT_NE(host.out.find(story), std::string::npos) << host.out;
  EXPECT_NE(host.out.find("Host0 — "), std::string::npos) << host.out;  // the layers ran there
  EXPECT_NE(host.out.find("no CPU fallbacks"), std::string::npos) << host.out;
}
