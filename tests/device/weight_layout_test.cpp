// Weight layouts as an interface (backend/weight_layout.h): a layout defined here, outside the
// device layer, works through device buffers and DeviceBackend transfers; and the CPU's interleaved
// layout works in device memory through the same interface.
#include "backend/weight_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "cpu/interleave.h"
#include "device/backend.h"
#include "device/device.h"
#include "host/runtime.h"
#include "tessera/context.h"
#include "tessera/error.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

// F32 tensors stored with their elements in reverse order, and 64 bytes of slack after every
// tensor; other types as they are.
class ReversedLayout final : public WeightLayout {
 public:
  std::string name() const override { return "reversed f32"; }
  size_t alloc_size(const Tensor& t) const override { return t.nbytes() + 64; }
  bool encodes(const Tensor& root) const override { return root.type == DType::F32; }
  std::vector<ImageSpan> spans(const Tensor& root, size_t offset, size_t size) const override {
    check(offset, size);
    return {{root.nbytes() - offset - size, size}};
  }
  void encode(const Tensor& root, size_t offset, size_t size, const void* ggml,
              const ImageWindow& image) const override {
    check(offset, size);
    for (size_t i = 0; i < size; i += 4)
      std::memcpy(image.at(root.nbytes() - offset - i - 4), static_cast<const char*>(ggml) + i, 4);
  }
  void decode(const Tensor& root, size_t offset, size_t size, const ImageWindow& image,
              void* ggml) const override {
    check(offset, size);
    for (size_t i = 0; i < size; i += 4)
      std::memcpy(static_cast<char*>(ggml) + i, image.at(root.nbytes() - offset - i - 4), 4);
  }

 private:
  static void check(size_t offset, size_t size) {
    if (offset % 4 != 0 || size % 4 != 0) throw Error(ErrorCode::InvalidArgument, "reversed: split element");
  }
};

// Two host-runtime devices whose library stores weights in `layout` (and computes nothing).
struct LayoutDevices {
  explicit LayoutDevices(std::shared_ptr<const WeightLayout> layout) {
    auto lib = std::make_shared<device::OpLibrary>();
    lib->set_weight_layout(std::move(layout));
    ops = lib;
    d0 = std::make_unique<device::AcceleratorDevice>(runtime, 0, ops);
    d1 = std::make_unique<device::AcceleratorDevice>(runtime, 1, ops);
  }
  std::shared_ptr<host::HostRuntime> runtime = std::make_shared<host::HostRuntime>();
  std::shared_ptr<const device::OpLibrary> ops;
  std::unique_ptr<device::AcceleratorDevice> d0, d1;
};

std::vector<uint8_t> raw_bytes(device::AcceleratorDevice& d, const void* at, size_t n) {
  std::vector<uint8_t> out(n);
  d.runtime().copy_d2h(d.index(), out.data(), at, n);
  return out;
}

}  // namespace

