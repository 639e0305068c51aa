// Loading a file's tensors: zero copy into host memory, or chunked Buffer::set into a device's buffers.
#include "tessera/gguf_loader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "core/gguf_test_util.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

namespace tessera::gguf {
namespace {

// A stand-in device: its memory holds every byte xor 0xA5 (a "device layout"), tensors are padded
// by 100 bytes, and it records each set() so the test can check chunking.
class FakeDeviceType final : public BufferType {
 public:
  struct SetCall {
    std::string tensor;
    size_t offset, size;
  };
  std::vector<SetCall> calls;

  std::string name() const override { return "Fake"; }
  std::unique_ptr<Buffer> allocate(size_t size) override;
  size_t alignment() const override { return 256; }
  size_t alloc_size(const Tensor& t) const override { return t.nbytes() + 100; }
  bool is_host() const override { return false; }
};

class FakeDeviceBuffer final : public Buffer {
 public:
  FakeDeviceBuffer(FakeDeviceType& type, size_t size) : Buffer(type, size), memory_(size, 0), fake_(type) {}
  void* base() const override { return const_cast<uint8_t*>(memory_.data()); }
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    fake_.calls.push_back({t.name, offset, size});
    auto* dst = static_cast<uint8_t*>(t.data) + offset;
    for (size_t i = 0; i < size; ++i) dst[i] = static_cast<const uint8_t*>(src)[i] ^ 0xA5;
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    const auto* from = static_cast<const uint8_t*>(t.data) + offset;
    for (size_t i = 0; i < size; ++i) static_cast<uint8_t*>(dst)[i] = from[i] ^ 0xA5;
  }
  void clear(uint8_t value) override { std::fill(memory_.begin(), memory_.end(), value); }

 private:
  std::vector<uint8_t> memory_;
  FakeDeviceType& fake_;
};

std::unique_ptr<Buffer> FakeDeviceType::allocate(size_t size) {
  return std::make_unique<FakeDeviceBuffer>(*this, size);
}

struct Sample {
  std::vector<std::byte> bytes;
  std::map<std::string, std::vector<uint8_t>> data;
};

Sample sample_file() {
  std::mt19937 rng(3);
  Sample s;
  Writer w;
  w.set("general.architecture", std::string("test"));
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, size_t nbytes) {
    auto& d = s.data[name];
    d.resize(nbytes);
    for (auto& v : d) v = static_cast<uint8_t>(rng());
    w.add_tensor(name, type, ne, d.data(), nbytes);
  };
  add("q4", DType::Q4_0, {64, 10}, 2 * 18 * 10);  // 360 bytes
  add("q8", DType::Q8_0, {32, 7}, 34 * 7);        // 238 bytes
  add("f32", DType::F32, {5, 3}, 60);
  add("empty", DType::F16, {8, 0}, 0);
  s.bytes = w.to_bytes();
  testing::save_seed("loader_sample", s.bytes);
  return s;
}

std::vector<uint8_t> read_back(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  tensor_get(t, out.data(), 0, out.size());
  return out;
}

TEST(GgufLoader, HostIsZeroCopyIntoTheMapping) {
  const Sample s = sample_file();
  const auto path = testing::temp_dir() / "loader_host.gguf";
  testing::write_file(path, s.bytes);
  const File f = File::open(path.string());
  Context ctx;
  std::vector<std::pair<size_t, size_t>> progress;
  auto loaded =
      load_tensors(f, ctx, host_buffer_type(), [&](size_t d, size_t t) { progress.emplace_back(d, t); });
  EXPECT_TRUE(loaded.zero_copy);
  ASSERT_EQ(loaded.tensors.size(), 4u);
  for (const auto& info : f.tensors()) {
    Tensor* t = loaded.tensors.at(info.name);
    EXPECT_EQ(t->data, static_cast<const void*>(f.tensor_data(info))) << info.name;
    EXPECT_EQ(t->buffer, loaded.buffer.get());
    EXPECT_TRUE(t->buffer->type().is_host());
    EXPECT_EQ(t->ne, info.ne);
    EXPECT_TRUE(t->flags & kFlagWeight);
    EXPECT_EQ(read_back(*t), s.data.at(info.name)) << info.name;
  }
  // The mapping is read-only: writes are refused, not faulted.
  uint8_t one = 1;
  EXPECT_THROW(tensor_set(*loaded.tensors.at("f32"), &one, 0, 1), Error);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), (std::pair<size_t, size_t>{658, 658}));
  std::filesystem::remove(path);
}

TEST(GgufLoader, DeviceGetsChunksOfWholeBlocksThroughSet) {
  const Sample s = sample_file();
  const File f = File::parse(s.bytes);
  FakeDeviceType device;
  Context ctx;
  std::vector<size_t> done;
  auto loaded = load_tensors(
      f, ctx, device,
      [&](size_t d, size_t total) {
        EXPECT_EQ(total, 658u);
        done.push_back(d);
      },
      100);
  EXPECT_FALSE(loaded.zero_copy);
  ASSERT_NE(loaded.buffer, nullptr);
  // Padded tensors, each at a multiple of the device alignment: 0, 512, 1024 (+160), 1280.
  EXPECT_EQ(loaded.buffer->size(), 1280u + 100u);
  EXPECT_EQ(static_cast<char*>(loaded.tensors.at("q8")->data) - static_cast<char*>(loaded.buffer->base()),
            512);
  for (const auto& [name, bytes] : s.data) EXPECT_EQ(read_back(*loaded.tensors.at(name)), bytes) << name;
  // q4_0 chunks are 5 blocks (90 bytes), q8_0 2 blocks (68 bytes), f32 100 bytes (so all 60 at once).
  std::vector<std::string> expected = {"q4 0 90",  "q4 90 90",  "q4 180 90", "q4 270 90", "q8 0 68",
                                       "q8 68 68", "q8 136 68", "q8 204 34", "f32 0 60"};
  std::vector<std::string> got;
  for (const auto& c : device.calls) got.push_back(fmt::format("{} {} {}", c.tensor, c.offset, c.size));
  EXPECT_EQ(got, expected);
  // Progress starts at 0, grows monotonically and ends at the total.
  ASSERT_EQ(done.size(), 10u);
  EXPECT_EQ(done.front(), 0u);
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
  EXPECT_EQ(done.back(), 658u);
}

