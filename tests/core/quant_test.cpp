// Q4_0 / Q8_0: hand-computed blocks (OPS.md rules), dequantized values, and the vectorized rows
// against the scalar reference, bit for bit.
#include "tessera/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/convert.h"

using namespace tessera;

namespace {

using Block = std::array<float, 32>;

BlockQ8_0 q8(const Block& x) {
  BlockQ8_0 b{};
  quantize_row_q8_0(x.data(), &b, 32);
  return b;
}
BlockQ4_0 q4(const Block& x) {
  BlockQ4_0 b{};
  quantize_row_q4_0(x.data(), &b, 32);
  return b;
}
// Element j (0..31) of a Q4_0 block's quants.
int nibble(const BlockQ4_0& b, int j) { return j < 16 ? b.qs[j] & 0x0f : b.qs[j - 16] >> 4; }

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

// ---------------------------------------------------------------- Q8_0 hand-computed

TEST(QuantQ8_0, UnitScaleRoundsHalvesAwayFromZero) {
  // amax 127 -> d = 1 exactly, id = 1: q = roundf(x).
  Block x{};
  const float in[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 0.49f, -0.49f, 3.0f, -127.0f, 126.5f};
  for (size_t i = 0; i < std::size(in); ++i) x[i] = in[i];
  const BlockQ8_0 b = q8(x);
  EXPECT_EQ(b.d, 0x3c00);  // 1.0
  const int expect[] = {127, 3, -3, 1, -1, 2, -2, 0, 0, 3, -127, 127};
  for (size_t i = 0; i < std::size(expect); ++i) EXPECT_EQ(b.qs[i], expect[i]) << i;
  for (size_t i = std::size(expect); i < 32; ++i) EXPECT_EQ(b.qs[i], 0) << i;
}

TEST(QuantQ8_0, ScaleTwo) {
  // amax 254 -> d = 2, id = 0.5.
  Block x{};
  const float in[] = {5.0f, -5.0f, 3.0f, 1.0f, -1.0f, 254.0f, -7.0f, 0.9f};
  for (size_t i = 0; i < std::size(in); ++i) x[i] = in[i];
  const BlockQ8_0 b = q8(x);
  EXPECT_EQ(b.d, 0x4000);  // 2.0
  const int expect[] = {3, -3, 2, 1, -1, 127, -4, 0};
  for (size_t i = 0; i < std::size(expect); ++i) EXPECT_EQ(b.qs[i], expect[i]) << i;
  float y[32];
  dequantize_row_q8_0(&b, y, 32);
  for (size_t i = 0; i < std::size(expect); ++i) EXPECT_EQ(y[i], 2.0f * static_cast<float>(expect[i])) << i;
}

TEST(QuantQ8_0, AllZeros) {
  const BlockQ8_0 b = q8(Block{});
  EXPECT_EQ(b.d, 0x0000);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
  float y[32];
  dequantize_row_q8_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
}

TEST(QuantQ8_0, AllNegative) {
  // x[j] = -4 (j + 1) for j < 31, x[31] = -508: amax 508 -> d = 4, q = x / 4.
  Block x{};
  for (int j = 0; j < 31; ++j) x[j] = -4.0f * static_cast<float>(j + 1);
  x[31] = -508.0f;
  const BlockQ8_0 b = q8(x);
  EXPECT_EQ(b.d, 0x4400);  // 4.0
  for (int j = 0; j < 31; ++j) EXPECT_EQ(b.qs[j], -(j + 1)) << j;
  EXPECT_EQ(b.qs[31], -127);
}

TEST(QuantQ8_0, SingleLargeValue) {
  // amax 1000 -> d = 1000/127 = 7.874..., as fp16 4 * (1 + 992/1024) = 7.875 = 0x47e0.
  Block x;
  x.fill(3.0f);
  x[5] = 1000.0f;
  const BlockQ8_0 b = q8(x);
  EXPECT_EQ(b.d, 0x47e0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], j == 5 ? 127 : 0) << j;  // 3 * 127/1000 = 0.381
  float y[32];
  dequantize_row_q8_0(&b, y, 32);
  EXPECT_EQ(y[5], 127.0f * 7.875f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(QuantQ8_0, DequantizeHandBlock) {
  BlockQ8_0 b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  float y[32];
  dequantize_row_q8_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j * 8 - 128)) << j;
}