TEST(WeightLayout, ARuntimeDefinedLayoutWorksThroughDeviceBuffers) {
  LayoutDevices devs(std::make_shared<ReversedLayout>());
  auto& d = *devs.d0;
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, 8, 4);
  Tensor* rows = ops::view(ctx, t, {8, 2, 1, 1}, t->nb[1], t->nb[1] * 2, t->nb[1] * 2, 1 * t->nb[1]);
  EXPECT_EQ(d.buffer_type().alloc_size(*t), t->nbytes() + 64);
  auto buffer = d.buffer_type().allocate(d.buffer_type().alloc_size(*t) + 16);
  buffer->clear(0xAB);
  buffer->place(*t, 0);
  resolve_view_data(*rows);
  const auto slack = raw_bytes(d, static_cast<char*>(t->data) + t->nbytes(), 64);
  for (uint8_t b : slack) ASSERT_EQ(b, 0);  // init_tensor zeroed the layout's slack

  std::vector<float> v(32);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.5f;
  tensor_set(*t, v.data(), 0, 128);
  const auto raw = raw_bytes(d, t->data, 128);
  for (size_t i = 0; i < 32; ++i) {
    float x;
    std::memcpy(&x, raw.data() + 4 * (31 - i), 4);
    ASSERT_EQ(x, v[i]) << "element " << i << " is stored reversed";
  }
  std::vector<float> back(32);
  tensor_get(*t, back.data(), 0, 128);
  EXPECT_EQ(back, v);
  // Ranges: a partial set and get; a view's bytes are a range of its root's image.
  const float five[5] = {-1, -2, -3, -4, -5};
  tensor_set(*t, five, 12, 20);
  std::copy(five, five + 5, v.begin() + 3);
  std::vector<float> part(16);
  tensor_get(*rows, part.data(), 0, 64);
  EXPECT_EQ(0, std::memcmp(part.data(), v.data() + 8, 64));
  EXPECT_THROW(tensor_set(*t, five, 2, 4), Error);  // splits an element

  // DeviceBackend's async transfers go through the same layout.
  auto backend = d.make_backend();
  for (auto& x : v) x *= 3.0f;
  backend->set_async(*t, v.data(), 0, 128);
  std::vector<float> async_back(32);
  backend->get_async(*t, async_back.data(), 0, 128);
  backend->synchronize();
  EXPECT_EQ(async_back, v);

  // Copies between the devices: whole tensors as images, views through the host.
  Context ctx1;
  Tensor* u = ctx1.new_tensor(DType::F32, 8, 4);
  auto buffer1 = devs.d1->buffer_type().allocate(devs.d1->buffer_type().alloc_size(*u));
  buffer1->place(*u, 0);
  ASSERT_TRUE(buffer1->copy_from(*t, *u));
  std::vector<float> copied(32);
  tensor_get(*u, copied.data(), 0, 128);
  EXPECT_EQ(copied, v);
  EXPECT_EQ(raw_bytes(*devs.d1, u->data, 128), raw_bytes(d, t->data, 128));
}

TEST(WeightLayout, TheCpusInterleavedLayoutWorksInDeviceMemory) {
  LayoutDevices devs(
      std::shared_ptr<const WeightLayout>(std::shared_ptr<void>(), &cpu::interleaved_layout()));
  auto& d = *devs.d0;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::F16}) {
    SCOPED_TRACE(std::string(name(type)));
    Context ctx;
    Tensor* t = ctx.new_tensor(type, 64, 20);  // two groups of 8 rows, then 4 rows as they are
    auto buffer = d.buffer_type().allocate(d.buffer_type().alloc_size(*t));
    buffer->place(*t, 0);
    ASSERT_TRUE(cpu::interleaved_layout().encodes(*t));
    std::vector<float> values(64 * 20);
    for (auto& x : values) x = u(rng);
    std::vector<uint8_t> image(t->nbytes());
    from_f32_row(type, values.data(), image.data(), 64 * 20);
    tensor_set(*t, image.data(), 0, image.size());
    std::vector<uint8_t> expected(image.size());
    cpu::to_interleaved(*t, image.data(), 0, image.size(), expected.data());
    EXPECT_EQ(raw_bytes(d, t->data, image.size()), expected);
    // Ranges inside a group: the group's other rows stay as they were.
    const size_t rb = t->nb[1], bb = traits(type).block_bytes;
    std::vector<uint8_t> other(3 * rb + bb);
    for (auto& b : other) b = static_cast<uint8_t>(rng());
    if (type == DType::F16)
      for (size_t i = 1; i < other.size(); i += 2) other[i] &= 0x3B;  // finite halves
    else
      for (size_t i = 0; i < other.size(); i += bb) other[i + 1] = 0x30;  // finite scales
    tensor_set(*t, other.data(), 6 * rb + bb, other.size());
    std::memcpy(image.data() + 6 * rb + bb, other.data(), other.size());
    std::vector<uint8_t> back(image.size());
    tensor_get(*t, back.data(), 0, back.size());
    EXPECT_EQ(back, image);
    std::vector<uint8_t> part(5 * rb);
    tensor_get(*t, part.data(), 7 * rb, part.size());
    EXPECT_EQ(0, std::memcmp(part.data(), image.data() + 7 * rb, part.size()));
  }
}
