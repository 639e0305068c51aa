#include "opencl/runtime.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/check.h"
#include "opencl/opencl_test_util.h"
#include "tessera/error.h"

using namespace tessera;
using opencl::OpenClRuntime;
using opencl::RuntimeOptions;

namespace {

RuntimeOptions options(std::string devices = {}, bool context_per_device = false) {
  RuntimeOptions o;
  o.devices = std::move(devices);
  o.context_per_device = context_per_device;
  return o;  // no disk cache unless a test asks for one
}

}  // namespace

TEST(OpenClRuntime, RegistersEveryPoclDevice) {
  ASSERT_TRUE(test::kPoclDevices);
  const auto& devices = Registry::instance().devices();
  ASSERT_GE(devices.size(), 3u);
  EXPECT_EQ(devices[0]->name(), "CPU");
  for (int i = 0; i < 2; ++i) {
    Device& d = test::opencl_device(i);
    EXPECT_EQ(d.name(), "OpenCL" + std::to_string(i));
    // "vendor device (driver version)"
    const std::string desc = d.description();
    EXPECT_NE(desc.find("pthread"), std::string::npos) << desc;
    EXPECT_NE(desc.find(" ("), std::string::npos) << desc;
    EXPECT_EQ(desc.back(), ')') << desc;
    EXPECT_GT(d.memory().total, 0u);
    EXPECT_LE(d.memory().free, d.memory().total);
    EXPECT_GE(d.buffer_type().alignment(), 128u);
    EXPECT_FALSE(d.buffer_type().is_host());
    ASSERT_NE(d.host_buffer_type(), nullptr);
    EXPECT_TRUE(d.host_buffer_type()->is_host());
  }
}

TEST(OpenClRuntime, FiltersDevicesByIndexOrName) {
  EXPECT_EQ(OpenClRuntime(options("1")).device_count(), 1);
  OpenClRuntime one(options("1"));
  EXPECT_EQ(one.properties(0).name, "OpenCL0");  // names are given after filtering
  EXPECT_EQ(OpenClRuntime(options("0, 1")).device_count(), 2);
  EXPECT_EQ(OpenClRuntime(options("PTHREAD")).device_count(), 2);  // case-insensitive substring
  EXPECT_EQ(OpenClRuntime(options("no-such-device")).device_count(), 0);
}

TEST(OpenClRuntime, CachesProgramBinariesOnDisk) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-cl-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RuntimeOptions o = options("0");
  o.cache_dir = dir.string();
  {
    OpenClRuntime rt(o);
    auto s = rt.create_stream(0);
    rt.kernel(*s, "copy", "cpy_elements");
    rt.kernel(*s, "copy", "cpy_quantize");  // same program: built once
    EXPECT_EQ(rt.program_stats().compiled, 1);
    EXPECT_EQ(rt.program_stats().loaded, 0);
  }
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.path().extension() == ".bin";
  EXPECT_EQ(files, 1);
  {
    OpenClRuntime rt(o);  // a second start compiles nothing
    auto s = rt.create_stream(0);
    rt.kernel(*s, "copy", "cpy_elements");
    EXPECT_EQ(rt.program_stats().compiled, 0);
    EXPECT_EQ(rt.program_stats().loaded, 1);
  }
  std::filesystem::remove_all(dir);
}

TEST(OpenClRuntime, ErrorsNameTheDeviceTheCallAndTheCode) {
  OpenClRuntime rt(options("0"));
  auto s = rt.create_stream(0);
  try {
    rt.kernel(*s, "copy", "no_such_kernel");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::DeviceError);
    const std::string m = e.what();
    EXPECT_NE(m.find("OpenCL0"), std::string::npos) << m;
    EXPECT_NE(m.find("clCreateKernel"), std::string::npos) << m;
    EXPECT_NE(m.find("CL_INVALID_KERNEL_NAME"), std::string::npos) << m;
  }
  EXPECT_THROW(rt.kernel(*s, "no_such_program", "k"), Error);
  // An address outside every buffer is refused, not dereferenced.
  EXPECT_THROW(rt.resolve(0, reinterpret_cast<void*>(uintptr_t{16})), Error);
}

TEST(OpenClRuntime, ImpossibleAllocationIsAnError) {
  Device& d = test::opencl_device(0);
  for (size_t size : {size_t{1} << 50, d.buffer_type().max_size() + 1}) {
    try {
      d.buffer_type().allocate(size);
      FAIL() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
      const std::string m = e.what();
      EXPECT_NE(m.find("OpenCL0"), std::string::npos) << m;
      EXPECT_NE(m.find("MiB"), std::string::npos) << m;
      EXPECT_NE(m.find("free"), std::string::npos) << m;
    }
  }
  // The device still works afterwards.
  auto ok = d.buffer_type().allocate(4096);
  EXPECT_NE(ok->base(), nullptr);
}

TEST(OpenClRuntime, HostFunctionsRunInStreamOrderAndCarryErrors) {
  OpenClRuntime rt(options("0"));
  auto s = rt.create_stream(0);
  void* buf = rt.allocate(0, 64);
  auto* pinned = static_cast<uint8_t*>(rt.host_alloc(0, 64));
  std::atomic<int> seen{-1};
  rt.fill_async(*s, buf, 7, 64);
  rt.copy_d2h_async(*s, pinned, buf, 64);
  rt.launch_host_func(*s, [&] { seen = pinned[63]; });  // after the download...
  rt.fill_async(*s, buf, 9, 64);                        // ...and before this
  rt.copy_d2h_async(*s, pinned, buf, 64);
  rt.stream_synchronize(*s);
  EXPECT_EQ(seen.load(), 7);
  EXPECT_EQ(pinned[0], 9);

  rt.launch_host_func(*s, [] { raise(ErrorCode::InvalidArgument, "boom"); });
  rt.fill_async(*s, buf, 1, 64);  // later work still runs
  try {
    rt.stream_synchronize(*s);
    FAIL() << "expected the host function's Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_STREQ(e.what(), "boom");
  }
  rt.stream_synchronize(*s);  // reported once
  rt.copy_d2h(0, pinned, buf, 64);
  EXPECT_EQ(pinned[5], 1);
  rt.host_free(0, pinned);
  rt.free(0, buf);
}

TEST(OpenClRuntime, EventsOrderStreamsAcrossContexts) {
  // One context per device: events cannot be waited on directly and are bridged by the host.
  OpenClRuntime rt(options({}, true));
  ASSERT_EQ(rt.device_count(), 2);
  EXPECT_FALSE(rt.can_access_peer(1, 0));
  auto s0 = rt.create_stream(0);
  auto s1 = rt.create_stream(1);
  auto ev = rt.create_event(0);
  EXPECT_EQ(rt.event_query(*ev), device::EventStatus::NotRecorded);
  std::atomic<int> flag{0}, observed{-1};
  rt.launch_host_func(*s0, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    flag = 1;
  });
  rt.event_record(*ev, *s0);
  rt.stream_wait_event(*s1, *ev);
  rt.launch_host_func(*s1, [&] { observed = flag.load(); });
  rt.stream_synchronize(*s1);
  EXPECT_EQ(observed.load(), 1);
  rt.event_synchronize(*ev);
  EXPECT_EQ(rt.event_query(*ev), device::EventStatus::Complete);
  rt.stream_synchronize(*s0);
}