// ---------------------------------------------------------------- Q4_0 hand-computed

TEST(QuantQ4_0, PositiveMaxClampsAtFifteen) {
  // max = +8 -> d = 8 / -8 = -1, id = -1: q = min(15, trunc(-x + 8.5)).
  Block x{};
  const float in[] = {8.0f, -8.0f, 0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.5f, 0.49f, -3.0f, 7.0f, -7.9f};
  for (size_t i = 0; i < std::size(in); ++i) x[i] = in[i];
  x[20] = -8.0f;  // in the high-nibble half
  x[31] = 3.0f;
  const BlockQ4_0 b = q4(x);
  EXPECT_EQ(b.d, 0xbc00);  // -1.0
  const int expect[] = {0, 15, 8, 7, 9, 8, 9, 6, 8, 11, 1, 15};
  for (size_t i = 0; i < std::size(expect); ++i) EXPECT_EQ(nibble(b, static_cast<int>(i)), expect[i]) << i;
  for (int j = static_cast<int>(std::size(expect)); j < 32; ++j) {
    const int want = j == 20 ? 15 : j == 31 ? 5 : 8;
    EXPECT_EQ(nibble(b, j), want) << j;
  }
  // Packing: qs[j] = element j | element (j + 16) << 4.
  EXPECT_EQ(b.qs[4], 0xf9);  // element 4 (-1) -> 9, element 20 (-8) -> 15
}

TEST(QuantQ4_0, NibblePacking) {
  // d = -1 (max +8 at element 0); element j+16 = -(j - 7) gives q = j - 7 + 8.5 -> j + 1 (clamped).
  Block x{};
  x[0] = 8.0f;
  for (int j = 0; j < 16; ++j) x[16 + j] = -static_cast<float>(j - 7);
  const BlockQ4_0 b = q4(x);
  EXPECT_EQ(b.qs[0], static_cast<uint8_t>(0 | (1 << 4)));  // element 0 -> 0, element 16 -> 1
  for (int j = 1; j < 15; ++j) EXPECT_EQ(b.qs[j], static_cast<uint8_t>(8 | ((j + 1) << 4))) << j;
  EXPECT_EQ(b.qs[15], static_cast<uint8_t>(8 | (15 << 4)));  // 16.5 -> 16 -> clamped to 15
}

TEST(QuantQ4_0, TiesPickTheFirstMax) {
  Block x{};
  x[3] = -4.0f;
  x[10] = 4.0f;
  BlockQ4_0 b = q4(x);  // max = -4 -> d = 0.5, id = 2
  EXPECT_EQ(b.d, 0x3800);
  EXPECT_EQ(nibble(b, 3), 0);    // -8 + 8.5 = 0.5
  EXPECT_EQ(nibble(b, 10), 15);  // 8 + 8.5 = 16.5 -> 16 -> 15
  EXPECT_EQ(nibble(b, 0), 8);
  x[3] = 4.0f;
  x[10] = -4.0f;
  b = q4(x);  // max = +4 -> d = -0.5, id = -2
  EXPECT_EQ(b.d, 0xb800);
  EXPECT_EQ(nibble(b, 3), 0);
  EXPECT_EQ(nibble(b, 10), 15);
  // Same magnitude across the two halves of the block: element 2 comes first.
  Block y{};
  y[2] = 2.0f;
  y[18] = -2.0f;
  b = q4(y);
  EXPECT_EQ(b.d, 0xb400);  // -0.25
}

