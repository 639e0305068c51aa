// The runtime seam's conformance suite (as IREE's CTS): every runtime present in the registry
// (the host runtime always, in tests; OpenCL when built; CUDA where there is a GPU) must pass the
// same checks on its first two devices (or its only one, twice): allocation, copies of every kind,
// in-order streams, events across devices, host functions and their errors, pools, and its weight
// layout round-trips through device buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "device/backend.h"
#include "device/buffer.h"
#include "device/device.h"
#include "device/pool.h"
#include "device/runtime.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/error.h"
#include "tessera/quant.h"

using namespace tessera;
using device::EventStatus;

namespace {

// Before the registry exists (static initialization precedes main and test discovery): the
// devices every test run has. Values already in the environment win.
const bool kSeamDevices = [] {
  setenv("TESSERA_HOST_DEVICES", "2", 0);
  setenv("POCL_DEVICES", "pthread pthread", 0);
  return true;
}();

struct RuntimeUnderTest {
  std::string name;  // "Host", "OpenCL"
  std::vector<device::AcceleratorDevice*> devices;
};

// Test names and failure messages show the runtime's name.
void PrintTo(const RuntimeUnderTest& r, std::ostream* os) { *os << r.name; }

// Every runtime behind the seam with its registered devices, in registry order.
std::vector<RuntimeUnderTest> runtimes_present() {
  std::vector<RuntimeUnderTest> out;
  std::map<device::Runtime*, size_t> index;
  for (const auto& d : Registry::instance().devices()) {
    auto* a = dynamic_cast<device::AcceleratorDevice*>(d);
    if (a == nullptr) continue;
    auto [it, fresh] = index.emplace(&a->runtime(), out.size());
    if (fresh) out.push_back({a->runtime().name(), {}});
    out[it->second].devices.push_back(a);
  }
  return out;
}

class Seam : public ::testing::TestWithParam<RuntimeUnderTest> {
 protected:
  void SetUp() override {
    // The test environment gives the host runtime and OpenCL (PoCL) two devices each. Hardware
    // runtimes (CUDA on a one-GPU machine) may have one: "both" devices are then that one.
    if (GetParam().name == "Host" || GetParam().name == "OpenCL") {
      ASSERT_GE(GetParam().devices.size(), 2u) << "the suite needs two devices of " << GetParam().name;
    }
  }
  device::Runtime& rt() const { return GetParam().devices[0]->runtime(); }
  device::AcceleratorDevice& dev(int i) const {
    return *GetParam().devices[std::min(static_cast<size_t>(i), GetParam().devices.size() - 1)];
  }
  int idx(int i) const { return dev(i).index(); }
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<uint8_t> read(device::Runtime& rt, int device, const void* addr, size_t n) {
  std::vector<uint8_t> v(n);
  rt.copy_d2h(device, v.data(), addr, n);
  return v;
}

// Frees a device allocation at scope exit.
struct Allocation {
  device::Runtime& rt;
  int device;
  void* ptr;
  Allocation(device::Runtime& r, int d, size_t size) : rt(r), device(d), ptr(r.allocate(d, size)) {}
  ~Allocation() { rt.free(device, ptr); }
  char* operator+(size_t offset) const { return static_cast<char*>(ptr) + offset; }
};

// A host function that sleeps, then marks itself done. (Not a gate the test opens: a runtime may
// run host functions on a driver thread that enqueuing waits for, as PoCL does.)
std::function<void()> sleeper(std::atomic<bool>& done, int ms = 200) {
  return [&done, ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    done = true;
  };
}

}  // namespace

// ---------------------------------------------------------------- allocation

TEST_P(Seam, AllocationsAreAlignedDistinctAndFreeable) {
  const auto& p = rt().properties(idx(0));
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_GE(p.base_alignment, 1u);
  EXPECT_LE(rt().free_memory(idx(0)), p.total_memory);
  void* a = rt().allocate(idx(0), 1000);
  void* b = rt().allocate(idx(0), 1000);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % p.base_alignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % p.base_alignment, 0u);
  // allocate(0) gives a distinct address that free accepts.
  void* z0 = rt().allocate(idx(0), 0);
  void* z1 = rt().allocate(idx(0), 0);
  EXPECT_NE(z0, nullptr);
  EXPECT_NE(z0, z1);
  rt().free(idx(0), z1);
  rt().free(idx(0), z0);
  rt().free(idx(0), b);
  rt().free(idx(0), a);
  rt().free(idx(0), nullptr);  // a no-op
}

