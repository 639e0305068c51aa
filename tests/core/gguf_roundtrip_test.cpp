// Writer -> reader round trips: every KV type, every tensor type, the exact byte layout, alignment,
// atomic writes, and byte-identical rewrites of real llama.cpp files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/gguf_test_util.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

using testing::Bytes;

std::vector<std::pair<std::string, Value>> every_kv_type() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::pair<std::string, Value>> kvs = {
      {"u8", uint8_t{255}},
      {"i8", int8_t{-128}},
      {"u16", uint16_t{65535}},
      {"i16", int16_t{-32768}},
      {"u32", uint32_t{0xFFFFFFFFu}},
      {"i32", std::numeric_limits<int32_t>::min()},
      {"f32", -1.5f},
      {"f32.nan", nan},
      {"bool.true", true},
      {"bool.false", false},
      {"string", std::string("h\xc3\xa9llo \xe2\x96\x81 world")},
      {"string.nul", std::string("a\0b", 3)},
      {"string.empty", std::string()},
      {"u64", std::numeric_limits<uint64_t>::max()},
      {"i64", std::numeric_limits<int64_t>::min()},
      {"f64", 3.141592653589793},
      {"arr.u8", ArrayValue::of(std::vector<uint8_t>{0, 1, 255})},
      {"arr.i8", ArrayValue::of(std::vector<int8_t>{-128, 0, 127})},
      {"arr.u16", ArrayValue::of(std::vector<uint16_t>{0, 65535})},
      {"arr.i16", ArrayValue::of(std::vector<int16_t>{-32768, 32767})},
      {"arr.u32", ArrayValue::of(std::vector<uint32_t>{1, 0xFFFFFFFFu})},
      {"arr.i32", ArrayValue::of(std::vector<int32_t>{-1, 2, std::numeric_limits<int32_t>::max()})},
      {"arr.f32",
       ArrayValue::of(std::vector<float>{0.5f, -0.0f, nan, std::numeric_limits<float>::infinity()})},
      {"arr.bool", ArrayValue::of(std::vector<bool>{true, false, true})},
      {"arr.string", ArrayValue::of(std::vector<std::string>{"", "a", "\xc3\xbc", std::string("\0x", 2)})},
      {"arr.u64", ArrayValue::of(std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()})},
      {"arr.i64", ArrayValue::of(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 7})},
      {"arr.f64", ArrayValue::of(std::vector<double>{1e300, -2.5})},
      {"arr.empty.u8", ArrayValue::of(std::vector<uint8_t>{})},
      {"arr.empty.string", ArrayValue::of(std::vector<std::string>{})},
  };
  return kvs;
}

TEST(GgufRoundTrip, EveryKvType) {
  Writer w;
  const auto kvs = every_kv_type();
  for (const auto& [k, v] : kvs) w.set(k, v);
  const auto bytes = w.to_bytes();
  testing::save_seed("roundtrip_every_kv_type", bytes);
  const File f = File::parse(bytes);
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.kvs().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(f.kvs()[i].first, kvs[i].first);
    EXPECT_TRUE(same_value(f.kvs()[i].second, kvs[i].second)) << kvs[i].first;
    EXPECT_EQ(static_cast<int>(value_type(f.kvs()[i].second)), static_cast<int>(kvs[i].second.index()));
  }
  // The element type ids follow GGUF (not the variant's order).
  EXPECT_EQ(f.get_array("arr.u64").type, ValueType::U64);
  EXPECT_EQ(f.get_array("arr.f64").type, ValueType::F64);
  EXPECT_EQ(f.get_array("arr.bool").type, ValueType::Bool);
  EXPECT_TRUE(f.tensors().empty());
  // Re-writing what was read gives the same bytes.
  Writer again;
  for (const auto& [k, v] : f.kvs()) again.set(k, v);
  EXPECT_EQ(again.to_bytes(), bytes);
}