TEST(GgufLoader, RealModelOnHostAndDevice) {
  const File f = File::open(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  Context host_ctx, dev_ctx;
  auto host = load_tensors(f, host_ctx, host_buffer_type());
  FakeDeviceType device;
  auto dev = load_tensors(f, dev_ctx, device, {}, 4096);
  ASSERT_EQ(host.tensors.size(), f.tensors().size());
  for (const auto& info : f.tensors()) {
    const auto expected =
        std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(f.tensor_data(info)),
                             reinterpret_cast<const uint8_t*>(f.tensor_data(info)) + info.nbytes);
    EXPECT_EQ(read_back(*host.tensors.at(info.name)), expected) << info.name;
    EXPECT_EQ(read_back(*dev.tensors.at(info.name)), expected) << info.name;
  }
  for (const auto& c : device.calls) EXPECT_LE(c.size, 4096u);
}

// Every registered device (the CPU, and OpenCL devices where present) gets the file's bytes through
// its own buffers and layouts, in chunks that split rows, and gives them back unchanged.
// Regression: loading into a device dropped the source pages with madvise(MADV_DONTNEED) also for
// a file read into memory (OpenOptions::mmap off), which zeroes a heap copy instead of letting the
// kernel re-read it: a second load from the same File got zeros.
TEST(GgufLoader, AFileReadIntoMemoryKeepsItsBytesAfterADeviceLoad) {
  const std::string path = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
  const File f = File::open(path, {.mmap = false});
  const File mapped = File::open(path);
  FakeDeviceType device;
  Context first_ctx, second_ctx;
  (void)load_tensors(f, first_ctx, device);  // chunks large enough to hold whole pages
  auto second = load_tensors(f, second_ctx, device);
  for (const auto& info : f.tensors()) {
    const auto* want = reinterpret_cast<const uint8_t*>(mapped.tensor_data(*mapped.find_tensor(info.name)));
    EXPECT_EQ(read_back(*second.tensors.at(info.name)), std::vector<uint8_t>(want, want + info.nbytes))
        << info.name;
  }
}

TEST(GgufLoader, EveryDeviceReadsBackTheFileBytes) {
  std::mt19937 rng(11);
  Writer w;
  std::map<std::string, std::vector<uint8_t>> data;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, size_t nbytes) {
    auto& d = data[name];
    d.resize(nbytes);
    for (auto& v : d) v = static_cast<uint8_t>(rng());
    if (type == DType::Q4_0 || type == DType::Q8_0) {
      // Keep the fp16 scales finite (block layout: scale first).
      const size_t block = type == DType::Q4_0 ? 18 : 34;
      for (size_t b = 0; b < nbytes; b += block) d[b + 1] &= 0x3B;
    }
    w.add_tensor(name, type, ne, d.data(), nbytes);
  };
  add("q4", DType::Q4_0, {96, 7}, 3 * 18 * 7);
  add("q8", DType::Q8_0, {544, 3}, 17 * 34 * 3);
  add("f16", DType::F16, {33, 5}, 33 * 2 * 5);
  add("f32", DType::F32, {10, 3, 2}, 240);
  add("i32", DType::I32, {7}, 28);
  const auto bytes = w.to_bytes();
  testing::save_seed("loader_every_device", bytes);
  const File f = File::parse(bytes);
  for (const auto& device : Registry::instance().devices()) {
    SCOPED_TRACE(device->name());
    Context ctx;
    size_t last = 0;
    auto loaded = load_tensors(
        f, ctx, device->buffer_type(), [&](size_t d, size_t) { last = d; }, 200);
    EXPECT_EQ(last, size_t{378 + 1734 + 330 + 240 + 28});
    for (const auto& [name, expected] : data)
      EXPECT_EQ(read_back(*loaded.tensors.at(name)), expected) << name;
  }
}

TEST(GgufLoader, RefusesWhatItCannotLoad) {
  Writer w;
  const std::vector<uint8_t> block(66);
  const int64_t ne[1] = {256};
  w.add_tensor_raw("blk.0.tq2", 35, ne, block.data(), block.size());  // tq2_0: ggml's, not Tessera's
  const auto bytes = w.to_bytes();
  const File f = File::parse(bytes);
  Context ctx;
  try {
    (void)load_tensors(f, ctx, host_buffer_type());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("'blk.0.tq2' has type tq2_0"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ctx.tensors().empty());  // nothing half-created
  const Sample s = sample_file();
  const File ok = File::parse(s.bytes);
  Context allocating(true);
  EXPECT_THROW((void)load_tensors(ok, allocating, host_buffer_type()), Error);
}

}  // namespace
}  // namespace tessera::gguf