TEST_P(Seam, AnAllocationBeyondTheDeviceIsAnOutOfMemoryErrorNamingIt) {
  const auto& p = rt().properties(idx(1));
  const size_t too_big = std::max(p.total_memory, p.max_allocation) + 1;
  try {
    void* never = rt().allocate(idx(1), too_big);
    rt().free(idx(1), never);
    FAIL() << "allocating " << too_big << " bytes succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find(p.name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
  // The device is still usable.
  Allocation a(rt(), idx(1), 64);
  rt().fill(idx(1), a.ptr, 7, 64);
  EXPECT_EQ(read(rt(), idx(1), a.ptr, 64), std::vector<uint8_t>(64, 7));
}

TEST_P(Seam, TransfersOutsideAnAllocationAreErrors) {
  Allocation a(rt(), idx(0), 256);
  std::vector<uint8_t> host(512);
  EXPECT_THROW(rt().copy_h2d(idx(0), a + 200, host.data(), 100), Error);  // runs past the end
  EXPECT_THROW(rt().copy_d2h(idx(0), host.data(), a + 200, 100), Error);
  EXPECT_THROW(rt().fill(idx(0), a + 250, 0, 10), Error);
  // The allocation is unharmed and usable.
  rt().copy_h2d(idx(0), a.ptr, host.data(), 256);
}

// ---------------------------------------------------------------- synchronous copies

TEST_P(Seam, SynchronousCopiesAndFillsHonourOffsets) {
  const size_t n = 4096;
  Allocation a(rt(), idx(0), n), b(rt(), idx(0), n);
  std::vector<uint8_t> expect = pattern(n, 1);
  rt().copy_h2d(idx(0), a.ptr, expect.data(), n);
  // A fill at an offset inside the allocation.
  rt().fill(idx(0), a + 100, 0xEE, 300);
  std::fill(expect.begin() + 100, expect.begin() + 400, 0xEE);
  // An upload at an offset.
  const auto piece = pattern(777, 2);
  rt().copy_h2d(idx(0), a + 1001, piece.data(), piece.size());
  std::copy(piece.begin(), piece.end(), expect.begin() + 1001);
  EXPECT_EQ(read(rt(), idx(0), a.ptr, n), expect);
  // A download from an offset.
  std::vector<uint8_t> part(500);
  rt().copy_d2h(idx(0), part.data(), a + 900, part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), expect.begin() + 900));
  // Device to device on one device, between offsets.
  rt().fill(idx(0), b.ptr, 0, n);
  rt().copy_d2d(idx(0), b + 64, idx(0), a + 128, 2000);
  std::vector<uint8_t> expect_b(n, 0);
  std::copy(expect.begin() + 128, expect.begin() + 2128, expect_b.begin() + 64);
  EXPECT_EQ(read(rt(), idx(0), b.ptr, n), expect_b);
}

TEST_P(Seam, CopiesBetweenDevicesWhenPeersElseAnError) {
  const size_t n = 3000;
  Allocation a(rt(), idx(0), n), b(rt(), idx(1), n);
  const auto data = pattern(n, 3);
  rt().copy_h2d(idx(0), a.ptr, data.data(), n);
  rt().fill(idx(1), b.ptr, 0x11, n);
  if (rt().can_access_peer(idx(1), idx(0))) {
    rt().copy_d2d(idx(1), b + 10, idx(0), a + 20, 1000);
    auto got = read(rt(), idx(1), b.ptr, n);
    EXPECT_TRUE(std::equal(got.begin() + 10, got.begin() + 1010, data.begin() + 20));
    EXPECT_EQ(got[9], 0x11);
    EXPECT_EQ(got[1010], 0x11);
  } else {
    EXPECT_THROW(rt().copy_d2d(idx(1), b.ptr, idx(0), a.ptr, n), Error);
  }
}

