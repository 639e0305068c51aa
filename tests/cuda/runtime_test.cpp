// The CUDA runtime over the two-device fake driver (tests/cuda/fake_libcuda.c: host memory, work
// done at once): discovery, contexts retained at first use, memory and its bounds, copies of every
// kind, non-blocking streams only, host functions and their errors, events, the VMM pool on the
// driver's virtual memory, and every failing call reported as an Error naming the device, the call
// and the CUDA error. What only a GPU shows (real asynchrony, kernels) waits for a GPU session.
#include "cuda/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cuda/fake_cuda.h"
#include "cuda/oplib.h"
#include "device/device.h"
#include "device/pool.h"
#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/ops.h"
#include "tessera/runtime_notes.h"

using namespace tessera;
using device::EventStatus;
using tessera::test::fake_counter;
using tessera::test::FakeFailure;

namespace {

std::shared_ptr<cuda::CudaRuntime> make_runtime() {
  const auto& load = tessera::test::fake_devices();
  if (!load.driver) throw Error(ErrorCode::DeviceError, load.reason);
  return std::make_shared<cuda::CudaRuntime>(load.driver, load.device_count);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// The message of the Error fn throws, checked to be `code`.
template <typename Fn>
std::string error_of(Fn&& fn, ErrorCode code = ErrorCode::DeviceError) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

class CudaRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(tessera::test::fake_devices().driver, nullptr) << tessera::test::fake_devices().reason;
    rt = make_runtime();
  }
  void TearDown() override {
    // Nothing ever ran on the legacy default stream, and every stream was non-blocking.
    EXPECT_EQ(fake_counter("fake_cuda_null_stream_uses"), 0);
    EXPECT_EQ(fake_counter("fake_cuda_blocking_streams"), 0);
  }
  std::shared_ptr<cuda::CudaRuntime> rt;
};

}  // namespace

TEST_F(CudaRuntimeTest, DiscoversEveryDeviceWithItsPropertiesWithoutMakingAContext) {
  const int before = fake_counter("fake_cuda_retained_contexts");
  auto fresh = make_runtime();
  EXPECT_EQ(fake_counter("fake_cuda_retained_contexts"), before);  // listing retains nothing
  ASSERT_EQ(fresh->device_count(), 2);
  EXPECT_EQ(fresh->name(), "CUDA");
  const auto& p0 = fresh->properties(0);
  EXPECT_EQ(p0.name, "CUDA0");
  EXPECT_EQ(p0.kind, DeviceKind::Gpu);
  EXPECT_EQ(p0.total_memory, size_t{1} << 30);
  EXPECT_EQ(p0.description, "Fake GPU Alpha (sm_90, 132 SMs, PCI 0000:41:00.0, CUDA driver 12.4)");
  EXPECT_EQ(fresh->properties(1).name, "CUDA1");
  EXPECT_EQ(fresh->properties(1).total_memory, size_t{2} << 30);
  EXPECT_EQ(fresh->info(0).arch(), 90);
  EXPECT_EQ(fresh->info(1).arch(), 86);
  EXPECT_EQ(fresh->info(1).model, "Fake GPU Beta");
  EXPECT_EQ(fresh->info(1).multiprocessors, 84);
  EXPECT_TRUE(fresh->info(0).virtual_memory);
  // The first call that needs a device's context retains it; the runtime releases it when it goes.
  EXPECT_EQ(fresh->free_memory(1), size_t{2} << 30);
  EXPECT_EQ(fake_counter("fake_cuda_retained_contexts"), before + 1);
  fresh.reset();
  EXPECT_EQ(fake_counter("fake_cuda_retained_contexts"), before);
}

TEST_F(CudaRuntimeTest, AFailingDiscoveryQueryNamesTheDeviceAndTheCall) {
  FakeFailure f("cuDeviceGetName", 12345);  // a code no one names
  const std::string m = error_of([] { make_runtime(); });
  EXPECT_EQ(m, "CUDA0: cuDeviceGetName failed: CUDA error 12345");
}

TEST_F(CudaRuntimeTest, MemoryRoundTripsAndCountsAgainstTheDevice) {
  const size_t free_before = rt->free_memory(0);
  void* a = rt->allocate(0, 1000);
  void* b = rt->allocate(0, 1000);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % rt->properties(0).base_alignment, 0u);
  EXPECT_EQ(rt->free_memory(0), free_before - 2000);
  const auto data = iota_bytes(1000);
  rt->copy_h2d(0, a, data.data(), 1000);
  rt->copy_d2d(0, b, 0, a, 1000);
  rt->fill(0, static_cast<char*>(b) + 10, 0xEE, 5);
  std::vector<uint8_t> got(1000);
  rt->copy_d2h(0, got.data(), b, 1000);
  auto want = data;
  std::fill(want.begin() + 10, want.begin() + 15, 0xEE);
  EXPECT_EQ(got, want);
  void* z0 = rt->allocate(0, 0);
  void* z1 = rt->allocate(0, 0);
  EXPECT_NE(z0, z1);
  for (void* p : {z1, z0, b, a}) rt->free(0, p);
  rt->free(0, nullptr);
  EXPECT_EQ(rt->free_memory(0), free_before);
}

