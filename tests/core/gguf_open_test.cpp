// File::open on things that are not plain model files, and reading into memory instead of mapping.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "support/cli.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

using namespace tessera;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";

}  // namespace

TEST(GgufOpen, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = ::testing::TempDir() + "/model_fifo.gguf";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Through the CLI under `timeout`, so that a regression fails (exit 124) instead of hanging the suite.
  const auto r = testing_support::run_cli("gguf " + fifo, "timeout 20");
  std::remove(fifo.c_str());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("not a regular file"), std::string::npos) << r.out;
}

TEST(GgufOpen, ADirectoryIsAnIoError) {
  try {
    (void)gguf::File::open(::testing::TempDir());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

// Read into memory, the file's later truncation cannot touch what was read (a mapping would
// fault), and everything equals what the mapping gives.
TEST(GgufOpen, WithoutMmapTheBytesSurviveTruncation) {
  const std::string copy = ::testing::TempDir() + "/stories_copy.gguf";
  std::filesystem::copy_file(kModel, copy, std::filesystem::copy_options::overwrite_existing);
  const gguf::File mapped = gguf::File::open(kModel);
  const gguf::File read = gguf::File::open(copy, {.mmap = false});
  ASSERT_EQ(truncate(copy.c_str(), 0), 0);
  ASSERT_EQ(read.file_size(), mapped.file_size());
  EXPECT_EQ(std::memcmp(read.bytes().data(), mapped.bytes().data(), mapped.file_size()), 0);
  ASSERT_EQ(read.tensors().size(), mapped.tensors().size());
  for (size_t i = 0; i < read.tensors().size(); ++i) {
    const auto& t = read.tensors()[i];
    EXPECT_EQ(t.name, mapped.tensors()[i].name);
    EXPECT_EQ(std::memcmp(read.tensor_data(t), mapped.tensor_data(mapped.tensors()[i]), t.nbytes), 0)
        << t.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read.tensor_data(t)) % 32, 0u) << t.name;  // alignment kept
  }
  std::remove(copy.c_str());
}

TEST(GgufOpen, CliRunWithoutMmapPrintsTheSameStory) {
  const auto mapped =
      testing_support::run_cli("run -m " + kModel + " -p \"Once upon a time\" -n 24 --temp 0");
  const auto read =
      testing_support::run_cli("run -m " + kModel + " -p \"Once upon a time\" -n 24 --temp 0 --no-mmap");
  ASSERT_EQ(mapped.code, 0) << mapped.out;
  ASSERT_EQ(read.code, 0) << read.out;
  const auto story = [](const std::string& out) { return out.substr(0, out.find("load:")); };
  EXPECT_EQ(story(read.out), story(mapped.out));
  EXPECT_NE(read.out.find("Once upon a time, there was a little girl"), std::string::npos) << read.out;
}
