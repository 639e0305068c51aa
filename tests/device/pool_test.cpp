#include "device/pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "core/check.h"
#include "device/host_vmm.h"

using namespace tessera;
using device::BestFitPool;

namespace {

// A device with a fixed capacity that counts its allocations.
struct FakeMemory {
  explicit FakeMemory(size_t cap) : capacity(cap) {}
  size_t capacity = 0;
  size_t used = 0;
  int allocations = 0;
  int frees = 0;
  std::map<void*, size_t> live;

  device::RawAllocator raw() {
    device::RawAllocator r;
    r.allocate = [this](size_t size) -> void* {
      if (used + size > capacity) raise(ErrorCode::OutOfMemory, "fake: {} bytes do not fit", size);
      void* p = std::malloc(size);
      live[p] = size;
      used += size;
      ++allocations;
      return p;
    };
    r.free = [this](void* p) {
      used -= live.at(p);
      live.erase(p);
      std::free(p);
      ++frees;
    };
    return r;
  }
};

}  // namespace

TEST(BestFitPool, BlockSizesHaveHeadroomRoundedTo256) {
  EXPECT_EQ(BestFitPool::block_size(1000), 1280u);  // 1000 + 50 -> 1280
  EXPECT_EQ(BestFitPool::block_size(4864), 5120u);  // 4864 + 243 = 5107 -> 5120
  EXPECT_EQ(BestFitPool::block_size(1), 256u);
}

TEST(BestFitPool, ReusesExactFitThenSmallestFit) {
  FakeMemory mem(1 << 20);
  {
    BestFitPool pool(mem.raw());
    void* a = pool.allocate(1000);  // 1280-byte block
    void* b = pool.allocate(4864);  // 5120-byte block
    void* c = pool.allocate(1280);  // 1280 + 64 -> 1536-byte block
    pool.release(a, 1000);
    pool.release(b, 4864);
    pool.release(c, 1280);
    EXPECT_EQ(mem.allocations, 3);
    // 1280 fits the 1280 block exactly (although 1536 and 5120 would fit too).
    EXPECT_EQ(pool.allocate(1280), a);
    // 1300: the smallest block that fits is the 1536 one.
    EXPECT_EQ(pool.allocate(1300), c);
    // 2000: only the 5120 block fits.
    EXPECT_EQ(pool.allocate(2000), b);
    EXPECT_EQ(mem.allocations, 3);
    const auto s = pool.stats();
    EXPECT_EQ(s.reuses, 3u);
    EXPECT_EQ(s.active, 1280u + 1536 + 5120);
    EXPECT_EQ(s.cached, 0u);
    pool.release(a, 1280);
    pool.release(b, 2000);
    pool.release(c, 1300);
  }
  EXPECT_EQ(mem.frees, 3);  // the pool frees its cache when it goes
  EXPECT_EQ(mem.used, 0u);
}

TEST(BestFitPool, StatisticsTrackActivePeakAndCached) {
  FakeMemory mem(1 << 20);
  BestFitPool pool(mem.raw());
  {
    device::Scratch a(pool, 1000);  // 1280
    device::Scratch b(pool, 3000);  // 3150 -> 3328
    EXPECT_EQ(pool.stats().active, 1280u + 3328);
  }
  auto s = pool.stats();
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.peak, 1280u + 3328);
  EXPECT_EQ(s.cached, 1280u + 3328);
  EXPECT_EQ(s.allocations, 2u);
  {
    device::Scratch c(pool, 100);  // reuses the 1280 block (smallest that fits)
    EXPECT_EQ(pool.stats().cached, 3328u);
  }
  pool.release_cache();
  s = pool.stats();
  EXPECT_EQ(s.cached, 0u);
  EXPECT_EQ(s.peak, 1280u + 3328);
  EXPECT_EQ(mem.used, 0u);
}

TEST(BestFitPool, ReleasesTheCacheAndRetriesOnceWhenTheDeviceIsFull) {
  FakeMemory mem(5000);
  BestFitPool pool(mem.raw());
  void* a = pool.allocate(2000);  // 2304-byte block
  pool.release(a, 2000);
  // 3328 more bytes do not fit next to the cached 2304 (5000 capacity): the cache goes, then it fits.
  void* b = pool.allocate(3000);
  ASSERT_NE(b, nullptr);
  auto s = pool.stats();
  EXPECT_EQ(s.retries, 1u);
  EXPECT_EQ(s.cached, 0u);
  EXPECT_EQ(s.active, 3328u);
  EXPECT_EQ(mem.used, 3328u);
  // An allocation the device can never satisfy is an Error, and the pool stays usable.
  try {
    pool.allocate(10000);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  }
  pool.release(b, 3000);
  void* c = pool.allocate(3000);
  EXPECT_EQ(c, b);
  pool.release(c, 3000);
}

TEST(VmmPool, GrowsByGranularityChunksAndAllocatesAsAStack) {
  const size_t gran = 64 * 1024;
  device::HostVirtualMemory vm(gran);
  device::VmmPool pool(vm, 16 * gran, 128);
  auto* a = static_cast<char*>(pool.allocate(100));  // 128 bytes
  EXPECT_EQ(a, pool.base());
  EXPECT_EQ(pool.mapped(), gran);
  auto* b = static_cast<char*>(pool.allocate(70000));  // 70016 bytes, right after a
  EXPECT_EQ(b, a + 128);
  EXPECT_EQ(pool.mapped(), 2 * gran);  // 70144 used -> one more chunk
  std::memset(a, 1, 128);              // the mapped memory is usable
  std::memset(b, 2, 70000);
  EXPECT_EQ(a[127], 1);
  EXPECT_EQ(b[69999], 2);
  auto s = pool.stats();
  EXPECT_EQ(s.active, 128u + 70016);
  EXPECT_EQ(s.cached, 2 * gran - 128 - 70016);
  EXPECT_EQ(s.allocations, 2u);
  // Released in reverse order, the stack's top comes back first.
  pool.release(b, 70000);
  auto* c = static_cast<char*>(pool.allocate(256));
  EXPECT_EQ(c, a + 128);
  pool.release(c, 256);
  pool.release(a, 100);
  EXPECT_EQ(pool.stats().active, 0u);
  EXPECT_EQ(pool.stats().peak, 128u + 70016);
  // Mapped chunks stay mapped for the next use: no growth below the high-water mark.
  void* d = pool.allocate(2 * gran);
  EXPECT_EQ(d, pool.base());
  EXPECT_EQ(pool.mapped(), 2 * gran);
  pool.release(d, 2 * gran);
  // Past the reserved range is an Error.
  EXPECT_THROW(pool.allocate(17 * gran), Error);
}

TEST(VmmPool, ScratchHandlesNestInStackOrder) {
  device::HostVirtualMemory vm;
  device::VmmPool pool(vm, size_t{1} << 24);
  {
    device::Scratch outer(pool, 1000);
    {
      device::Scratch inner(pool, 500);
      EXPECT_EQ(inner.bytes(), outer.bytes() + 1024);
      device::Scratch moved = std::move(inner);
      EXPECT_EQ(inner.data(), nullptr);
      EXPECT_EQ(pool.stats().active, 1024u + 512);
    }
    EXPECT_EQ(pool.stats().active, 1024u);
  }
  EXPECT_EQ(pool.stats().active, 0u);
}