TEST_F(CudaRuntimeTest, AccessOutsideDeviceMemoryIsAnErrorBeforeTheDriverSeesIt) {
  void* a = rt->allocate(0, 256);
  std::vector<uint8_t> host(512);
  char* p = static_cast<char*>(a);
  EXPECT_TRUE(
      contains(error_of([&] { rt->copy_h2d(0, p + 200, host.data(), 100); }, ErrorCode::InvalidArgument),
               "CUDA0: cuMemcpyHtoDAsync: address "));
  EXPECT_THROW(rt->copy_d2h(0, host.data(), p + 200, 100), Error);
  EXPECT_THROW(rt->fill(0, p + 250, 0, 10), Error);
  EXPECT_THROW(rt->fill(1, p, 0, 10), Error);                         // another device's memory
  EXPECT_THROW(rt->copy_h2d(0, host.data(), host.data(), 8), Error);  // host memory
  rt->copy_h2d(0, a, host.data(), 256);                               // the allocation is unharmed
  rt->free(0, a);
}

TEST_F(CudaRuntimeTest, AnAllocationBeyondTheDeviceIsAnOutOfMemoryErrorNamingIt) {
  const std::string m = error_of([&] { rt->allocate(1, (size_t{2} << 30) + 1); }, ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(m, "CUDA1 (Fake GPU Beta): cannot allocate 2048.0 MiB")) << m;
  // The driver's own refusal names its call and error, and the free memory.
  FakeFailure f("cuMemAlloc_v2", cuda::CUDA_ERROR_OUT_OF_MEMORY);
  const std::string d = error_of([&] { rt->allocate(1, 4096); }, ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(d,
                       "CUDA1 (Fake GPU Beta): cuMemAlloc failed: cannot allocate 0.0 MiB (4096 bytes): "
                       "CUDA_ERROR_OUT_OF_MEMORY (out of memory); 2048.0 MiB free"))
      << d;
}

TEST_F(CudaRuntimeTest, PeersCopyDirectlyOnBothPaths) {
  EXPECT_TRUE(rt->can_access_peer(1, 0));
  EXPECT_TRUE(rt->can_access_peer(0, 0));
  const size_t n = 4096;
  void* a = rt->allocate(0, n);
  void* b = rt->allocate(1, n);
  const auto data = iota_bytes(n, 7);
  rt->copy_h2d(0, a, data.data(), n);
  rt->copy_d2d(1, b, 0, a, n);
  std::vector<uint8_t> got(n);
  rt->copy_d2h(1, got.data(), b, n);
  EXPECT_EQ(got, data);
  auto s1 = rt->create_stream(1);
  rt->fill(1, b, 0, n);
  rt->copy_d2d_async(*s1, b, 0, a, n);
  std::fill(got.begin(), got.end(), 0);
  rt->copy_d2h_async(*s1, got.data(), b, n);
  rt->stream_synchronize(*s1);
  EXPECT_EQ(got, data);
  rt->free(1, b);
  rt->free(0, a);
}

TEST_F(CudaRuntimeTest, HostFunctionsRunInOrderAndTheirFirstErrorReachesEventsAndSynchronizeOnce) {
  auto s = rt->create_stream(0);
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) rt->launch_host_func(*s, [&order, i] { order.push_back(i); });
  rt->stream_synchronize(*s);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  void* a = rt->allocate(0, 64);
  rt->launch_host_func(*s,
                       [] { throw Error(ErrorCode::InvalidArgument, "host function failed on purpose"); });
  rt->launch_host_func(*s, [] { throw Error(ErrorCode::DeviceError, "a second failure"); });
  rt->fill_async(*s, a, 3, 64);  // later work still runs
  auto ev = rt->create_event(0);
  EXPECT_EQ(rt->event_query(*ev), EventStatus::NotRecorded);
  EXPECT_NO_THROW(rt->event_synchronize(*ev));
  rt->event_record(*ev, *s);
  EXPECT_EQ(rt->event_query(*ev), EventStatus::Failed);  // carries the stream's error
  EXPECT_EQ(error_of([&] { rt->event_synchronize(*ev); }, ErrorCode::InvalidArgument),
            "host function failed on purpose");
  EXPECT_EQ(error_of([&] { rt->stream_synchronize(*s); }, ErrorCode::InvalidArgument),
            "host function failed on purpose");
  EXPECT_NO_THROW(rt->stream_synchronize(*s));  // reported once
  std::vector<uint8_t> got(64);
  rt->copy_d2h(0, got.data(), a, 64);
  EXPECT_EQ(got, std::vector<uint8_t>(64, 3));
  rt->event_record(*ev, *s);
  EXPECT_EQ(rt->event_query(*ev), EventStatus::Complete);
  rt->free(0, a);
}