TEST(QuantQ4_0, AllZeros) {
  // max stays +0, d = 0 / -8 = -0 (fp16 0x8000), id = 0: every q = trunc(8.5) = 8.
  const BlockQ4_0 b = q4(Block{});
  EXPECT_EQ(b.d, 0x8000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], 0x88);
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
}

TEST(QuantQ4_0, AllNegative) {
  // x[j] = -0.25 (j + 1): max = -8 at element 31 -> d = 1, id = 1, q = trunc(x + 8.5).
  Block x;
  for (int j = 0; j < 32; ++j) x[j] = -0.25f * static_cast<float>(j + 1);
  const BlockQ4_0 b = q4(x);
  EXPECT_EQ(b.d, 0x3c00);
  for (int j = 0; j < 32; ++j) {
    const int want = static_cast<int>(std::floor(8.5 - 0.25 * (j + 1)));  // all positive: trunc = floor
    EXPECT_EQ(nibble(b, j), want) << j;
  }
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(nibble(b, j) - 8)) << j;
  EXPECT_EQ(y[31], -8.0f);
}

TEST(QuantQ4_0, SingleLargeValue) {
  // max = -100 -> d = 12.5 (fp16 0x4a40), id = 0.08f; x = 1 -> 8.58 -> 8; x = -100 -> ~0.5000002 -> 0.
  Block x;
  x.fill(1.0f);
  x[7] = -100.0f;
  const BlockQ4_0 b = q4(x);
  EXPECT_EQ(b.d, 0x4a40);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(nibble(b, j), j == 7 ? 0 : 8) << j;
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  EXPECT_EQ(y[7], -100.0f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(QuantQ4_0, DequantizeHandBlock) {
  BlockQ4_0 b{};
  b.d = 0x4000;  // 2.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 2.0f * static_cast<float>(7 - j)) << j;
  }
}

// ---------------------------------------------------------------- quantization error bounds

TEST(Quant, RoundTripErrorWithinHalfAStep) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  Block x;
  for (float& v : x) v = u(rng);
  double amax = 0, max = 0;
  for (float v : x)
    if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
  // Q8_0: error <= d/2 plus the fp16 scale's relative error (2^-11) times |x|.
  BlockQ8_0 b8 = q8(x);
  float y[32];
  dequantize_row_q8_0(&b8, y, 32);
  const double d8 = amax / 127;
  for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(y[j] - x[j]), d8 / 2 + std::fabs(x[j]) * 1e-3 + 1e-6) << j;
  // Q4_0: step |max| / 8; the clamped end loses one step.
  BlockQ4_0 b4 = q4(x);
  dequantize_row_q4_0(&b4, y, 32);
  const double d4 = std::fabs(max) / 8;
  for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(y[j] - x[j]), d4 + std::fabs(x[j]) * 1e-3 + 1e-6) << j;
}

// ---------------------------------------------------------------- vectorized rows vs scalar