// The layout spelled out by hand: counts, KV, infos with trailing 1-dims dropped, aligned offsets,
// zero padding before the data and after every tensor.
TEST(GgufRoundTrip, ExactByteLayout) {
  const float a[3] = {1.0f, 2.0f, 3.0f};
  const uint16_t b[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
  Writer w;
  w.set("general.name", std::string("x"));
  const int64_t ne_a[3] = {3, 1, 1}, ne_b[2] = {2, 2};
  w.add_tensor("a", DType::F32, ne_a, a, sizeof a);
  w.add_tensor("b", DType::F16, ne_b, b, sizeof b);
  Bytes e;
  e.header(3, 2, 1).kv_string("general.name", "x");
  e.tensor_info("a", {3}, 0, 0).tensor_info("b", {2, 2}, 1, 32).pad_to(32);
  for (float v : a) e.put(v);
  e.pad_to(32);
  for (uint16_t v : b) e.put(v);
  e.pad_to(32);
  EXPECT_EQ(w.to_bytes(), e.data);
}

TEST(GgufRoundTrip, AlignmentIsWrittenAndHonoured) {
  Writer w;
  w.set_alignment(64);
  const uint8_t d[68] = {};
  const int64_t ne_q[2] = {32, 2}, ne_f[1] = {1};
  w.add_tensor("q", DType::Q8_0, ne_q, d, 68);
  w.add_tensor("f", DType::F32, ne_f, d, 4);
  const auto bytes = w.to_bytes();
  testing::save_seed("roundtrip_alignment_64", bytes);
  Bytes e;
  e.header(3, 2, 1).kv_u32("general.alignment", 64);
  e.tensor_info("q", {32, 2}, 8, 0).tensor_info("f", {1}, 0, 128).pad_to(64).zeros(68).pad_to(64).zeros(4);
  e.pad_to(64);
  EXPECT_EQ(bytes, e.data);
  const File f = File::parse(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.find_tensor("f")->offset, 128u);
}

// Every Tessera type, then every ggml type through add_tensor_raw: written to disk, mapped back,
// shape, type and bytes identical.
TEST(GgufRoundTrip, EveryTensorType) {
  std::mt19937 rng(7);
  Writer w;
  struct Expect {
    std::string name;
    uint32_t type_id;
    std::array<int64_t, 4> ne;
    std::vector<uint8_t> data;
  };
  std::vector<Expect> expect;
  auto make = [&](std::string name, uint32_t id, int64_t bs, size_t block_bytes) {
    Expect x{std::move(name), id, {bs * 3, 2, 5, 1}, {}};
    x.data.resize(3 * block_bytes * 2 * 5);  // 3 blocks per row, 10 rows
    for (auto& v : x.data) v = static_cast<uint8_t>(rng());
    expect.push_back(std::move(x));
  };
  // Tessera's types with their block geometry as OPS.md states it.
  make("f32", 0, 1, 4);
  make("f16", 1, 1, 2);
  make("bf16", 30, 1, 2);
  make("q4_0", 2, 32, 18);
  make("q8_0", 8, 32, 34);
  make("i32", 26, 1, 4);
  make("q4_1", 3, 32, 20);
  make("q5_0", 6, 32, 22);
  make("q5_1", 7, 32, 24);
  make("q2_K", 10, 256, 84);
  make("q3_K", 11, 256, 110);
  make("q4_K", 12, 256, 144);
  make("q5_K", 13, 256, 176);
  make("q6_K", 14, 256, 210);
  make("q8_K", 15, 256, 292);
  make("iq4_nl", 20, 32, 18);
  make("iq4_xs", 23, 256, 136);
  make("iq2_xxs", 16, 256, 66);
  make("iq2_xs", 17, 256, 74);
  make("iq2_s", 22, 256, 82);
  make("iq3_xxs", 18, 256, 98);
  make("iq3_s", 21, 256, 110);
  make("iq1_s", 19, 256, 50);
  make("iq1_m", 29, 256, 56);
  make("mxfp4", 39, 32, 17);
  for (DType t : kAllDTypes) {
    const auto& x =
        *std::find_if(expect.begin(), expect.end(), [&](const Expect& e) { return e.name == name(t); });
    w.add_tensor(x.name, t, std::span<const int64_t>(x.ne.data(), 3), x.data.data(), x.data.size());
  }
  // The other ggml types (ids and geometry as ggml defines them).
  const struct {
    const char* name;
    uint32_t id;
    int64_t bs;
    size_t bytes;
  } others[] = {{"q8_1", 9, 32, 36}, {"i8", 24, 1, 1},       {"i16", 25, 1, 2},      {"i64", 27, 1, 8},
                {"f64", 28, 1, 8},   {"tq1_0", 34, 256, 54}, {"tq2_0", 35, 256, 66}};
  for (const auto& o : others) {
    make(o.name, o.id, o.bs, o.bytes);
    const auto& x = expect.back();
    w.add_tensor_raw(x.name, x.type_id, std::span<const int64_t>(x.ne.data(), 3), x.data.data(),
                     x.data.size());
  }
  const auto path = testing::temp_dir() / "every_tensor_type.gguf";
  w.write(path.string());
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp." + std::to_string(::getpid())));
  testing::save_seed("roundtrip_every_tensor_type", testing::read_file(path));
  const File f = File::open(path.string());
  ASSERT_EQ(f.tensors().size(), expect.size());
  for (const auto& x : expect) {
    const TensorInfo* t = f.find_tensor(x.name);
    ASSERT_NE(t, nullptr) << x.name;
    EXPECT_EQ(t->type_id, x.type_id) << x.name;
    EXPECT_EQ(t->n_dims, 3) << x.name;
    EXPECT_EQ(t->ne, x.ne) << x.name;
    EXPECT_EQ(t->nbytes, x.data.size()) << x.name;
    EXPECT_EQ(t->offset % 32, 0u);
    EXPECT_EQ(std::memcmp(f.tensor_data(*t), x.data.data(), x.data.size()), 0) << x.name;
    const GgmlType* g = ggml_type(x.type_id);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->name, x.name);
    const auto dt = dtype_from_gguf(x.type_id);
    EXPECT_EQ(t->supported(), dt.has_value()) << x.name;
    if (dt) {
      EXPECT_EQ(t->type, *dt);
      EXPECT_EQ(t->descriptor().nbytes(), x.data.size());
    } else {
      EXPECT_THROW((void)t->descriptor(), Error);
    }
  }
  std::filesystem::remove(path);
}

