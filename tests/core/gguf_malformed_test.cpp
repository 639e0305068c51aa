// One crafted malformed file per validation rule of OPS.md: each must give Error(CorruptFile) naming
// the byte offset, the field and what was wrong, and `tessera gguf` must exit non-zero with it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/gguf_test_util.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

using testing::Bytes;

struct Case {
  std::string name;
  Bytes bytes;
  size_t at;          // byte offset the error must name
  std::string field;  // field it must name
  std::string what;   // what was wrong (a substring)
};

constexpr int32_t kF32 = 0, kQ4_0 = 2;
constexpr int64_t kHuge = int64_t{1} << 40;

// The well-formed file the defects are made in: one KV ("a" = 7) and one f32 tensor "t" of 4 elements.
// Offsets: header 0..24, kv at 24 (type 33, value 37), tensor info at 41 (n_dims 50, ne[0] 54, type 62,
// offset 66), infos end at 74, data section at 96, file ends at 112.
Bytes valid_file() {
  Bytes b;
  b.header(3, 1, 1).kv_u32("a", 7).tensor_info("t", {4}, kF32, 0).pad_to(32).zeros(16);
  return b;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto add = [&](std::string name, Bytes b, size_t at, std::string field, std::string what) {
    c.push_back({std::move(name), std::move(b), at, std::move(field), std::move(what)});
  };
  {
    Bytes b = valid_file();
    b.data[3] = std::byte{'X'};
    add("bad_magic", b, 0, "magic", "not a GGUF file");
  }
  for (uint32_t v : {1u, 4u}) {
    Bytes b = valid_file();
    std::memcpy(b.data.data() + 4, &v, 4);
    add(fmt::format("version_{}", v), b, 4, "version", fmt::format("{} is not supported", v));
  }
  {
    Bytes b = valid_file();
    const uint32_t v = 0x03000000;  // 3 written big-endian
    std::memcpy(b.data.data() + 4, &v, 4);
    add("byte_swapped_version", b, 4, "version", "byte-swapped");
  }
  {
    Bytes b;
    b.header(3, 0, kHuge).kv_u32("a", 7);
    add("n_kv_larger_than_file", b, 16, "n_kv", "1099511627776 key/value pairs cannot fit in the 17 bytes");
  }
  {
    Bytes b;
    b.header(3, kHuge, 0).tensor_info("t", {4}, kF32, 0);
    add("n_tensors_larger_than_file", b, 8, "n_tensors", "cannot fit");
  }
  {
    Bytes b;
    b.header(3, 1, 2).kv_u32("a", 7).tensor_info("t", {4}, kF32, 0);  // room for 2 KVs or 1 tensor, not both
    add("counts_together_larger_than_file", b, 8, "n_tensors", "need at least 52 bytes, but only 50 follow");
  }
  {
    Bytes b;
    b.header(3, -1, 0).zeros(32);
    add("negative_n_tensors", b, 8, "n_tensors", "-1 is negative");
  }
  {
    Bytes b;
    b.header(3, 0, 1).put<uint64_t>(1000).raw("abcdefgh");
    add("key_length_past_end", b, 24, "kv[0] key",
        "string length 1000 runs past the end of the file (8 bytes");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("k").put<int32_t>(8).put<uint64_t>(uint64_t{1} << 40).raw("xyz");
    add("string_length_past_end", b, 37, "kv[0] \"k\"", "string length 1099511627776 runs past the end");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("arr").put<int32_t>(9).put<int32_t>(9).put<uint64_t>(1);
    b.put<int32_t>(4).put<uint64_t>(1).put<uint32_t>(5);
    add("nested_array", b, 39, "kv[0] \"arr\"", "nested arrays are not allowed");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("arr").put<int32_t>(9).put<int32_t>(4).put<uint64_t>(kHuge).put<uint32_t>(5);
    add("array_count_past_end", b, 43, "kv[0] \"arr\"",
        "an array of 1099511627776 u32 values runs past the end");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("arr").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(uint64_t{1} << 61).str("x");
    add("string_array_count_past_end", b, 43, "kv[0] \"arr\"", "an array of 2305843009213693952 strings");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("arr").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(2).str("x").put<uint64_t>(50);
    add("string_array_element_past_end", b, 60, "kv[0] \"arr\"[1]", "string length 50 runs past the end");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("k").put<int32_t>(13).put<uint32_t>(0);
    add("unknown_value_type", b, 33, "kv[0] \"k\"", "unknown value type 13");
  }
  {
    Bytes b;
    b.header(3, 0, 1).str("k").put<int32_t>(9).put<int32_t>(-2).put<uint64_t>(0);
    add("unknown_array_element_type", b, 37, "kv[0] \"k\"", "unknown array element type -2");
  }
  {
    Bytes b;
    b.header(3, 0, 1).kv_u32("", 7);
    add("empty_key", b, 24, "kv[0] key", "the key is empty");
  }
  {
    Bytes b;
    b.header(3, 0, 2).kv_u32("k", 7).kv_u32("k", 8);
    add("duplicate_key", b, 41, "kv[1] key \"k\"", "duplicate key (already defined by kv[0] at byte 24)");
  }
  {
    Bytes b;
    b.header(3, 2, 0).tensor_info("t", {4}, kF32, 0).tensor_info("t", {4}, kF32, 32).pad_to(32).zeros(48);
    add("duplicate_tensor_name", b, 57, "tensor[1] name \"t\"",
        "duplicate tensor name (already used by tensor[0] at byte 24)");
  }
  for (size_t len : {64u, 65u}) {
    Bytes b;
    b.header(3, 1, 0).tensor_info(std::string(len, 'x'), {4}, kF32, 0).pad_to(32).zeros(16);
    add(fmt::format("name_{}_bytes", len), b, 24, "tensor[0] name",
        fmt::format("{} bytes long; the limit is 63", len));
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4, 1, 1, 1, 1}, kF32, 0).pad_to(32).zeros(16);
    add("n_dims_5", b, 33, "tensor[0] \"t\" n_dims", "5 dimensions; at most 4 are allowed");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4, -1}, kF32, 0).pad_to(32).zeros(16);
    add("negative_ne", b, 45, "tensor[0] \"t\" ne[1]", "-1 is negative");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {int64_t{1} << 32, int64_t{1} << 31}, kF32, 0).pad_to(32).zeros(16);
    add("overflowing_element_count", b, 45, "tensor[0] \"t\" ne[1]", "element count overflow");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {int64_t{1} << 62}, kF32, 0).pad_to(32).zeros(16);
    add("overflowing_byte_size", b, 37, "tensor[0] \"t\" ne", "byte size overflows");
  }
  {
    // A zero dim does not hide an overflow in the others (strides are computed from all of them).
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {0, int64_t{1} << 62, 4}, kF32, 0).pad_to(32);
    add("overflow_behind_empty_dim", b, 53, "tensor[0] \"t\" ne[2]", "element count overflow");
  }
  for (int32_t type : {4, 31, 1000, -1}) {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4}, type, 0).pad_to(32).zeros(16);
    add(fmt::format("unknown_tensor_type_{}", type < 0 ? std::string("minus1") : std::to_string(type)), b, 45,
        "tensor[0] \"t\" type", fmt::format("unknown tensor type {}", type));
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {33}, kQ4_0, 0).pad_to(32).zeros(64);
    add("ne0_not_divisible_by_block", b, 37, "tensor[0] \"t\" ne[0]",
        "33 is not a multiple of the block size 32 of type q4_0");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4}, kF32, 4).pad_to(32).zeros(32);
    add("unaligned_offset", b, 49, "tensor[0] \"t\" offset", "4 is not a multiple of the alignment 32");
  }
  {
    Bytes b;
    b.header(3, 2, 0).tensor_info("t1", {16}, kF32, 0).tensor_info("t2", {4}, kF32, 32).pad_to(32).zeros(64);
    add("overlapping_offsets", b, 84, "tensor[1] \"t2\" offset",
        "data [32, 48) overlaps tensor[0] \"t1\" at [0, 64)");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4}, kF32, 0).pad_to(32).zeros(8);
    add("data_past_end", b, 49, "tensor[0] \"t\" offset",
        "16 bytes at data offset 0 (data section at byte 64) run past the end of the file (72 bytes)");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4}, kF32, uint64_t{1} << 62).pad_to(32).zeros(16);
    add("offset_past_end", b, 49, "tensor[0] \"t\" offset", "run past the end of the file");
  }
  {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", {4}, kF32, ~uint64_t{0} - 31).pad_to(32).zeros(16);
    add("offset_wraps_around", b, 49, "tensor[0] \"t\" offset", "run past the end of the file");
  }
  for (uint32_t a : {0u, 48u}) {
    Bytes b;
    b.header(3, 0, 1).kv_u32("general.alignment", a);
    add(fmt::format("alignment_{}", a), b, 24, "kv[0] \"general.alignment\"",
        fmt::format("{} is not a power of two", a));
  }
  {
    Bytes b;
    b.header(3, 0, 1).kv_string("general.alignment", "32");
    add("alignment_not_u32", b, 24, "kv[0] \"general.alignment\"", "must be u32, found string");
  }
  {
    Bytes b;
    b.raw("GG");
    add("two_bytes", b, 0, "magic", "the file is 2 bytes, too short for a GGUF header");
  }
  // Truncation at every section boundary of the valid file.
  const Bytes full = valid_file();
  const struct {
    const char* name;
    size_t cut;
    size_t at;
    const char* field;
    const char* what;
  } cuts[] = {
      {"cut_in_magic", 3, 0, "magic", "the file is 3 bytes, too short"},
      {"cut_after_magic", 4, 4, "version", "needs 4 bytes but the file ends after 0 (truncated at 4 bytes)"},
      {"cut_after_version", 8, 8, "n_tensors", "needs 8 bytes"},
      {"cut_after_n_tensors", 16, 16, "n_kv", "needs 8 bytes"},
      {"cut_after_header", 24, 16, "n_kv", "cannot fit in the 0 bytes"},
      {"cut_after_kv_key", 33, 16, "n_kv", "cannot fit in the 9 bytes"},
      {"cut_after_kvs", 41, 8, "n_tensors", "cannot fit in the 17 bytes"},  // caught up front by the counts
      {"cut_in_tensor_offset", 70, 66, "tensor[0] \"t\" offset", "needs 8 bytes but the file ends after 4"},
      {"cut_after_infos", 74, 66, "tensor[0] \"t\" offset", "run past the end of the file (74 bytes)"},
      {"cut_in_padding", 80, 66, "tensor[0] \"t\" offset", "run past the end of the file (80 bytes)"},
      {"cut_at_data", 96, 66, "tensor[0] \"t\" offset", "run past the end of the file (96 bytes)"},
      {"cut_in_data", 111, 66, "tensor[0] \"t\" offset", "run past the end of the file (111 bytes)"},
  };
  for (const auto& cut : cuts) {
    Bytes b;
    b.data.assign(full.data.begin(), full.data.begin() + static_cast<std::ptrdiff_t>(cut.cut));
    add(cut.name, b, cut.at, cut.field, cut.what);
  }
  return c;
}

