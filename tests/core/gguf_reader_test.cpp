// The reader on hand-crafted files (independent of the Writer) and on the real files in ../shared.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/gguf_test_util.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

using testing::Bytes;

// v2 and v3 share one layout; a file with KVs of several kinds and two tensors.
Bytes crafted(uint32_t version) {
  Bytes b;
  b.header(version, 2, 6);
  b.kv_string("general.architecture", "llama");
  b.kv_u32("llama.block_count", 5);
  b.str("llama.eps").put<int32_t>(6).put<float>(1e-5f);
  b.str("tokens").put<int32_t>(9).put<int32_t>(8).put<uint64_t>(3).str("<unk>").str("").str(
      "\xe2\x96\x81the");
  b.str("types").put<int32_t>(9).put<int32_t>(7).put<uint64_t>(2).put<uint8_t>(1).put<uint8_t>(0);
  b.str("big").put<int32_t>(10).put<uint64_t>(uint64_t{1} << 40);
  b.tensor_info("w", {32, 3}, 8, 0);  // q8_0: 3 blocks of 34 bytes
  b.tensor_info("b", {5}, 0, 128);
  b.pad_to(32);
  for (int i = 0; i < 102; ++i) b.put<uint8_t>(static_cast<uint8_t>(i));
  b.zeros(128 - 102);
  for (int i = 0; i < 5; ++i) b.put<float>(static_cast<float>(i) + 0.5f);
  return b;
}

TEST(GgufReader, ParsesVersions2And3) {
  for (uint32_t version : {2u, 3u}) {
    const Bytes b = crafted(version);
    testing::save_seed("reader_crafted_v" + std::to_string(version), b.span());
    const File f = File::parse(b.span());
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.file_size(), b.size());
    EXPECT_EQ(f.data_offset(), b.size() - 128 - 20);
    ASSERT_EQ(f.kvs().size(), 6u);
    EXPECT_EQ(f.kv_offsets()[0], 24u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_u32("llama.block_count"), 5u);
    EXPECT_EQ(f.get_f32("llama.eps"), 1e-5f);
    EXPECT_EQ(f.get_string_array("tokens"), (std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"}));
    const auto& types = std::get<std::vector<bool>>(f.get_array("types").numbers);
    EXPECT_EQ(types, (std::vector<bool>{true, false}));
    EXPECT_EQ(f.get_u64("big"), uint64_t{1} << 40);
    ASSERT_EQ(f.tensors().size(), 2u);
    const TensorInfo& w = f.tensors()[0];
    EXPECT_EQ(w.name, "w");
    EXPECT_EQ(w.type, DType::Q8_0);
    EXPECT_EQ(w.n_dims, 2);
    EXPECT_EQ(w.ne, (std::array<int64_t, 4>{32, 3, 1, 1}));
    EXPECT_EQ(w.nbytes, 102u);
    EXPECT_EQ(w.info_offset, f.kv_offsets()[5] + 8 + 3 + 4 + 8);
    for (int i = 0; i < 102; ++i) EXPECT_EQ(static_cast<int>(f.tensor_data(w)[i]), i);
    const TensorInfo* bias = f.find_tensor("b");
    ASSERT_NE(bias, nullptr);
    EXPECT_EQ(bias->nbytes, 20u);
    float v[5];
    std::memcpy(v, f.tensor_data(*bias), sizeof v);
    EXPECT_EQ(v[4], 4.5f);
    EXPECT_EQ(f.find_tensor("nope"), nullptr);
    EXPECT_EQ(f.find("nope"), nullptr);
    // The descriptor is a contiguous Tessera tensor of the same shape.
    const Tensor t = w.descriptor();
    EXPECT_EQ(t.type, DType::Q8_0);
    EXPECT_EQ(t.nb[0], 34u);
    EXPECT_EQ(t.nb[1], 34u);
    EXPECT_EQ(t.nbytes(), 102u);
    EXPECT_EQ(t.name, "w");
  }
}

TEST(GgufReader, TypedGettersNameKeyAndTypes) {
  const Bytes b = crafted(3);
  const File f = File::parse(b.span(), "m.gguf");
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] { (void)f.get_u32("missing.key"); }), "m.gguf: key 'missing.key' not found");
  EXPECT_EQ(message([&] { (void)f.get_i32("llama.block_count"); }),
            "m.gguf: key 'llama.block_count' is u32, expected i32");
  EXPECT_EQ(message([&] { (void)f.get_string("llama.eps"); }),
            "m.gguf: key 'llama.eps' is f32, expected string");
  EXPECT_EQ(message([&] { (void)f.get_f32_array("tokens"); }),
            "m.gguf: key 'tokens' is array of string, expected array of f32");
  EXPECT_EQ(message([&] { (void)f.get_string_array("types"); }),
            "m.gguf: key 'types' is array of bool, expected array of string");
  EXPECT_EQ(message([&] { (void)f.get_bool("tokens"); }),
            "m.gguf: key 'tokens' is array of string, expected bool");
  EXPECT_EQ(message([&] { (void)f.get_int("llama.eps"); }),
            "m.gguf: key 'llama.eps' is f32, expected an integer");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("big"), int64_t{1} << 40);
}

