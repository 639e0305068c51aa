// The on-disk program cache (core/binary_cache.h): one file per program and key, whole or absent.
#include "core/binary_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using tessera::BinaryCache;

namespace {

std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() / ("tessera-binary-cache-" + std::to_string(::getpid()));
}

}  // namespace

TEST(BinaryCache, AnEntryIsStoredWholeAndNamedByEveryPartOfItsKey) {
  const auto dir = temp_dir();
  std::filesystem::remove_all(dir);
  const BinaryCache cache(dir.string() + "/nested");
  ASSERT_TRUE(cache.enabled());
  const std::string p = cache.path("copy", {"device A", "source"}, ".bin");
  EXPECT_EQ(p.rfind(dir.string() + "/nested/copy-", 0), 0u) << p;
  EXPECT_EQ(p.substr(p.size() - 4), ".bin");
  // Another device, source, or a split of the same bytes between the parts: another entry.
  EXPECT_NE(cache.path("copy", {"device B", "source"}, ".bin"), p);
  EXPECT_NE(cache.path("copy", {"device A", "source2"}, ".bin"), p);
  EXPECT_NE(cache.path("copy", {"device ", "Asource"}, ".bin"), p);
  EXPECT_EQ(cache.path("copy", {"device A", "source"}, ".bin"), p);  // stable

  EXPECT_TRUE(cache.load(p).empty());
  const std::vector<unsigned char> bytes = {1, 2, 3, 0, 255};
  cache.store(p, bytes);  // creates the folder
  EXPECT_EQ(cache.load(p), bytes);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "nested")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
  cache.drop(p);
  EXPECT_TRUE(cache.load(p).empty());
  std::filesystem::remove_all(dir);
}

TEST(BinaryCache, WithoutAFolderOrWhereNothingCanBeWrittenItOnlyCostsACompile) {
  const BinaryCache none("");
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.path("copy", {"x"}, ".bin"), "");
  none.store("", std::vector<unsigned char>{1});
  EXPECT_TRUE(none.load("").empty());
  // A folder under a regular file cannot be made: the store is logged, not thrown.
  const auto file = temp_dir().string() + "-file";
  { std::ofstream(file) << "x"; }
  const BinaryCache blocked(file + "/cache");
  const std::string p = blocked.path("copy", {"x"}, ".bin");
  EXPECT_NO_THROW(blocked.store(p, std::vector<unsigned char>{1, 2}));
  EXPECT_TRUE(blocked.load(p).empty());
  std::filesystem::remove(file);
}
