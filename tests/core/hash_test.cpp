#include "core/hash.h"

#include <gtest/gtest.h>

// Published FNV-1a 64-bit test vectors: the seeds of synthetic models must not depend on the platform.
TEST(StableHash, MatchesFnv1aTestVectors) {
  EXPECT_EQ(tessera::stable_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(tessera::stable_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(tessera::stable_hash("foobar"), 0x85944171f73967e8ull);
}

// XXH64 with seed 0, as libxxhash computes it; the same digest whatever pieces the bytes come in.
TEST(Xxh64, MatchesTheReferenceAndIgnoresHowTheBytesAreCut) {
  auto of = [](std::string_view s) {
    tessera::Xxh64 h;
    h.update(s.data(), s.size());
    return h.digest();
  };
  EXPECT_EQ(of(""), 0xef46db3751d8e999ull);
  EXPECT_EQ(of("a"), 0xd24ec4f1a98c6e5bull);
  EXPECT_EQ(of("abc"), 0x44bc2cf5ad770999ull);
  std::string bytes(100, '\0');
  for (int i = 0; i < 100; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(of(bytes), 0x6ac1e58032166597ull);
  for (size_t cut : {1u, 7u, 31u, 32u, 33u, 64u, 99u}) {
    tessera::Xxh64 h;
    h.update(bytes.data(), cut);
    h.update(bytes.data() + cut, bytes.size() - cut);
    EXPECT_EQ(h.digest(), 0x6ac1e58032166597ull) << cut;
  }
}