// ---------------------------------------------------------------- streams

TEST_P(Seam, AsyncWorkOnAStreamRunsInOrder) {
  const size_t n = size_t{4} << 20;  // long enough that reordering would show
  Allocation a(rt(), idx(0), n), b(rt(), idx(0), n);
  auto stream = rt().create_stream(idx(0));
  EXPECT_EQ(stream->device(), idx(0));
  const auto first = pattern(n, 4), second = pattern(n, 5);
  std::vector<uint8_t> out1(n), out2(n), out3(64);
  rt().copy_h2d_async(*stream, a.ptr, first.data(), n);
  rt().copy_d2d_async(*stream, b.ptr, idx(0), a.ptr, n);  // b = first
  rt().copy_h2d_async(*stream, a.ptr, second.data(), n);  // a = second, after b copied it
  rt().fill_async(*stream, a + 64, 0x5A, 64);
  rt().copy_d2h_async(*stream, out1.data(), b.ptr, n);
  rt().copy_d2h_async(*stream, out2.data(), a.ptr, n);
  rt().copy_d2h_async(*stream, out3.data(), a + 32, 64);
  std::atomic<bool> saw_all{false};
  rt().launch_host_func(*stream, [&] { saw_all = out2[n - 1] == second[n - 1]; });
  rt().stream_synchronize(*stream);
  EXPECT_EQ(out1, first);
  auto expect2 = second;
  std::fill(expect2.begin() + 64, expect2.begin() + 128, 0x5A);
  EXPECT_EQ(out2, expect2);
  EXPECT_TRUE(std::equal(out3.begin(), out3.end(), expect2.begin() + 32));
  EXPECT_TRUE(saw_all.load());
}

TEST_P(Seam, AsyncCopiesBetweenDevicesOnTheDestinationStream) {
  if (!rt().can_access_peer(idx(1), idx(0))) {
    // Nothing to order: DeviceBuffer stages such copies through the host (tested below).
    EXPECT_FALSE(rt().can_access_peer(idx(1), idx(0)));
    return;
  }
  const size_t n = 5000;
  Allocation a(rt(), idx(0), n), b(rt(), idx(1), n);
  const auto data = pattern(n, 6);
  rt().copy_h2d(idx(0), a.ptr, data.data(), n);
  auto s1 = rt().create_stream(idx(1));
  std::vector<uint8_t> got(n - 100);
  rt().copy_d2d_async(*s1, b + 100, idx(0), a.ptr, n - 100);
  rt().copy_d2h_async(*s1, got.data(), b + 100, n - 100);
  rt().stream_synchronize(*s1);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
}

TEST_P(Seam, HostFunctionsRunInStreamOrderAndTheirErrorsReachSynchronizeOnce) {
  auto stream = rt().create_stream(idx(0));
  std::vector<int> order;
  std::mutex m;
  auto note = [&](int i) {
    return [&, i] {
      std::lock_guard lock(m);
      order.push_back(i);
    };
  };
  std::atomic<bool> slept{false};
  rt().launch_host_func(*stream, sleeper(slept, 50));
  for (int i = 0; i < 5; ++i) rt().launch_host_func(*stream, note(i));
  rt().stream_synchronize(*stream);
  EXPECT_TRUE(slept.load());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));

  Allocation a(rt(), idx(0), 64);
  rt().fill(idx(0), a.ptr, 0, 64);
  rt().launch_host_func(*stream,
                        [] { throw Error(ErrorCode::InvalidArgument, "host function failed on purpose"); });
  rt().launch_host_func(*stream, [] { throw Error(ErrorCode::DeviceError, "a second failure"); });
  rt().fill_async(*stream, a.ptr, 3, 64);  // later work still runs
  auto ev = rt().create_event(idx(0));
  rt().event_record(*ev, *stream);
  try {
    rt().event_synchronize(*ev);
    FAIL() << "the event after a failed host function completed cleanly";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  try {
    rt().stream_synchronize(*stream);
    FAIL() << "the host function's error was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);  // the first error
    EXPECT_STREQ(e.what(), "host function failed on purpose");
  }
  EXPECT_NO_THROW(rt().stream_synchronize(*stream));  // reported once
  EXPECT_EQ(read(rt(), idx(0), a.ptr, 64), std::vector<uint8_t>(64, 3));
}