namespace {

// Blocks that stress every rule: exact ties for both roundings, duplicated maxima of both signs,
// zeros, -0, a single outlier, subnormal-range values, wide scales.
std::vector<float> stress_rows(int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> k(-254, 254);
  std::uniform_int_distribution<int> e(-30, 30);
  std::uniform_int_distribution<int> pos(0, 31);
  std::vector<float> x(static_cast<size_t>(n_blocks * 32));
  for (int64_t b = 0; b < n_blocks; ++b) {
    float* v = x.data() + b * 32;
    const float s = std::ldexp(1.0f, e(rng));
    switch (b % 9) {
      case 0:  // uniform
        for (int j = 0; j < 32; ++j) v[j] = u(rng) * s;
        break;
      case 1:  // half-integers on a power-of-two grid with amax 127 * s: Q8 ties
        for (int j = 0; j < 32; ++j) v[j] = static_cast<float>(k(rng)) * 0.5f * s;
        v[pos(rng)] = 127.0f * s;
        break;
      case 2:  // grid of 1/16 with max 8 * s: Q4 ties at x*id + 8.5 integral
        for (int j = 0; j < 32; ++j) v[j] = static_cast<float>(k(rng) % 128) / 16.0f * s;
        v[pos(rng)] = (pos(rng) & 1 ? 8.0f : -8.0f) * s;
        break;
      case 3: {  // duplicated maxima with both signs
        for (int j = 0; j < 32; ++j) v[j] = u(rng) * s;
        const float m = 2.0f * s;
        v[pos(rng)] = m;
        v[pos(rng)] = -m;
        v[pos(rng)] = (pos(rng) & 1) ? m : -m;
        break;
      }
      case 4:  // zeros and negative zeros
        for (int j = 0; j < 32; ++j) v[j] = (j & 1) ? -0.0f : 0.0f;
        if (b % 16 == 4) v[pos(rng)] = u(rng) * s;
        break;
      case 5:  // one outlier
        for (int j = 0; j < 32; ++j) v[j] = u(rng) * 1e-3f * s;
        v[pos(rng)] = u(rng) * 1e3f * s;
        break;
      case 6:  // all negative
        for (int j = 0; j < 32; ++j) v[j] = -std::fabs(u(rng)) * s;
        break;
      case 7: {  // x*id within a few ulps of n + 0.5: where a fused multiply-add would round differently
        const float max = (1.0f + std::fabs(u(rng))) * s * (pos(rng) & 1 ? 1.0f : -1.0f);
        const float d4 = max / -8.0f, d8 = std::fabs(max) / 127.0f;
        std::uniform_int_distribution<int> ulps(-3, 3);
        for (int j = 0; j < 32; ++j) {
          const int n = pos(rng) % 16 - 8;
          float v0 =
              (j & 1 ? static_cast<float>(n) * 8 + 0.5f : static_cast<float>(n) + 0.5f) * (j & 1 ? d8 : d4);
          for (int step = ulps(rng); step != 0; step += step > 0 ? -1 : 1)
            v0 = std::nextafter(v0, step > 0 ? 1e30f : -1e30f);
          v[j] = std::fabs(v0) < std::fabs(max) ? v0 : max;
        }
        v[pos(rng)] = max;
        break;
      }
      default:  // integers (exact quotients)
        for (int j = 0; j < 32; ++j) v[j] = static_cast<float>(k(rng));
    }
  }
  return x;
}

}  // namespace

TEST(QuantRows, Q8_0MatchesScalar) {
  RecordProperty("isa", conversion_isa());
  for (int64_t nb : {1, 2, 3, 7, 64, 1001}) {
    const std::vector<float> x = stress_rows(nb, static_cast<uint32_t>(nb));
    std::vector<BlockQ8_0> a(static_cast<size_t>(nb) + 1), r(static_cast<size_t>(nb) + 1);
    std::memset(a.data(), 0x5a, a.size() * sizeof(BlockQ8_0));
    std::memset(r.data(), 0x5a, r.size() * sizeof(BlockQ8_0));
    quantize_row_q8_0(x.data(), a.data(), nb * 32);
    ref::quantize_row_q8_0(x.data(), r.data(), nb * 32);
    ASSERT_EQ(std::memcmp(a.data(), r.data(), a.size() * sizeof(BlockQ8_0)), 0) << nb << " blocks";
    for (int64_t b = 0; b < nb; ++b) {
      ASSERT_EQ(a[b].d, r[b].d) << b;
      for (int j = 0; j < 32; ++j) ASSERT_EQ(a[b].qs[j], r[b].qs[j]) << "block " << b << " element " << j;
    }
    std::vector<float> ya(x.size() + 3, 9.0f), yr(x.size() + 3, 9.0f);
    dequantize_row_q8_0(a.data(), ya.data() + 1, nb * 32);
    ref::dequantize_row_q8_0(r.data(), yr.data() + 1, nb * 32);
    for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << i;
  }
}