TEST(GgufReader, WideningGetters) {
  Writer w;
  w.set("u64.max", std::numeric_limits<uint64_t>::max());
  w.set("i8", int8_t{-3});
  w.set("u16s", ArrayValue::of(std::vector<uint16_t>{1, 65535}));
  w.set("u32s.big", ArrayValue::of(std::vector<uint32_t>{1, 0x80000000u}));
  w.set("f64s", ArrayValue::of(std::vector<double>{0.25, -8.0}));
  const auto bytes = w.to_bytes();
  const File f = File::parse(bytes);
  EXPECT_EQ(f.get_int("i8"), -3);
  EXPECT_THROW((void)f.get_int("u64.max"), Error);  // does not fit in i64
  EXPECT_EQ(f.get_i32_array("u16s"), (std::vector<int32_t>{1, 65535}));
  EXPECT_THROW((void)f.get_i32_array("u32s.big"), Error);  // 2^31 does not fit
  EXPECT_EQ(f.get_f32_array("f64s"), (std::vector<float>{0.25f, -8.0f}));
}

// A file with no tensors may end right after its KVs (llama.cpp's vocabulary files do).
TEST(GgufReader, NoTensorsNeedsNoPadding) {
  Bytes b;
  b.header(3, 0, 1).kv_u32("k", 1);
  const File f = File::parse(b.span());
  EXPECT_EQ(f.file_size(), 41u);
  EXPECT_TRUE(f.tensors().empty());
}

// A tensor type ggml knows but Tessera cannot compute with still opens (it can be dumped).
TEST(GgufReader, ForeignGgmlTypesOpen) {
  Bytes b;
  b.header(3, 1, 0).tensor_info("k", {256, 2}, 35, 0).pad_to(32).zeros(132);  // tq2_0: 66 bytes a block
  const File f = File::parse(b.span());
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_FALSE(f.tensors()[0].supported());
  EXPECT_FALSE(f.tensors()[0].type.has_value());
  EXPECT_EQ(f.tensors()[0].nbytes, 132u);
  EXPECT_EQ(ggml_type(35)->name, "tq2_0");
  EXPECT_EQ(ggml_type(16)->name, "iq2_xxs");
}

TEST(GgufReader, OpenErrorsAreIo) {
  try {
    (void)File::open("/nonexistent/dir/x.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.gguf"), std::string::npos);
  }
  try {
    (void)File::open(testing::temp_dir().string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos);
  }
  const auto empty = testing::temp_dir() / "empty.gguf";
  testing::write_file(empty, {});
  try {
    (void)File::open(empty.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
  }
}

std::string shared(const char* rel) { return std::string(TESSERA_SHARED_DIR) + rel; }

// Reads a little-endian value at an absolute file offset with plain stream I/O (not the reader).
template <typename T>
T read_at(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  T v{};
  in.read(reinterpret_cast<char*>(&v), sizeof v);
  return v;
}

TEST(GgufReader, Stories260K) {
  const std::string path = shared("/models/stories260K.gguf");
  const File f = File::open(path);
  testing::save_seed("stories260K_head", f.bytes().first(4096));
  EXPECT_EQ(f.version(), 3u);
  // The README: Llama architecture, 5 layers, 512-token vocabulary, F32.
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 5u);
  const uint32_t n_embd = f.get_u32("llama.embedding_length");
  const uint32_t n_ff = f.get_u32("llama.feed_forward_length");
  const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type").size(), 512u);
  ASSERT_EQ(f.tensors().size(), 2u + 1u + 5u * 9u);
  size_t total = 0;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.type, DType::F32) << t.name;
    EXPECT_EQ(t.nbytes, static_cast<size_t>(4 * t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3])) << t.name;
    total += t.nbytes;
  }
  EXPECT_EQ(f.data_offset() + total, f.file_size());  // tensors packed up to the end
  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::array<int64_t, 4>{n_embd, 512, 1, 1}));
  const TensorInfo* down = f.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne, (std::array<int64_t, 4>{n_ff, n_embd, 1, 1}));
  // The mapping holds the file's bytes where the infos say.
  for (const TensorInfo* t : {emb, down}) {
    const size_t at = f.data_offset() + t->offset + t->nbytes - 4;
    float mapped;
    std::memcpy(&mapped, f.tensor_data(*t) + t->nbytes - 4, 4);
    EXPECT_EQ(mapped, read_at<float>(path, at)) << t->name;
  }
}

TEST(GgufReader, LlamaSpmVocabulary) {
  const File f = File::open(shared("/vocab/ggml-vocab-llama-spm.gguf"));
  testing::save_seed("vocab_head", f.bytes().first(8192));
  // The README: 32000 tokens with scores and token types, no tensors.
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 32000);
  EXPECT_EQ(f.get_f32_array("tokenizer.ggml.scores").size(), 32000u);
  const auto types = f.get_i32_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 32000u);
  EXPECT_EQ(types[0], 2);                              // <unk> is "unknown"
  EXPECT_EQ(types[1], 3);                              // <s> is "control"
  EXPECT_EQ(tokens[259], "\xe2\x96\x81\xe2\x96\x81");  // the first merge after <unk> <s> </s> and 256 bytes
  for (int i = 3; i < 259; ++i) {
    EXPECT_EQ(types[static_cast<size_t>(i)], 6);  // byte tokens
    EXPECT_EQ(tokens[static_cast<size_t>(i)], fmt::format("<0x{:02X}>", i - 3));
  }
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(f.get_u32("tokenizer.ggml.bos_token_id"), 1u);
}

}  // namespace
}  // namespace tessera::gguf