// ---------------------------------------------------------------- events

TEST_P(Seam, EventQueryFollowsTheRecordingStream) {
  auto stream = rt().create_stream(idx(0));
  auto ev = rt().create_event(idx(0));
  EXPECT_EQ(rt().event_query(*ev), EventStatus::NotRecorded);
  EXPECT_NO_THROW(rt().event_synchronize(*ev));  // nothing to wait for
  std::atomic<bool> first{false}, second{false};
  rt().launch_host_func(*stream, sleeper(first));
  rt().event_record(*ev, *stream);
  // Never complete before the work in front of it (Pending unless that work is already done).
  EventStatus st = rt().event_query(*ev);
  EXPECT_TRUE(st == EventStatus::Pending || (st == EventStatus::Complete && first.load()));
  rt().event_synchronize(*ev);
  EXPECT_TRUE(first.load());
  EXPECT_EQ(rt().event_query(*ev), EventStatus::Complete);
  // Recording again moves the point.
  rt().launch_host_func(*stream, sleeper(second));
  rt().event_record(*ev, *stream);
  st = rt().event_query(*ev);
  EXPECT_TRUE(st == EventStatus::Pending || (st == EventStatus::Complete && second.load()));
  rt().event_synchronize(*ev);
  EXPECT_TRUE(second.load());
  EXPECT_EQ(rt().event_query(*ev), EventStatus::Complete);
}

TEST_P(Seam, AStreamOfOneDeviceWaitsForAnEventOfAnother) {
  auto s0 = rt().create_stream(idx(0));
  auto s1 = rt().create_stream(idx(1));
  auto ev = rt().create_event(idx(0));
  const size_t n = size_t{2} << 20;
  Allocation a(rt(), idx(0), n), b(rt(), idx(1), n);
  const auto data = pattern(n, 7);
  std::atomic<int> flag{0}, observed{-1};
  std::atomic<bool> slept{false};
  rt().launch_host_func(*s0, sleeper(slept));
  rt().launch_host_func(*s0, [&] { flag = 1; });
  rt().copy_h2d_async(*s0, a.ptr, data.data(), n);
  rt().event_record(*ev, *s0);
  rt().stream_wait_event(*s1, *ev);  // the caller is not blocked
  rt().launch_host_func(*s1, [&] { observed = flag.load(); });
  std::vector<uint8_t> got(n);
  if (rt().can_access_peer(idx(1), idx(0))) {
    rt().copy_d2d_async(*s1, b.ptr, idx(0), a.ptr, n);
    rt().copy_d2h_async(*s1, got.data(), b.ptr, n);
  }
  const EventStatus st = rt().event_query(*ev);
  EXPECT_TRUE(st == EventStatus::Pending || (st == EventStatus::Complete && flag.load() == 1));
  rt().stream_synchronize(*s1);  // only device 1's stream is synchronized
  EXPECT_EQ(observed.load(), 1);
  EXPECT_EQ(rt().event_query(*ev), EventStatus::Complete);
  if (rt().can_access_peer(idx(1), idx(0))) {
    EXPECT_EQ(got, data);
  }
  rt().stream_synchronize(*s0);
}

// ---------------------------------------------------------------- pools

TEST_P(Seam, ABestFitPoolOverTheRuntimeReusesBlocks) {
  device::RawAllocator raw;
  device::Runtime* r = &rt();
  const int d = idx(0);
  int live = 0;
  raw.allocate = [&, r, d](size_t size) {
    ++live;
    return r->allocate(d, size);
  };
  raw.free = [&, r, d](void* p) {
    --live;
    r->free(d, p);
  };
  {
    device::BestFitPool pool(raw);
    void* x = pool.allocate(1000);
    rt().fill(d, x, 9, 1000);  // device memory the runtime accepts
    EXPECT_EQ(read(rt(), d, x, 1000), std::vector<uint8_t>(1000, 9));
    pool.release(x, 1000);
    void* y = pool.allocate(1000);
    EXPECT_EQ(x, y);
    EXPECT_EQ(pool.stats().reuses, 1u);
    EXPECT_EQ(pool.stats().allocations, 1u);
    pool.release(y, 1000);
  }
  EXPECT_EQ(live, 0);  // the cache is freed with the pool
}