TEST(QuantRows, Q4_0MatchesScalar) {
  for (int64_t nb : {1, 2, 3, 7, 64, 1001}) {
    const std::vector<float> x = stress_rows(nb, static_cast<uint32_t>(100 + nb));
    std::vector<BlockQ4_0> a(static_cast<size_t>(nb) + 1), r(static_cast<size_t>(nb) + 1);
    std::memset(a.data(), 0x5a, a.size() * sizeof(BlockQ4_0));
    std::memset(r.data(), 0x5a, r.size() * sizeof(BlockQ4_0));
    quantize_row_q4_0(x.data(), a.data(), nb * 32);
    ref::quantize_row_q4_0(x.data(), r.data(), nb * 32);
    for (int64_t b = 0; b < nb; ++b) {
      ASSERT_EQ(a[b].d, r[b].d) << b;
      for (int j = 0; j < 16; ++j) ASSERT_EQ(a[b].qs[j], r[b].qs[j]) << "block " << b << " byte " << j;
    }
    ASSERT_EQ(std::memcmp(a.data(), r.data(), a.size() * sizeof(BlockQ4_0)), 0) << nb << " blocks";
    std::vector<float> ya(x.size() + 3, 9.0f), yr(x.size() + 3, 9.0f);
    dequantize_row_q4_0(a.data(), ya.data() + 1, nb * 32);
    ref::dequantize_row_q4_0(r.data(), yr.data() + 1, nb * 32);
    for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << i;
  }
}

TEST(QuantRows, DequantizeEveryByteAndScale) {
  // Every quant byte under many scales (all fp16 patterns that are finite), vector vs scalar.
  std::vector<BlockQ8_0> b8(2048);
  std::vector<BlockQ4_0> b4(2048);
  for (size_t b = 0; b < b8.size(); ++b) {
    b8[b].d = b4[b].d =
        static_cast<uint16_t>((b * 37u) & 0x7bffu) | static_cast<uint16_t>(b & 1 ? 0x8000u : 0u);
    for (int j = 0; j < 32; ++j) b8[b].qs[j] = static_cast<int8_t>(b * 32 + static_cast<size_t>(j));
    for (int j = 0; j < 16; ++j) b4[b].qs[j] = static_cast<uint8_t>(b * 16 + static_cast<size_t>(j));
  }
  const int64_t n = static_cast<int64_t>(b8.size()) * 32;
  std::vector<float> ya(static_cast<size_t>(n)), yr(static_cast<size_t>(n));
  dequantize_row_q8_0(b8.data(), ya.data(), n);
  ref::dequantize_row_q8_0(b8.data(), yr.data(), n);
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << i;
  dequantize_row_q4_0(b4.data(), ya.data(), n);
  ref::dequantize_row_q4_0(b4.data(), yr.data(), n);
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << i;
}

