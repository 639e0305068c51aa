// Device buffers and pinned host buffers, exercised on the OpenCL runtime (two PoCL devices).
#include "device/buffer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "device/device.h"
#include "device/split_layout.h"
#include "opencl/opencl_test_util.h"
#include "opencl/oplib.h"
#include "opencl/runtime.h"
#include "tessera/error.h"

using namespace tessera;

namespace {

device::AcceleratorDevice& accel(int i) {
  return dynamic_cast<device::AcceleratorDevice&>(test::opencl_device(i));
}

std::vector<uint8_t> raw_device_bytes(device::AcceleratorDevice& d, const void* addr, size_t n) {
  std::vector<uint8_t> v(n);
  d.runtime().copy_d2h(d.index(), v.data(), addr, n);
  return v;
}

}  // namespace

TEST(DeviceBuffer, AlignmentAndPaddedAllocationSizes) {
  BufferType& bt = accel(0).buffer_type();
  EXPECT_EQ(bt.alignment() % 128, 0u);
  Context ctx;
  Tensor* q4 = ctx.new_tensor(DType::Q4_0, 96, 3);
  Tensor* q8 = ctx.new_tensor(DType::Q8_0, 1024, 2);
  Tensor* f = ctx.new_tensor(DType::F32, 96, 3);
  // OpenCL's weight layout: slack after the tensor of the elements that pad one row to a multiple
  // of 512 (416 more Q4_0 elements = 13 blocks), not padding inside each row.
  EXPECT_EQ(bt.alloc_size(*q4), q4->nbytes() + 13 * 18);
  EXPECT_EQ(bt.alloc_size(*q8), q8->nbytes());
  EXPECT_EQ(bt.alloc_size(*f), f->nbytes());
}

TEST(DeviceBuffer, InitTensorZeroesThePadding) {
  auto& d = accel(0);
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::Q8_0, 96, 3);
  const size_t padded = d.buffer_type().alloc_size(*t);
  ASSERT_GT(padded, t->nbytes());
  auto buffer = d.buffer_type().allocate(padded + 256);
  buffer->clear(0xAB);
  buffer->place(*t, 0);
  const auto bytes = raw_device_bytes(d, t->data, padded + 256);
  for (size_t i = t->nbytes(); i < padded; ++i) ASSERT_EQ(bytes[i], 0) << "padding byte " << i;
  for (size_t i = padded; i < bytes.size(); ++i)
    ASSERT_EQ(bytes[i], 0xAB) << "byte " << i << " past the tensor";
  EXPECT_EQ(bytes[0], 0xAB);  // the tensor itself is not touched
}

TEST(DeviceBuffer, SetAndGetRoundTripWholeAndPartialRanges) {
  auto& d = accel(1);
  std::mt19937 rng(5);
  for (DType type : {DType::F32, DType::F16, DType::Q4_0, DType::Q8_0}) {
    SCOPED_TRACE(std::string(name(type)));
    Context ctx;
    Tensor* t = ctx.new_tensor(type, 128, 6);
    auto buffer = test::allocate_all(d.buffer_type(), ctx);
    auto image = test::random_image(type, t->ne, rng);
    tensor_set(*t, image.data(), 0, image.size());
    EXPECT_EQ(test::read_image(*t), image);
    // Rows 1..3 replaced; the rest unchanged.
    const size_t rb = t->nb[1];
    auto other = test::random_image(type, {128, 3, 1, 1}, rng);
    tensor_set(*t, other.data(), rb, other.size());
    std::memcpy(image.data() + rb, other.data(), other.size());
    EXPECT_EQ(test::read_image(*t), image);
    // A partial read of rows 2..4.
    std::vector<uint8_t> part(3 * rb);
    tensor_get(*t, part.data(), 2 * rb, part.size());
    EXPECT_EQ(0, std::memcmp(part.data(), image.data() + 2 * rb, part.size()));
    if (d.weight_layout().encodes(*t)) {
      // Stored in the device layout: all quants, then all scales.
      const size_t qb = device::layout_quant_bytes(type), nblocks = t->nbytes() / traits(type).block_bytes;
      std::vector<uint8_t> quants(nblocks * qb), scales(nblocks * 2);
      device::to_device_layout(type, image.data(), static_cast<int64_t>(nblocks), quants.data(),
                               scales.data());
      auto raw = raw_device_bytes(d, t->data, t->nbytes());
      EXPECT_EQ(0, std::memcmp(raw.data(), quants.data(), quants.size()));
      EXPECT_EQ(0, std::memcmp(raw.data() + quants.size(), scales.data(), scales.size()));
      // A range that splits a block is an error.
      EXPECT_THROW(tensor_set(*t, image.data(), 1, traits(type).block_bytes), Error);
      EXPECT_THROW(tensor_get(*t, part.data(), 0, 7), Error);
    }
  }
}

TEST(DeviceBuffer, ClearSetsEveryByte) {
  auto& d = accel(0);
  auto buffer = d.buffer_type().allocate(1000);
  buffer->clear(0x5C);
  const auto bytes = raw_device_bytes(d, buffer->base(), 1000);
  for (uint8_t b : bytes) ASSERT_EQ(b, 0x5C);
}

TEST(DeviceBuffer, CopiesFromHostAndBetweenDevices) {
  std::mt19937 rng(9);
  // Registry devices share a context: device-to-device copies. A runtime with a context per
  // device cannot: its copies are staged through pinned host memory.
  auto separate = std::make_shared<opencl::OpenClRuntime>([] {
    opencl::RuntimeOptions o;
    o.context_per_device = true;
    return o;
  }());
  ASSERT_EQ(separate->device_count(), 2);
  auto ops = opencl::make_op_library();
  device::AcceleratorDevice s0(separate, 0, ops), s1(separate, 1, ops);
  struct Pair {
    Device* from;
    Device* to;
  };
  for (Pair p : {Pair{&accel(0), &accel(1)}, Pair{&s0, &s1}}) {
    for (DType type : {DType::F32, DType::Q4_0}) {
      SCOPED_TRACE(p.from->description() + " " + std::string(name(type)));
      Context c0, c1, host(true);
      Tensor* a = c0.new_tensor(type, 64, 5);
      Tensor* b = c1.new_tensor(type, 64, 5);
      Tensor* h = host.new_tensor(type, 64, 5);
      auto ba = test::allocate_all(p.from->buffer_type(), c0);
      auto bb = test::allocate_all(p.to->buffer_type(), c1);
      const auto image = test::random_image(type, a->ne, rng);
      tensor_set(*h, image.data(), 0, image.size());
      ASSERT_TRUE(ba->copy_from(*h, *a));  // host -> device
      ASSERT_TRUE(bb->copy_from(*a, *b));  // device -> device
      EXPECT_EQ(test::read_image(*b), image);
    }
  }
}

TEST(PinnedBuffer, HoldsHostTensors) {
  BufferType* pt = accel(0).host_buffer_type();
  ASSERT_NE(pt, nullptr);
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, 10);
  auto buffer = test::allocate_all(*pt, ctx);
  float v[10];
  for (int i = 0; i < 10; ++i) v[i] = 0.5f * static_cast<float>(i);
  tensor_set(*t, v, 0, sizeof v);
  EXPECT_EQ(static_cast<float*>(t->data)[9], 4.5f);  // a plain host pointer
  buffer->clear(0);
  EXPECT_EQ(static_cast<float*>(t->data)[9], 0.0f);
}