TEST_F(CudaRuntimeTest, EventsMoveBetweenStreamsOfDifferentDevices) {
  auto s0 = rt->create_stream(0);
  auto s1 = rt->create_stream(1);
  auto ev = rt->create_event(0);
  std::atomic<int> flag{0};
  rt->launch_host_func(*s0, [&] { flag = 1; });
  rt->event_record(*ev, *s0);
  rt->stream_wait_event(*s1, *ev);
  int seen = -1;
  rt->launch_host_func(*s1, [&] { seen = flag.load(); });
  rt->stream_synchronize(*s1);
  EXPECT_EQ(seen, 1);
  rt->event_record(*ev, *s1);  // re-made in device 1's context
  rt->event_synchronize(*ev);
  EXPECT_EQ(rt->event_query(*ev), EventStatus::Complete);
}

TEST_F(CudaRuntimeTest, TheDevicePoolIsTheVmmPoolOnTheDriversVirtualMemory) {
  device::VirtualMemory* vm = rt->virtual_memory(0);
  ASSERT_NE(vm, nullptr);
  const size_t g = vm->granularity();
  EXPECT_EQ(g, size_t{64} << 10);
  auto pool = device::make_device_pool(*rt, 0);
  auto* vmm = dynamic_cast<device::VmmPool*>(pool.get());
  ASSERT_NE(vmm, nullptr);
  {
    device::Scratch outer(*pool, g / 2);
    device::Scratch inner(*pool, g);  // spans two chunks
    EXPECT_EQ(vmm->mapped(), 2 * g);
    const auto data = iota_bytes(g);
    rt->copy_h2d(0, inner.data(), data.data(), g);
    std::vector<uint8_t> got(g);
    rt->copy_d2h(0, got.data(), inner.data(), g);
    EXPECT_EQ(got, data);
  }
  char* base = static_cast<char*>(vm->reserve(4 * g));
  EXPECT_THROW(rt->fill(0, base, 0, 16), Error);  // reserved, not mapped
  auto phys = vm->create_physical(2 * g);
  vm->map(base + g, *phys);
  rt->fill(0, base + g, 0x24, 2 * g);
  std::vector<uint8_t> got(16);
  rt->copy_d2h(0, got.data(), base + 2 * g, 16);
  EXPECT_EQ(got, std::vector<uint8_t>(16, 0x24));
  vm->unmap(base + g, 2 * g);
  EXPECT_THROW(rt->fill(0, base + g, 0, 16), Error);  // no longer device memory
  phys.reset();
  vm->release(base, 4 * g);
}