class GgufMalformed : public ::testing::TestWithParam<Case> {};

TEST(GgufMalformedBase, ValidFileParses) {
  const Bytes b = valid_file();
  testing::save_seed("valid_small", b.span());
  const File f = File::parse(b.span());
  EXPECT_EQ(f.get_u32("a"), 7u);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.data_offset(), 96u);
  EXPECT_EQ(f.tensors()[0].nbytes, 16u);
}

TEST_P(GgufMalformed, ParseGivesCorruptFileError) {
  const Case& c = GetParam();
  testing::save_seed("malformed_" + c.name, c.bytes.span());
  try {
    (void)File::parse(c.bytes.span(), "crafted.gguf");
    FAIL() << "no error for " << c.name;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
    const std::string msg = e.what();
    EXPECT_NE(msg.find(fmt::format("crafted.gguf: byte {}: {}: ", c.at, c.field)), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
  }
}

TEST_P(GgufMalformed, CliExitsNonZeroWithTheMessage) {
  const Case& c = GetParam();
  const auto path = testing::temp_dir() / (c.name + ".gguf");
  testing::write_file(path, c.bytes.span());
  const auto r = testing::run_cli("gguf " + testing::shell_quote(path.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tessera: error: " + path.string() + ": byte " + std::to_string(c.at)),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(c.what), std::string::npos) << r.err;
  std::filesystem::remove(path);
}

// Read metadata only (a pipeline stage's way), the same file gives the same error.
TEST_P(GgufMalformed, MetadataOnlyGivesTheSameError) {
  const Case& c = GetParam();
  const auto path = testing::temp_dir() / (c.name + ".meta.gguf");
  testing::write_file(path, c.bytes.span());
  try {
    (void)File::open(path.string(), {.metadata_only = true});
    ADD_FAILURE() << "no error for " << c.name;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << msg;
    EXPECT_NE(msg.find(fmt::format("byte {}: {}: ", c.at, c.field)), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
  }
  std::filesystem::remove(path);
}

// Infos longer than the first read (1 MiB) are read as far as they go; tensors come from the file.
TEST(GgufMetadataOnly, LongInfosAndTensorsReadFromTheFile) {
  Bytes b;
  b.header(3, 2, 1);
  constexpr uint64_t kStrings = 200000;  // 8 + 12 bytes each: 4 MB of keys
  b.str("tokens").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(kStrings);
  for (uint64_t i = 0; i < kStrings; ++i) b.str(fmt::format("tok{:09}", i));
  b.tensor_info("w", {32, 2}, kQ4_0, 0).tensor_info("v", {3}, kF32, 64).pad_to(32);
  for (int i = 0; i < 64 + 12; ++i) b.put<uint8_t>(static_cast<uint8_t>(i * 7 + 1));
  const auto path = testing::temp_dir() / "long_infos.gguf";
  testing::write_file(path, b.span());
  const File whole = File::parse(b.span());
  const File meta = File::open(path.string(), {.metadata_only = true});
  EXPECT_EQ(meta.file_size(), b.size());
  EXPECT_EQ(meta.data_offset(), whole.data_offset());
  ASSERT_EQ(meta.get_string_array("tokens").size(), kStrings);
  EXPECT_EQ(meta.get_string_array("tokens").back(), "tok000199999");
  ASSERT_EQ(meta.tensors().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TensorInfo& t = meta.tensors()[i];
    EXPECT_EQ(meta.tensor_data(t), nullptr);
    std::vector<std::byte> got(t.nbytes);
    meta.read_tensor(t, got.data());
    EXPECT_EQ(std::memcmp(got.data(), whole.tensor_data(whole.tensors()[i]), t.nbytes), 0) << t.name;
    // A range of it: the same bytes; past its end: an error.
    std::vector<std::byte> part(5);
    meta.read_tensor(t, part.data(), 3, 5);
    EXPECT_EQ(std::memcmp(part.data(), whole.tensor_data(whole.tensors()[i]) + 3, 5), 0) << t.name;
    EXPECT_THROW(meta.read_tensor(t, part.data(), t.nbytes - 4, 5), Error);
    // Mapped alone (at an offset inside a page): the same bytes.
    const std::byte* mapped = meta.map_tensor(t);
    ASSERT_NE(mapped, nullptr);
    EXPECT_EQ(std::memcmp(mapped, whole.tensor_data(whole.tensors()[i]), t.nbytes), 0) << t.name;
    EXPECT_EQ(whole.map_tensor(whole.tensors()[i]), whole.tensor_data(whole.tensors()[i]));
  }
  // A file cut after opening: reading a tensor is an Io error, not garbage.
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(whole.data_offset() + 10)), 0);
  std::vector<std::byte> got(meta.tensors()[1].nbytes);
  try {
    meta.read_tensor(meta.tensors()[1], got.data());
    ADD_FAILURE() << "read past the end";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("tensor v"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Every strict prefix of a well-formed file (header, KVs of every shape, tensor infos, padding, data that
// ends at the end of the file) is an error, never a crash or an out-of-bounds read.
TEST(GgufTruncation, EveryPrefixIsAnError) {
  Bytes b;
  b.header(3, 2, 4).kv_string("general.name", "truncate me");
  b.str("tokens").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(3).str("a").str("").str("ccc");
  b.str("ids").put<int32_t>(9).put<int32_t>(5).put<uint64_t>(2).put<int32_t>(-1).put<int32_t>(2);
  b.kv_u32("general.alignment", 64);
  b.tensor_info("w", {32, 2}, kQ4_0, 0).tensor_info("v", {3}, kF32, 64).pad_to(64).zeros(64).zeros(12);
  testing::save_seed("truncation_base", b.span());
  const File whole = File::parse(b.span());
  ASSERT_EQ(whole.tensors().size(), 2u);
  ASSERT_EQ(whole.data_offset() + 64 + 12, b.size());
  for (size_t n = 0; n < b.size(); ++n) {
    try {
      (void)File::parse(b.span().first(n));
      ADD_FAILURE() << "a prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << n;
    }
  }
}

// Claimed counts and lengths cost nothing before they are checked against the bytes present.
TEST(GgufTruncation, HugeClaimsInTinyFilesFailFast) {
  for (int64_t count : {int64_t{1} << 30, int64_t{1} << 50, std::numeric_limits<int64_t>::max()}) {
    Bytes kv, ti, arr;
    kv.header(3, 0, count).zeros(64);
    ti.header(3, count, 0).zeros(64);
    arr.header(3, 0, 1).str("k").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(static_cast<uint64_t>(count));
    for (const Bytes* b : {&kv, &ti, &arr}) EXPECT_THROW((void)File::parse(b->span()), Error);
  }
}

}  // namespace
}  // namespace tessera::gguf