TEST_P(Seam, TheDevicePoolUsesVirtualMemoryWhereTheRuntimeHasIt) {
  auto pool = device::make_device_pool(rt(), idx(0));
  device::VirtualMemory* vm = rt().virtual_memory(idx(0));
  if (vm == nullptr) {
    EXPECT_NE(dynamic_cast<device::BestFitPool*>(pool.get()), nullptr);
    return;
  }
  auto* vmm = dynamic_cast<device::VmmPool*>(pool.get());
  ASSERT_NE(vmm, nullptr);
  const size_t g = vm->granularity();
  ASSERT_GT(g, 0u);
  {
    device::Scratch outer(*pool, g / 2);
    device::Scratch inner(*pool, g);  // spans two chunks
    EXPECT_EQ(vmm->mapped(), 2 * g);
    EXPECT_EQ(inner.bytes(), outer.bytes() + g / 2);
    // Mapped memory is device memory: copies reach it, across the chunk boundary too.
    const auto data = pattern(g, 8);
    rt().copy_h2d(idx(0), inner.data(), data.data(), g);
    EXPECT_EQ(read(rt(), idx(0), inner.data(), g), data);
    auto stream = rt().create_stream(idx(0));
    rt().fill_async(*stream, outer.data(), 0x42, g / 2);
    std::vector<uint8_t> got(g / 2);
    rt().copy_d2h_async(*stream, got.data(), outer.data(), g / 2);
    rt().stream_synchronize(*stream);
    EXPECT_EQ(got, std::vector<uint8_t>(g / 2, 0x42));
  }
  // The seam's virtual memory directly: reserve, back, map, unmap, release.
  char* base = static_cast<char*>(vm->reserve(4 * g));
  auto phys = vm->create_physical(2 * g);
  vm->map(base + g, *phys);
  rt().fill(idx(0), base + g, 0x24, 2 * g);
  EXPECT_EQ(read(rt(), idx(0), base + 2 * g, 16), std::vector<uint8_t>(16, 0x24));
  vm->unmap(base + g, 2 * g);
  EXPECT_THROW(rt().fill(idx(0), base + g, 0, 16), Error);  // no longer device memory
  vm->release(base, 4 * g);
}

// ---------------------------------------------------------------- weight layouts