TEST(QuantRows, TypeDispatchMatchesScalar) {
  // to_f32_row / from_f32_row reach the same rows for every type.
  const std::vector<float> x = stress_rows(16, 42);  // 512 elements: whole super-blocks too
  const int64_t n = static_cast<int64_t>(x.size());
  for (DType t : kAllDTypes) {
    if (t == DType::I32) continue;
    std::vector<char> a(row_bytes(t, n)), r(row_bytes(t, n));
    if (is_grid_iquant(t)) {
      // ggml converts rows into IQ2_S, IQ3_XXS and IQ3_S (their searches without importance); the
      // other four need an importance matrix, so from_f32_row leaves zero blocks for them.
      std::fill(a.begin(), a.end(), char{1});
      from_f32_row(t, x.data(), a.data(), n);
      if (t == DType::IQ2_S || t == DType::IQ3_XXS || t == DType::IQ3_S) {
        quantize_weights(t, x.data(), r.data(), n);
        EXPECT_EQ(a, r) << name(t);
        EXPECT_FALSE(std::all_of(a.begin(), a.end(), [](char c) { return c == 0; })) << name(t);
      } else {
        EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return c == 0; })) << name(t);
      }
      // to_f32_row reaches the decoders.
      random_blocks(t, 5, 1.0f, a.data(), n);
      std::vector<float> ya(static_cast<size_t>(n)), yr(static_cast<size_t>(n));
      to_f32_row(t, a.data(), ya.data(), n);
      switch (t) {
        case DType::IQ2_XXS:
          ref::dequantize_row_iq2_xxs(reinterpret_cast<const BlockIQ2_XXS*>(a.data()), yr.data(), n);
          break;
        case DType::IQ2_XS:
          ref::dequantize_row_iq2_xs(reinterpret_cast<const BlockIQ2_XS*>(a.data()), yr.data(), n);
          break;
        case DType::IQ2_S:
          ref::dequantize_row_iq2_s(reinterpret_cast<const BlockIQ2_S*>(a.data()), yr.data(), n);
          break;
        case DType::IQ3_XXS:
          ref::dequantize_row_iq3_xxs(reinterpret_cast<const BlockIQ3_XXS*>(a.data()), yr.data(), n);
          break;
        case DType::IQ3_S:
          ref::dequantize_row_iq3_s(reinterpret_cast<const BlockIQ3_S*>(a.data()), yr.data(), n);
          break;
        case DType::IQ1_S:
          ref::dequantize_row_iq1_s(reinterpret_cast<const BlockIQ1_S*>(a.data()), yr.data(), n);
          break;
        default:
          ref::dequantize_row_iq1_m(reinterpret_cast<const BlockIQ1_M*>(a.data()), yr.data(), n);
      }
      for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << name(t) << " " << i;
      // random_blocks keeps the values within about +-amax, and not all zero.
      float amax = 0;
      for (float v : ya) amax = std::max(amax, std::fabs(v));
      EXPECT_GT(amax, 0.2f) << name(t);
      EXPECT_LE(amax, 1.0f) << name(t);
      continue;
    }
    from_f32_row(t, x.data(), a.data(), n);
    switch (t) {
      case DType::F32:
        std::memcpy(r.data(), x.data(), r.size());
        break;
      case DType::F16:
        ref::fp32_to_fp16_row(x.data(), reinterpret_cast<uint16_t*>(r.data()), n);
        break;
      case DType::BF16:
        ref::fp32_to_bf16_row(x.data(), reinterpret_cast<uint16_t*>(r.data()), n);
        break;
      case DType::Q4_0:
        ref::quantize_row_q4_0(x.data(), reinterpret_cast<BlockQ4_0*>(r.data()), n);
        break;
      case DType::Q8_0:
        ref::quantize_row_q8_0(x.data(), reinterpret_cast<BlockQ8_0*>(r.data()), n);
        break;
      case DType::Q4_1:
        ref::quantize_row_q4_1(x.data(), reinterpret_cast<BlockQ4_1*>(r.data()), n);
        break;
      case DType::Q5_0:
        ref::quantize_row_q5_0(x.data(), reinterpret_cast<BlockQ5_0*>(r.data()), n);
        break;
      case DType::Q5_1:
        ref::quantize_row_q5_1(x.data(), reinterpret_cast<BlockQ5_1*>(r.data()), n);
        break;
      case DType::Q8_K:
        ref::quantize_row_q8_k(x.data(), reinterpret_cast<BlockQ8_K*>(r.data()), n);
        break;
      case DType::Q2_K:
        ref::quantize_row_q2_k(x.data(), reinterpret_cast<BlockQ2_K*>(r.data()), n);
        break;
      case DType::Q3_K:
        ref::quantize_row_q3_k(x.data(), reinterpret_cast<BlockQ3_K*>(r.data()), n);
        break;
      case DType::Q4_K:
        ref::quantize_row_q4_k(x.data(), reinterpret_cast<BlockQ4_K*>(r.data()), n);
        break;
      case DType::Q5_K:
        ref::quantize_row_q5_k(x.data(), reinterpret_cast<BlockQ5_K*>(r.data()), n);
        break;
      case DType::Q6_K:
        ref::quantize_row_q6_k(x.data(), reinterpret_cast<BlockQ6_K*>(r.data()), n);
        break;
      case DType::IQ4_NL:
        ref::quantize_row_iq4_nl(x.data(), reinterpret_cast<BlockIQ4_NL*>(r.data()), n);
        break;
      case DType::IQ4_XS:
        ref::quantize_row_iq4_xs(x.data(), reinterpret_cast<BlockIQ4_XS*>(r.data()), n);
        break;
      case DType::MXFP4:
        ref::quantize_row_mxfp4(x.data(), reinterpret_cast<BlockMXFP4*>(r.data()), n);
        break;
      default:
        FAIL() << "no reference quantizer for " << name(t);
    }
    ASSERT_EQ(a, r) << name(t);
    std::vector<float> ya(static_cast<size_t>(n)), yr(static_cast<size_t>(n));
    to_f32_row(t, a.data(), ya.data(), n);
    to_f32_row(t, r.data(), yr.data(), n);
    for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(bits(ya[i]), bits(yr[i])) << name(t) << " " << i;
  }
  // I32: exact both ways for integers; f32 -> i32 truncates.
  const float f[] = {1.9f, -1.9f, 1e6f, -0.5f};
  int32_t iv[4];
  from_f32_row(DType::I32, f, iv, 4);
  EXPECT_EQ(iv[0], 1);
  EXPECT_EQ(iv[1], -1);
  EXPECT_EQ(iv[2], 1000000);
  EXPECT_EQ(iv[3], 0);
  float back[4];
  to_f32_row(DType::I32, iv, back, 4);
  EXPECT_EQ(back[2], 1e6f);
  EXPECT_EQ(back[1], -1.0f);
}

