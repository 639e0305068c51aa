#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "device/split_layout.h"
#include "tessera/context.h"
#include "tessera/error.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Element e (0..31) of a ggml Q4_0 block as its unsigned 4-bit code.
int q4_code(const BlockQ4_0& b, int e) { return e < 16 ? (b.qs[e] & 15) : (b.qs[e - 16] >> 4); }

}  // namespace

TEST(DeviceLayout, Q4_0MatchesTheDocumentedLayoutAndRoundTrips) {
  const int64_t n = 37;
  auto raw = random_bytes(static_cast<size_t>(n) * sizeof(BlockQ4_0), 1);
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(raw.data());
  std::vector<uint8_t> quants(static_cast<size_t>(n) * 16), scales(static_cast<size_t>(n) * 2);
  device::to_device_layout(DType::Q4_0, raw.data(), n, quants.data(), scales.data());
  for (int64_t b = 0; b < n; ++b) {
    for (int e = 0; e < 32; ++e) {
      // Element e sits in byte e/2 (low nibble when even) as a signed int4: code xor 8.
      const uint8_t byte = quants[static_cast<size_t>(b * 16 + e / 2)];
      const int nib = (e % 2 == 0) ? (byte & 15) : (byte >> 4);
      ASSERT_EQ(nib, q4_code(blocks[b], e) ^ 8) << "block " << b << " element " << e;
      // ...which, read as two's complement int4, is the value q - 8.
      ASSERT_EQ(nib >= 8 ? nib - 16 : nib, q4_code(blocks[b], e) - 8);
    }
    uint16_t d;
    std::memcpy(&d, scales.data() + 2 * b, 2);
    ASSERT_EQ(d, blocks[b].d);
  }
  std::vector<uint8_t> back(raw.size());
  device::from_device_layout(DType::Q4_0, quants.data(), scales.data(), n, back.data());
  EXPECT_EQ(back, raw);
}

TEST(DeviceLayout, Q8_0KeepsQuantsThenScales) {
  const int64_t n = 11;
  auto raw = random_bytes(static_cast<size_t>(n) * sizeof(BlockQ8_0), 2);
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(raw.data());
  std::vector<uint8_t> quants(static_cast<size_t>(n) * 32), scales(static_cast<size_t>(n) * 2);
  device::to_device_layout(DType::Q8_0, raw.data(), n, quants.data(), scales.data());
  for (int64_t b = 0; b < n; ++b) {
    EXPECT_EQ(std::memcmp(quants.data() + 32 * b, blocks[b].qs, 32), 0);
    uint16_t d;
    std::memcpy(&d, scales.data() + 2 * b, 2);
    EXPECT_EQ(d, blocks[b].d);
  }
  std::vector<uint8_t> back(raw.size());
  device::from_device_layout(DType::Q8_0, quants.data(), scales.data(), n, back.data());
  EXPECT_EQ(back, raw);
}

TEST(DeviceLayout, LargeConversionsUseThreadsAndStayExact) {
  const int64_t n = int64_t{1} << 17;  // above the threading threshold
  for (DType type : {DType::Q4_0, DType::Q8_0}) {
    const size_t bb = traits(type).block_bytes, qb = device::layout_quant_bytes(type);
    auto raw = random_bytes(static_cast<size_t>(n) * bb, 3);
    std::vector<uint8_t> quants(static_cast<size_t>(n) * qb), scales(static_cast<size_t>(n) * 2),
        back(raw.size());
    device::to_device_layout(type, raw.data(), n, quants.data(), scales.data());
    // Spot-check the last block against a conversion of that block alone.
    std::vector<uint8_t> q1(qb), s1(2);
    device::to_device_layout(type, raw.data() + (n - 1) * bb, 1, q1.data(), s1.data());
    EXPECT_EQ(std::memcmp(quants.data() + (n - 1) * qb, q1.data(), qb), 0);
    device::from_device_layout(type, quants.data(), scales.data(), n, back.data());
    EXPECT_EQ(back, raw) << name(type);
  }
}

TEST(DeviceLayout, RangesOfTensorsAndViews) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::Q4_0, 128, 5);  // 4 blocks per row, 20 blocks
  // Blocks 2..8 of the tensor.
  auto r = device::layout_range(*t, 2 * 18, 7 * 18);
  EXPECT_EQ(r.first_block, 2);
  EXPECT_EQ(r.nblocks, 7);
  EXPECT_EQ(r.quant_offset, 2u * 16);
  EXPECT_EQ(r.quant_size, 7u * 16);
  EXPECT_EQ(r.scale_offset, 20u * 16 + 2 * 2);
  EXPECT_EQ(r.scale_size, 7u * 2);
  // Rows 3..4 as a view: its block 1 is the tensor's block 13.
  Tensor* v = ops::view(ctx, t, {128, 2, 1, 1}, t->nb[1], t->nb[1] * 2, t->nb[1] * 2, 3 * t->nb[1]);
  r = device::layout_range(*v, 18, 18);
  EXPECT_EQ(r.first_block, 13);
  EXPECT_EQ(r.quant_offset, 13u * 16);
  EXPECT_EQ(r.scale_offset, 20u * 16 + 13 * 2);
  // A range that splits a block is an error, not a partial conversion.
  EXPECT_THROW(device::layout_range(*t, 5, 18), Error);
  EXPECT_THROW(device::layout_range(*t, 18, 20), Error);
}