TEST_P(Seam, WeightsRoundTripInTheDevicesLayoutForAnyWholeBlockRange) {
  std::mt19937 rng(12);
  for (int di = 0; di < 2; ++di) {
    auto& d = dev(di);
    const WeightLayout& layout = d.weight_layout();
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0}) {
      SCOPED_TRACE(d.name() + " " + std::string(name(type)));
      Context ctx;
      Tensor* t = ctx.new_tensor(type, 96, 5);  // rows of 96: slack in a padded format
      const size_t slack = d.buffer_type().alloc_size(*t) - t->nbytes();
      EXPECT_EQ(d.buffer_type().alloc_size(*t), layout.alloc_size(*t));
      auto buffer = d.buffer_type().allocate(d.buffer_type().alloc_size(*t) + 64);
      buffer->clear(0xCD);
      buffer->place(*t, 0);
      auto raw = read(d.runtime(), d.index(), t->data, t->nbytes() + slack);
      for (size_t i = t->nbytes(); i < raw.size(); ++i) ASSERT_EQ(raw[i], 0) << "slack byte " << i;

      std::vector<float> values(96 * 5);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (auto& v : values) v = dist(rng);
      std::vector<uint8_t> image(t->nbytes());
      from_f32_row(type, values.data(), image.data(), 96 * 5);
      tensor_set(*t, image.data(), 0, image.size());
      std::vector<uint8_t> back(image.size());
      tensor_get(*t, back.data(), 0, back.size());
      EXPECT_EQ(back, image);

      // In memory exactly as the layout encodes it.
      raw = read(d.runtime(), d.index(), t->data, t->nbytes());
      const size_t bb = traits(type).block_bytes, nblocks = t->nbytes() / bb;
      if (layout.encodes(*t)) {
        std::vector<uint8_t> laid(t->nbytes());
        layout.encode(*t, 0, image.size(), image.data(),
                      ImageWindow::whole(reinterpret_cast<char*>(laid.data())));
        EXPECT_EQ(raw, laid);
        EXPECT_THROW(tensor_set(*t, image.data(), bb / 2, bb), Error);  // splits a block
      } else {
        EXPECT_EQ(raw, image);
      }

      // Any whole-block range: set blocks [b0, b0 + nb), read back others overlapping it.
      std::uniform_int_distribution<size_t> pick(0, nblocks - 1);
      for (int trial = 0; trial < 6; ++trial) {
        const size_t b0 = pick(rng), nb = 1 + pick(rng) % (nblocks - b0);
        std::vector<uint8_t> block_image(nb * bb);
        std::vector<float> vals(nb * static_cast<size_t>(traits(type).block_size));
        for (auto& v : vals) v = dist(rng);
        from_f32_row(type, vals.data(), block_image.data(), static_cast<int64_t>(vals.size()));
        tensor_set(*t, block_image.data(), b0 * bb, block_image.size());
        std::copy(block_image.begin(), block_image.end(), image.begin() + static_cast<ptrdiff_t>(b0 * bb));
        const size_t r0 = pick(rng), rn = 1 + pick(rng) % (nblocks - r0);
        std::vector<uint8_t> part(rn * bb);
        tensor_get(*t, part.data(), r0 * bb, part.size());
        ASSERT_TRUE(std::equal(part.begin(), part.end(), image.begin() + static_cast<ptrdiff_t>(r0 * bb)))
            << "blocks [" << r0 << ", " << r0 + rn << ") after setting [" << b0 << ", " << b0 + nb << ")";
      }
      tensor_get(*t, back.data(), 0, back.size());
      EXPECT_EQ(back, image);
    }
  }
}

TEST_P(Seam, BackendTransfersKeepTheLayoutAndCopyBetweenDevices) {
  std::mt19937 rng(13);
  for (DType type : {DType::F16, DType::Q4_0, DType::Q8_0}) {
    SCOPED_TRACE(name(type));
    Context c0, c1;
    Tensor* a = c0.new_tensor(type, 64, 6);
    Tensor* b = c1.new_tensor(type, 64, 6);
    auto buf0 = dev(0).buffer_type().allocate(dev(0).buffer_type().alloc_size(*a));
    auto buf1 = dev(1).buffer_type().allocate(dev(1).buffer_type().alloc_size(*b));
    buf0->place(*a, 0);
    buf1->place(*b, 0);
    std::vector<float> values(64 * 6);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& v : values) v = dist(rng);
    std::vector<uint8_t> image(a->nbytes());
    from_f32_row(type, values.data(), image.data(), 64 * 6);
    auto b0 = dev(0).make_backend();
    auto b1 = dev(1).make_backend();
    b0->set_async(*a, image.data(), 0, image.size());
    auto ev = b0->create_event();
    ev->record(*b0);
    b1->wait(*ev);
    if (!b1->copy_async(*a, *b)) {  // no peer access: staged through the host
      ev->synchronize();
      ASSERT_TRUE(buf1->copy_from(*a, *b));
    }
    std::vector<uint8_t> back(image.size()), row(a->nb[1]);
    b1->get_async(*b, back.data(), 0, back.size());
    b1->get_async(*b, row.data(), 2 * a->nb[1], row.size());
    b1->synchronize();
    b0->synchronize();
    EXPECT_EQ(back, image);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), image.begin() + static_cast<ptrdiff_t>(2 * a->nb[1])));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRuntime, Seam, ::testing::ValuesIn(runtimes_present()),
                         [](const ::testing::TestParamInfo<RuntimeUnderTest>& info) {
                           return info.param.name;
                         });
