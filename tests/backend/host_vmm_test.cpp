#include "backend/host_vmm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tessera/error.h"

using namespace tessera;

TEST(HostScratchArena, GrowsInPlaceByWholePages) {
  const size_t page = host_page_size();
  HostScratchArena arena(size_t{1} << 30);
  EXPECT_EQ(arena.committed(), 0u);  // nothing reserved or committed before first use
  char* p = arena.memory(100);
  EXPECT_EQ(arena.committed(), page);
  p[0] = 7;
  char* q = arena.memory(8 << 20);  // grows: same address, the old bytes kept
  EXPECT_EQ(q, p);
  EXPECT_EQ(q[0], 7);
  std::memset(q, 3, 8 << 20);
  EXPECT_EQ(arena.committed(), size_t{8} << 20);  // a multiple of every page size
  EXPECT_EQ(arena.memory(10), p);                 // smaller requests reuse what is there
  EXPECT_EQ(arena.committed(), size_t{8} << 20);  // and commit nothing more
  EXPECT_EQ(arena.memory(0), p);
}

TEST(HostScratchArena, BeyondItsReservationIsOutOfMemory) {
  HostScratchArena arena(size_t{1} << 20);
  char* p = arena.memory(size_t{1} << 20);  // exactly the reservation is fine
  std::memset(p, 1, size_t{1} << 20);
  try {
    (void)arena.memory((size_t{1} << 20) + 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("exceeds the reserved 1.0 MiB"), std::string::npos) << e.what();
  }
}

TEST(HostVirtualMemory, CommittedPagesAreUsableAndDecommitReleasesThem) {
  const size_t page = host_page_size();
  char* base = static_cast<char*>(host_reserve(4 * page));
  host_commit(base + page, 2 * page);
  std::memset(base + page, 5, 2 * page);
  EXPECT_EQ(base[2 * page + 17], 5);
  host_decommit(base + page, 2 * page);
  host_commit(base + page, page);  // committed again: the dropped pages come back zeroed
  EXPECT_EQ(base[page], 0);
  host_release(base, 4 * page);
}