TEST(GgufRoundTrip, SetReplacesInPlace) {
  Writer w;
  w.set("a", uint32_t{1});
  w.set("b", std::string("x"));
  w.set("a", 2.5f);
  const File f = File::parse(w.to_bytes());
  ASSERT_EQ(f.kvs().size(), 2u);
  EXPECT_EQ(f.kvs()[0].first, "a");
  EXPECT_EQ(f.get_f32("a"), 2.5f);
}

TEST(GgufRoundTrip, DeferredTensorsGiveTheSameFileAsCopiedOnes) {
  // A deferred tensor is produced at write time, in file order, into exactly its byte size; the
  // file equals one written from copies.
  std::vector<std::byte> a(6 * 4), b(34 * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::byte(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::byte(255 - i);
  const int64_t ne_a[] = {3, 2}, ne_b[] = {64};
  Writer copied, deferred;
  for (Writer* w : {&copied, &deferred}) w->set("k", uint32_t{5});
  copied.add_tensor("a", DType::F32, ne_a, a.data(), a.size());
  copied.add_tensor("b", DType::Q8_0, ne_b, b.data(), b.size());
  std::vector<std::string> calls;
  auto producer = [&calls](const std::vector<std::byte>& src, std::string name) {
    return [&calls, &src, name](std::span<std::byte> out) {
      calls.push_back(name + ":" + std::to_string(out.size()));
      std::memcpy(out.data(), src.data(), out.size());
    };
  };
  deferred.add_tensor_deferred("a", 0, ne_a, producer(a, "a"));
  deferred.add_tensor_deferred("b", 8, ne_b, producer(b, "b"));
  EXPECT_EQ(deferred.to_bytes(), copied.to_bytes());
  EXPECT_EQ(calls, (std::vector<std::string>{"a:24", "b:68"}));  // once each, in order, exact sizes
  EXPECT_THROW(deferred.add_tensor_deferred("c", 0, ne_a, nullptr), Error);
  EXPECT_THROW(deferred.add_tensor_deferred("a", 0, ne_a, producer(a, "a")), Error);  // duplicate
}

TEST(GgufRoundTrip, AFailingProducerLeavesNoFile) {
  const auto path = testing::temp_dir() / "deferred_failure.gguf";
  std::filesystem::remove(path);
  Writer w;
  const int64_t ne[] = {8};
  w.add_tensor_deferred("x", 0, ne,
                        [](std::span<std::byte>) { throw Error(ErrorCode::InvalidArgument, "no data"); });
  EXPECT_THROW(w.write(path.string()), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp." + std::to_string(::getpid())));
}

TEST(GgufRoundTrip, WriterRejectsWhatReadersWouldReject) {
  Writer w;
  const float d[4] = {};
  const int64_t ne[1] = {4}, ne5[5] = {4, 1, 1, 1, 1}, neg[2] = {4, -1}, q[1] = {33};
  w.add_tensor("t", DType::F32, ne, d, 16);
  auto code = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Io;  // "no error"
  };
  EXPECT_EQ(code([&] { w.add_tensor("t", DType::F32, ne, d, 16); }), ErrorCode::InvalidArgument);
  EXPECT_NO_THROW(w.add_tensor("", DType::F32, ne, d, 16));  // ggml allows an empty name; so does the reader
  EXPECT_EQ(code([&] { w.add_tensor(std::string(64, 'x'), DType::F32, ne, d, 16); }),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.add_tensor("u", DType::F32, ne, d, 12); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.add_tensor("u", DType::F32, ne5, d, 16); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.add_tensor("u", DType::F32, neg, d, 16); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.add_tensor("u", DType::Q4_0, q, d, 18); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.add_tensor_raw("u", 4, ne, d, 16); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.set_alignment(48); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.set("general.alignment", int32_t{32}); }), ErrorCode::InvalidArgument);
  EXPECT_EQ(code([&] { w.set("", uint8_t{1}); }), ErrorCode::InvalidArgument);
  ArrayValue nested;
  nested.type = ValueType::Array;
  EXPECT_EQ(code([&] { w.set("n", nested); }), ErrorCode::InvalidArgument);
  ArrayValue lying = ArrayValue::of(std::vector<float>{1.0f});
  lying.type = ValueType::I32;
  EXPECT_EQ(code([&] { w.set("l", lying); }), ErrorCode::InvalidArgument);
  // 63 bytes is the longest name.
  EXPECT_NO_THROW(w.add_tensor(std::string(63, 'y'), DType::F32, ne, d, 16));
}

