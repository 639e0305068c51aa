// The searching quantizers (K-quants, IQ4_NL, IQ4_XS): blocks whose levels and scales follow by
// hand from the format (values already on a type's grid must come back on it), round-trip error
// bounds on Gaussian weights, and degenerate rows (zeros, constants, one outlier) that must stay
// finite. Bit-exactness against llama.cpp is quant_llama_files_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tessera/convert.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

std::vector<float> dequantize(DType t, const void* blocks, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  to_f32_row(t, blocks, y.data(), n);
  return y;
}

template <typename Block>
Block quantize_one(DType t, const std::vector<float>& x) {
  Block b;
  std::memset(&b, 0x5a, sizeof b);
  from_f32_row(t, x.data(), &b, static_cast<int64_t>(x.size()));
  return b;
}

double nmse(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    den += double(x[i]) * x[i];
  }
  return num / den;
}

// Q6_K's six-bit level of element j (0..255), decoded from ql/qh as the format says.
int q6_level(const BlockQ6_K& b, int j) {
  const int half = j / 128, k = (j % 128) / 32, l = j % 32;
  const int lo = (b.ql[64 * half + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
  const int hi = (b.qh[32 * half + l] >> (2 * k)) & 3;
  return lo | (hi << 4);
}

}  // namespace

TEST(QuantSearch, Q6_KValuesOnTheGridComeBackExactly) {
  // Groups of 16 holding (level - 32) / 4 with the level -32 in each: the first trial scale
  // (iscale = -32 / -8 = 4) fits exactly, the int8 group scales land on -128, d on -1/512.
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 7) % 64 - 32) / 4.0f;
  for (int g = 0; g < 16; ++g) x[16 * g] = -8.0f;
  const auto b = quantize_one<BlockQ6_K>(DType::Q6_K, x);
  EXPECT_EQ(b.d, fp32_to_fp16(-1.0f / 512.0f));
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.scales[g], -128) << g;
  for (int j = 0; j < 256; ++j) EXPECT_EQ(q6_level(b, j), static_cast<int>(x[j] * 4.0f) + 32) << j;
  EXPECT_EQ(dequantize(DType::Q6_K, &b, 256), x);
}

TEST(QuantSearch, Q3_KValuesOnTheGridComeBackExactly) {
  // Levels -4..3 (unit step) with a -4 in every group: the group scales are all 1, so the largest
  // lands on the stored 6-bit 0 (-32) and d = -1/32.
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 5) % 8 - 4);
  for (int g = 0; g < 16; ++g) x[16 * g + 3] = -4.0f;
  const auto b = quantize_one<BlockQ3_K>(DType::Q3_K, x);
  EXPECT_EQ(b.d, fp32_to_fp16(-1.0f / 32.0f));
  int8_t sc[16];
  q3_k_scales(b.scales, sc);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(sc[g], -32) << g;
  EXPECT_EQ(dequantize(DType::Q3_K, &b, 256), x);
}

TEST(QuantSearch, Q4_KAndQ5_KRampsKeepTheirLevels) {
  // Every group of 32 a ramp step * (0..nmax) with a zero: min 0 and scale `step` fit exactly,
  // every group's 6-bit scale is 63 and its min 0; the levels are the ramp's.
  for (const int nmax : {15, 31}) {
    SCOPED_TRACE(nmax);
    std::vector<float> x(256);
    for (int j = 0; j < 256; ++j) x[j] = 0.5f * static_cast<float>((j * 3) % (nmax + 1));
    for (int g = 0; g < 8; ++g) {
      x[32 * g + 1] = 0.0f;
      x[32 * g + 2] = 0.5f * static_cast<float>(nmax);
    }
    std::vector<float> y;
    uint8_t scales[12];
    if (nmax == 15) {
      const auto b = quantize_one<BlockQ4_K>(DType::Q4_K, x);
      EXPECT_EQ(b.dmin, 0);
      std::memcpy(scales, b.scales, 12);
      for (int j = 0; j < 256; ++j) {
        const int i = j / 64, l = j % 32, k = (j / 32) % 2;
        EXPECT_EQ((b.qs[32 * i + l] >> (4 * k)) & 0x0f, static_cast<int>(2 * x[j])) << j;
      }
      y = dequantize(DType::Q4_K, &b, 256);
    } else {
      const auto b = quantize_one<BlockQ5_K>(DType::Q5_K, x);
      EXPECT_EQ(b.dmin, 0);
      std::memcpy(scales, b.scales, 12);
      y = dequantize(DType::Q5_K, &b, 256);
    }
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k_scale_min(g, scales, sc, m);
      EXPECT_EQ(sc, 63) << g;
      EXPECT_EQ(m, 0) << g;
    }
    // d = fp16(0.5 / 63): each value within d * 63's relative rounding of fp16.
    for (int j = 0; j < 256; ++j) EXPECT_NEAR(y[j], x[j], 1e-3f * std::fabs(x[j]) + 1e-6f) << j;
  }
}

