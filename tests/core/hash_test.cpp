#include "core/hash.h"

#include <gtest/gtest.h>

// Published FNV-1a 64-bit test vectors: the seeds of synthetic models must not depend on the platform.
TEST(StableHash, MatchesFnv1aTestVectors) {
  EXPECT_EQ(tessera::stable_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(tessera::stable_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(tessera::stable_hash("foobar"), 0x85944171f73967e8ull);
}