TEST(GgufRoundTrip, WriteIsAtomic) {
  const auto dir = testing::temp_dir() / "atomic";
  std::filesystem::create_directories(dir);
  const auto target = dir / "model.gguf";
  Writer w;
  w.set("v", uint32_t{1});
  w.write(target.string());
  Writer w2;
  w2.set("v", uint32_t{2});
  w2.write(target.string());  // replaces
  EXPECT_EQ(File::open(target.string()).get_u32("v"), 2u);
  // A rename that fails (the target is a directory) leaves neither a partial file nor the temporary.
  const auto blocked = dir / "blocked.gguf";
  std::filesystem::create_directories(blocked / "inside");
  try {
    w.write(blocked.string());
    ADD_FAILURE() << "writing over a directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
  }
  EXPECT_TRUE(std::filesystem::is_directory(blocked));
  EXPECT_FALSE(std::filesystem::exists(blocked.string() + ".tmp." + std::to_string(::getpid())));
  // An unwritable location is an Io error and creates nothing.
  EXPECT_THROW(w.write((dir / "no" / "such" / "dir.gguf").string()), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "no"));
  EXPECT_EQ(File::open(target.string()).get_u32("v"), 2u);
  std::filesystem::remove_all(dir);
}

// Real files written by llama.cpp's tools come back byte for byte when every KV and tensor is copied
// through the Writer: the writer lays files out exactly as llama.cpp does, so llama.cpp reads ours.
TEST(GgufRoundTrip, RealFilesRewriteByteIdentical) {
  for (const char* rel : {"/models/stories260K.gguf", "/vocab/ggml-vocab-llama-spm.gguf"}) {
    const std::string path = std::string(TESSERA_SHARED_DIR) + rel;
    const File f = File::open(path);
    Writer w;
    for (const auto& [k, v] : f.kvs()) w.set(k, v);
    for (const auto& t : f.tensors())
      w.add_tensor_raw(t.name, t.type_id,
                       std::span<const int64_t>(t.ne.data(), static_cast<size_t>(t.n_dims)), f.tensor_data(t),
                       t.nbytes);
    const auto original = testing::read_file(path);
    const auto rewritten = w.to_bytes();
    ASSERT_EQ(rewritten.size(), original.size()) << rel;
    EXPECT_TRUE(rewritten == original) << rel;
  }
}

}  // namespace
}  // namespace tessera::gguf