TEST(QuantSearch, Q2_KLevelsWithANegativeMinimum) {
  // Groups of 16 over {-1, 0, 1, 2}: min 1 and scale 1 fit exactly, so every 4-bit scale and min
  // is 15 (d = dmin = fp16(1/15)) and the two-bit levels are x + 1.
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 3) % 4 - 1);
  for (int g = 0; g < 16; ++g) {
    x[16 * g] = -1.0f;
    x[16 * g + 1] = 2.0f;
  }
  const auto b = quantize_one<BlockQ2_K>(DType::Q2_K, x);
  EXPECT_EQ(b.d, fp32_to_fp16(1.0f / 15.0f));
  EXPECT_EQ(b.dmin, fp32_to_fp16(1.0f / 15.0f));
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.scales[g], 0xff) << g;
  for (int j = 0; j < 256; ++j) {
    const int half = j / 128, pass = (j % 128) / 32, l = j % 32;
    EXPECT_EQ((b.qs[32 * half + l] >> (2 * pass)) & 3, static_cast<int>(x[j]) + 1) << j;
  }
  const auto y = dequantize(DType::Q2_K, &b, 256);
  for (int j = 0; j < 256; ++j) EXPECT_NEAR(y[j], x[j], 1e-3f) << j;
}

TEST(QuantSearch, IQ4ValuesOnTheGridKeepTheirIndices) {
  // x = kIq4Values[q] / 100 with -127 present: both IQ4_NL paths and IQ4_XS find scale 1/100 and
  // the indices q.
  std::vector<int> q(256);
  for (int j = 0; j < 256; ++j) q[j] = (j * 7) % 16;
  for (int g = 0; g < 8; ++g) q[32 * g + 5] = 0;
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>(kIq4Values[q[j]]) / 100.0f;
  auto index = [](const uint8_t* qs, int j) { return (qs[j % 16] >> (4 * (j / 16))) & 0x0f; };
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "from_f32_row" : "quantize_weights");
    std::vector<BlockIQ4_NL> nl(8);
    if (pass == 0)
      from_f32_row(DType::IQ4_NL, x.data(), nl.data(), 256);
    else
      quantize_weights(DType::IQ4_NL, x.data(), nl.data(), 256);
    for (int b = 0; b < 8; ++b) {
      EXPECT_NEAR(fp16_to_fp32(nl[b].d), 0.01f, 1e-5f) << b;
      for (int j = 0; j < 32; ++j) EXPECT_EQ(index(nl[b].qs, j), q[32 * b + j]) << b << " " << j;
    }
  }
  const auto xs = quantize_one<BlockIQ4_XS>(DType::IQ4_XS, x);
  // Every group scale 1/100 is the largest: its 6-bit scale is stored as 0 (-32), d = -1/3200.
  EXPECT_NEAR(fp16_to_fp32(xs.d), -0.01f / 32.0f, 1e-7f);
  EXPECT_EQ(xs.scales_h, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(xs.scales_l[i], 0);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(index(xs.qs + 16 * (j / 32), j % 32), q[j]) << j;
}

TEST(QuantSearch, RoundTripErrorOnGaussianWeights) {
  // NMSE of dequantize(quantize(x)) for N(0, 1) weights: bounds 1.5x what these quantizers reach
  // (q2_K 0.087, q3_K 0.023, q4_K 0.0052, q5_K 0.0013, q6_K 3.2e-4, iq4_nl 0.0061, iq4_xs 0.0058).
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  const struct {
    DType type;
    double bound;
  } cases[] = {{DType::Q2_K, 0.13},   {DType::Q3_K, 0.034},   {DType::Q4_K, 0.008},   {DType::Q5_K, 0.002},
               {DType::Q6_K, 5e-4},   {DType::IQ4_NL, 0.009}, {DType::IQ4_XS, 0.009}, {DType::Q4_1, 0.009},
               {DType::Q5_0, 0.0027}, {DType::Q5_1, 0.0021}};
  const auto n = static_cast<int64_t>(x.size());
  for (const auto& c : cases) {
    std::vector<std::byte> q(row_bytes(c.type, n));
    from_f32_row(c.type, x.data(), q.data(), n);
    const double e = nmse(x, dequantize(c.type, q.data(), n));
    EXPECT_LT(e, c.bound) << name(c.type);
    EXPECT_GT(e, c.bound / 6) << name(c.type) << ": suspiciously exact";
    quantize_weights(c.type, x.data(), q.data(), n);
    EXPECT_LT(nmse(x, dequantize(c.type, q.data(), n)), c.bound) << name(c.type) << " (file path)";
  }
}

TEST(QuantSearch, DegenerateRowsStayFinite) {
  // All zero, constant positive, constant negative, one outlier among tiny values.
  std::vector<float> x(4 * 256, 0.0f);
  for (int j = 256; j < 512; ++j) x[j] = 0.75f;
  for (int j = 512; j < 768; ++j) x[j] = -3.0f;
  for (int j = 768; j < 1024; ++j) x[j] = 1e-6f * static_cast<float>(j % 7);
  x[900] = 1000.0f;
  for (DType t :
       {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    SCOPED_TRACE(name(t));
    std::vector<std::byte> q(row_bytes(t, 1024));
    for (int path = 0; path < 2; ++path) {
      if (path == 0)
        from_f32_row(t, x.data(), q.data(), 1024);
      else
        quantize_weights(t, x.data(), q.data(), 1024);
      const auto y = dequantize(t, q.data(), 1024);
      for (int j = 0; j < 256; ++j) ASSERT_EQ(y[j], 0.0f) << j;
      for (int j = 0; j < 1024; ++j) ASSERT_TRUE(std::isfinite(y[j])) << j;
      // Constants come back within the type's coarsest step of the value; the outlier within 5%.
      for (int j = 256; j < 512; ++j) EXPECT_NEAR(y[j], 0.75f, 0.1f) << j;
      for (int j = 512; j < 768; ++j) EXPECT_NEAR(y[j], -3.0f, 0.4f) << j;
      EXPECT_NEAR(y[900], 1000.0f, 50.0f);
    }
  }
}