TEST(QuantRows, MatchTheFormulasOfOpsMd) {
  // The OPS.md formulas evaluated here in plain f32 steps (volatile: no fused multiply-add).
  const std::vector<float> x = stress_rows(900, 77);
  const int64_t nb = static_cast<int64_t>(x.size() / 32);
  std::vector<BlockQ4_0> b4(static_cast<size_t>(nb));
  std::vector<BlockQ8_0> b8(static_cast<size_t>(nb));
  quantize_row_q4_0(x.data(), b4.data(), nb * 32);
  quantize_row_q8_0(x.data(), b8.data(), nb * 32);
  for (int64_t b = 0; b < nb; ++b) {
    const float* v = x.data() + b * 32;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(v[j]) > amax) amax = std::fabs(v[j]), max = v[j];
    const float d4 = max / -8.0f;
    const float id4 = d4 != 0.0f ? 1.0f / d4 : 0.0f;
    ASSERT_EQ(b4[b].d, fp32_to_fp16(d4)) << b;
    for (int j = 0; j < 32; ++j) {
      volatile float p = v[j] * id4;
      volatile float y = p + 8.5f;
      const int q = std::min(15, static_cast<int>(static_cast<int8_t>(static_cast<int>(y))));
      ASSERT_EQ(nibble(b4[b], j), q) << "block " << b << " element " << j;
    }
    const float d8 = amax / 127.0f;
    const float id8 = d8 != 0.0f ? 1.0f / d8 : 0.0f;
    ASSERT_EQ(b8[b].d, fp32_to_fp16(d8)) << b;
    for (int j = 0; j < 32; ++j) {
      volatile float p = v[j] * id8;
      ASSERT_EQ(b8[b].qs[j], static_cast<int>(std::round(static_cast<double>(p))))
          << "block " << b << " " << j;
    }
  }
}