// Every driver call that fails surfaces as an Error naming the device, the call and the CUDA error.
TEST_F(CudaRuntimeTest, EveryFailingCallIsAnErrorNamingTheDeviceTheCallAndTheError) {
  void* a = rt->allocate(0, 4096);
  void* b = rt->allocate(1, 4096);
  std::vector<uint8_t> host(4096);
  auto s = rt->create_stream(0);
  auto ev = rt->create_event(0);
  rt->event_record(*ev, *s);
  device::VirtualMemory* vm = rt->virtual_memory(0);
  ASSERT_NE(vm, nullptr);
  const size_t g = vm->granularity();
  char* base = static_cast<char*>(vm->reserve(2 * g));
  struct Case {
    const char* symbol;  // what fails in the driver
    const char* call;    // how the error names it
    std::function<void()> run;
  };
  const std::vector<Case> cases = {
      {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync", [&] { rt->copy_h2d(0, a, host.data(), 64); }},
      {"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync", [&] { rt->copy_d2h(0, host.data(), a, 64); }},
      {"cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync",
       [&] { rt->copy_d2d(0, a, 0, static_cast<char*>(a) + 64, 64); }},
      {"cuMemcpyPeerAsync", "cuMemcpyPeerAsync", [&] { rt->copy_d2d(1, b, 0, a, 64); }},
      {"cuMemsetD8Async", "cuMemsetD8Async", [&] { rt->fill_async(*s, a, 1, 64); }},
      {"cuStreamSynchronize", "cuStreamSynchronize", [&] { rt->stream_synchronize(*s); }},
      {"cuStreamCreate", "cuStreamCreate", [&] { rt->create_stream(0); }},
      {"cuLaunchHostFunc", "cuLaunchHostFunc", [&] { rt->launch_host_func(*s, [] {}); }},
      {"cuEventRecord", "cuEventRecord", [&] { rt->event_record(*ev, *s); }},
      {"cuEventSynchronize", "cuEventSynchronize", [&] { rt->event_synchronize(*ev); }},
      {"cuStreamWaitEvent", "cuStreamWaitEvent", [&] { rt->stream_wait_event(*s, *ev); }},
      {"cuMemHostAlloc", "cuMemHostAlloc", [&] { rt->host_alloc(0, 64); }},
      {"cuMemGetInfo_v2", "cuMemGetInfo", [&] { rt->free_memory(0); }},
      {"cuMemAddressReserve", "cuMemAddressReserve", [&] { vm->reserve(g); }},
      {"cuMemCreate", "cuMemCreate", [&] { vm->create_physical(g); }},
      {"cuMemMap", "cuMemMap",
       [&] {
         auto p = vm->create_physical(g);
         vm->map(base, *p);
       }},
      {"cuMemSetAccess", "cuMemSetAccess",
       [&] {
         auto p = vm->create_physical(g);
         vm->map(base, *p);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.symbol);
    FakeFailure f(c.symbol, cuda::CUDA_ERROR_ILLEGAL_ADDRESS);
    const std::string m = error_of(c.run);
    EXPECT_TRUE(contains(m, std::string(c.call) +
                                " failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access "
                                "was encountered)"))
        << m;
    EXPECT_TRUE(contains(m, c.symbol == std::string("cuMemcpyPeerAsync") ? "CUDA1: " : "CUDA0: ")) << m;
  }
  // The event query reports a failed event rather than throwing.
  {
    FakeFailure f("cuEventQuery", cuda::CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(rt->event_query(*ev), EventStatus::Failed);
  }
  // Nothing was left half-done: the failed mappings left no device memory behind.
  EXPECT_THROW(rt->fill(0, base, 0, 16), Error);
  vm->release(base, 2 * g);
  rt->free(1, b);
  rt->free(0, a);
}

TEST_F(CudaRuntimeTest, AContextThatCannotBeRetainedIsAnErrorAndIsRetriedLater) {
  auto fresh = make_runtime();
  {
    FakeFailure f("cuDevicePrimaryCtxRetain", cuda::CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(error_of([&] { fresh->allocate(0, 64); }, ErrorCode::OutOfMemory),
              "CUDA0: cuDevicePrimaryCtxRetain failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  }
  void* p = fresh->allocate(0, 64);
  fresh->free(0, p);
}

// A device made from the runtime: its op library supports nothing yet, so graphs stay on the CPU,
// but its buffers hold tensors (ggml's bytes) and give them back.
TEST_F(CudaRuntimeTest, ADeviceHoldsTensorsAndSupportsNoOpYet) {
  auto ops = cuda::make_op_library();
  device::AcceleratorDevice dev(rt, 0, ops);
  EXPECT_EQ(dev.name(), "CUDA0");
  EXPECT_EQ(dev.memory().total, size_t{1} << 30);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 64);
  Tensor* b = ctx.new_tensor(DType::F32, 64);
  Tensor* sum = ops::add(ctx, a, b);
  EXPECT_FALSE(ops->supports(*sum));
  auto buffer = dev.buffer_type().allocate(a->nbytes());
  buffer->place(*a, 0);
  std::vector<float> values(64);
  std::iota(values.begin(), values.end(), 1.0f);
  tensor_set(*a, values.data(), 0, a->nbytes());
  std::vector<float> back(64);
  tensor_get(*a, back.data(), 0, a->nbytes());
  EXPECT_EQ(back, values);
}

// Under TESSERA_CUDA_DRIVER naming the two-device fake (ctest's seam_cuda_fake_driver), the
// Registry holds its devices, so the seam's conformance suite runs on the CUDA runtime.
TEST(CudaRegistry, TheDriverNamedByTheEnvironmentGivesTheRegistryItsDevices) {
  const char* driver = std::getenv("TESSERA_CUDA_DRIVER");
  if (driver == nullptr || std::string(driver).find("fake_cuda_devices") == std::string::npos)
    GTEST_SKIP() << "TESSERA_CUDA_DRIVER does not name the two-device fake";
  Device* d0 = Registry::instance().find("CUDA0");
  ASSERT_NE(d0, nullptr);
  EXPECT_EQ(d0->description(), "Fake GPU Alpha (sm_90, 132 SMs, PCI 0000:41:00.0, CUDA driver 12.4)");
  EXPECT_NE(Registry::instance().find("CUDA1"), nullptr);
  for (const auto& note : runtime_notes()) EXPECT_NE(note.runtime, "CUDA") << note.reason;
}
