// The block formats against independent expectations: hand-built blocks whose values follow from
// the format description, and llama.cpp's own files (the oracle models quantized from the same
// F32 weights), whose dequantized weights must approximate the F32 originals to within the
// type's quantization error. A misread layout lands at an error near 1 or above.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/convert.h"
#include "tessera/gguf.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

std::vector<float> dequantize(DType t, const void* blocks, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  to_f32_row(t, blocks, y.data(), n);
  return y;
}

}  // namespace

TEST(QuantFormats, HandBuiltQ4_1AndQ5Blocks) {
  BlockQ4_1 a{};
  a.d = fp32_to_fp16(0.5f);
  a.m = fp32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) a.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = dequantize(DType::Q4_1, &a, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.0f) << j;
  }
  BlockQ5_0 b{};
  b.d = fp32_to_fp16(1.0f);
  b.qs[0] = 0x21;     // element 0: 1, element 16: 2
  b.qh[0] = 1u << 3;  // element 3 gets bit 4
  b.qh[2] = 1u << 4;  // element 20 gets bit 4
  y = dequantize(DType::Q5_0, &b, 32);
  EXPECT_EQ(y[0], -15.0f);
  EXPECT_EQ(y[16], -14.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[20], 0.0f);
  EXPECT_EQ(y[5], -16.0f);
  BlockQ5_1 c{};
  c.d = fp32_to_fp16(2.0f);
  c.m = fp32_to_fp16(1.0f);
  c.qs[1] = 0xf5;
  c.qh[0] = 1u << 1;
  c.qh[2] = 1u << 1;  // element 17
  y = dequantize(DType::Q5_1, &c, 32);
  EXPECT_EQ(y[1], (5 + 16) * 2.0f + 1.0f);
  EXPECT_EQ(y[17], (15 + 16) * 2.0f + 1.0f);
  EXPECT_EQ(y[0], 1.0f);
}

TEST(QuantFormats, HandBuiltKQuantScales) {
  // Q3_K: scale of group 13 = low nibble from the high half of byte 5, top bits 6-7 of byte 9.
  BlockQ3_K q3{};
  q3.d = fp32_to_fp16(1.0f);
  q3.scales[5] = 0x70;                // group 13 low nibble 7 (group 5's low nibble 0)
  q3.scales[9] = 0x2u << 6;           // group 13 high bits 2 -> 7 + 32 = 39, minus 32 = 7
  for (auto& h : q3.hmask) h = 0xff;  // every high bit set: no -4
  for (auto& q : q3.qs) q = 0xff;     // every low pair 3
  auto y = dequantize(DType::Q3_K, &q3, 256);
  for (int l = 0; l < 16; ++l) EXPECT_EQ(y[13 * 16 + l], 7.0f * 3.0f) << l;
  EXPECT_EQ(y[5 * 16], -32.0f * 3.0f);  // group 5: low 0, high 0 -> -32
  // Q4_K: group 6 takes its scale from byte 10's low nibble and byte 2's top bits, its min from
  // byte 10's high nibble and byte 6's top bits.
  BlockQ4_K q4{};
  q4.d = fp32_to_fp16(1.0f);
  q4.dmin = fp32_to_fp16(0.5f);
  q4.scales[10] = 0x93;
  q4.scales[2] = 0x40;             // scale = 3 | (1 << 4) = 19
  q4.scales[6] = 0x80;             // min = 9 | (2 << 4) = 41
  for (auto& q : q4.qs) q = 0x52;  // group 6 is in the low nibbles of bytes 96-127: 2
  y = dequantize(DType::Q4_K, &q4, 256);
  EXPECT_EQ(y[6 * 32], 19.0f * 2.0f - 0.5f * 41.0f);
  // IQ4_XS: group 3's scale: high nibble of scales_l[1], bits 6-7 of scales_h.
  BlockIQ4_XS xs{};
  xs.d = fp32_to_fp16(0.25f);
  xs.scales_l[1] = 0x50;
  xs.scales_h = static_cast<uint16_t>(3u << 6);  // 5 | 48 = 53 -> 21
  for (auto& q : xs.qs) q = 0xf0;                // low nibble 0 -> -127, high 15 -> 113
  y = dequantize(DType::IQ4_XS, &xs, 256);
  EXPECT_EQ(y[3 * 32], 0.25f * 21.0f * -127.0f);
  EXPECT_EQ(y[3 * 32 + 16], 0.25f * 21.0f * 113.0f);
}

// The grid I-quants: ggml's codebooks hold the points (iq_grids.inc); these blocks pick known ones:
// IQ2 grid 0 = all 8, grid 1 = 43 then seven 8s, grid 5 = (25, 8, 25, 8, 8, 8, 8, 8), the last = all
// 43; IQ3_XXS grid 1 = (20, 4, 4, 4), grid 5 = (62, 12, 4, 4); IQ3_S grid 0 = (1, 1, 1, 1), grid 3 =
// (11, 1, 1, 1), grid 258 = (11, 7, 9, 5); IQ1 grid 0 = all -1, the last (2047) all +1. Sign index i
// sets its seven bits and an eighth for even parity (1 -> elements 0 and 7).
TEST(QuantFormats, HandBuiltIq2Blocks) {
  BlockIQ2_XXS a{};
  a.d = fp32_to_fp16(1.0f);
  a.qs[8] = 0x0001;                            // chunk 2: grid 1, then grids 0
  a.qs[10] = 0x0001;                           // sign index 1 for the first point
  a.qs[11] = static_cast<uint16_t>(3u << 12);  // scale 3 -> 2 * 3 + 1 = 7, times 1/8
  auto y = dequantize(DType::IQ2_XXS, &a, 256);
  EXPECT_EQ(y[64], -7.0f / 8 * 43);
  EXPECT_EQ(y[65], 7.0f);
  EXPECT_EQ(y[71], -7.0f);
  EXPECT_EQ(y[72], 7.0f);
  EXPECT_EQ(y[0], 1.0f);  // scale 0 -> 1/8 of grid 0's 8
  EXPECT_EQ(y[255], 1.0f);

  BlockIQ2_XS b{};
  b.d = fp32_to_fp16(1.0f);
  b.qs[4] = static_cast<uint16_t>(5 | (2 << 9));  // chunk 1: grid 5, sign index 2 (elements 1 and 7)
  b.qs[6] = 511;                                  // the last point, no signs
  b.scales[1] = 0x52;                             // first half 2 -> 5, second half 5 -> 11
  y = dequantize(DType::IQ2_XS, &b, 256);
  EXPECT_EQ(y[32], 5.0f / 8 * 25);
  EXPECT_EQ(y[33], -5.0f);
  EXPECT_EQ(y[34], 5.0f / 8 * 25);
  EXPECT_EQ(y[39], -5.0f);
  EXPECT_EQ(y[48], 11.0f / 8 * 43);
  EXPECT_EQ(y[56], 11.0f);

  BlockIQ2_S c{};
  c.d = fp32_to_fp16(1.0f);
  c.qs[0] = 5;
  c.qs[3] = 0xff;
  c.qh[0] = 0xc0;      // point 3's top two bits: 0x3ff, the last point
  c.qs[32] = 0x01;     // explicit signs: element 0
  c.scales[0] = 0x10;  // 1 and 3
  y = dequantize(DType::IQ2_S, &c, 256);
  EXPECT_EQ(y[0], -25.0f / 8);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 25.0f / 8);
  for (int j = 24; j < 32; ++j) EXPECT_EQ(y[j], 3.0f / 8 * 43) << j;
}

TEST(QuantFormats, HandBuiltIq3Blocks) {
  BlockIQ3_XXS a{};
  a.d = fp32_to_fp16(1.0f);
  a.qs[0] = 1;
  a.qs[1] = 5;
  a.qs[64] = 0x10;  // sign index 16: elements 4 and 7
  a.qs[67] = 0x20;  // scale 2 -> 5, times 1/4
  auto y = dequantize(DType::IQ3_XXS, &a, 256);
  const float expect[8] = {25.0f, 5.0f, 5.0f, 5.0f, -77.5f, 15.0f, 5.0f, -5.0f};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[j], expect[j]) << j;
  EXPECT_EQ(y[32], 1.0f);  // grid 0 = 4s at scale 1/4

  BlockIQ3_S b{};
  b.d = fp32_to_fp16(0.5f);
  b.qs[8] = 2;  // chunk 1, ninth bit from qh[1] bit 0 -> 258
  b.qs[9] = 3;  // ninth bit from qh[1] bit 1 (clear) -> 3
  b.qh[1] = 0x01;
  b.signs[4] = 0x02;   // element 33
  b.scales[0] = 0x30;  // chunk 0: 0 -> 1, chunk 1: 3 -> 7
  y = dequantize(DType::IQ3_S, &b, 256);
  const float expect_s[8] = {38.5f, -24.5f, 31.5f, 17.5f, 38.5f, 3.5f, 3.5f, 3.5f};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[32 + j], expect_s[j]) << j;
  EXPECT_EQ(y[0], 0.5f);
}

TEST(QuantFormats, HandBuiltIq1Blocks) {
  BlockIQ1_S a{};
  a.d = fp32_to_fp16(2.0f);
  a.qs[13] = 0xff;
  a.qh[3] = static_cast<uint16_t>((7u << 3) | (4u << 12) | 0x8000u);  // point 1 -> 2047, scale 9, shift -1/8
  auto y = dequantize(DType::IQ1_S, &a, 256);
  EXPECT_EQ(y[96], 2.0f * 9 * -1.125f);
  EXPECT_EQ(y[104], 2.0f * 9 * 0.875f);
  EXPECT_EQ(y[0], 2.0f * -0.875f);  // scale 1, shift +1/8

  BlockIQ1_M b{};
  // d = 0.25 (fp16 0x3400): nibbles 0, 0, 4, 3 at the top of the four scale words.
  uint16_t sc[4] = {0, static_cast<uint16_t>(2 | (5 << 3)), 0x4000, 0x3000};  // chunk 2: scales 5, 11
  std::memcpy(b.scales, sc, 8);
  b.qs[8] = 0xff;
  b.qh[4] = 0x0f;  // point 0 of chunk 2: index bits 7 -> 2047, shift -1/8
  y = dequantize(DType::IQ1_M, &b, 256);
  EXPECT_EQ(y[64], 0.25f * 5 * 0.875f);
  EXPECT_EQ(y[72], 0.25f * 5 * -0.875f);
  EXPECT_EQ(y[80], 0.25f * 11 * -0.875f);
  EXPECT_EQ(y[0], 0.25f * -0.875f);  // chunk 0: scale word 0 = 0 -> 1
}

// llama.cpp quantized tiny-llama-f32's weights (llama-quantize --pure): every 2-D weight of each
// file, dequantized, against the F32 original. The bounds sit near 1.5x the errors measured for
// these Gaussian weights.
TEST(QuantFormats, LlamaCppFilesDequantizeToTheirF32Weights) {
  const std::string dir = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";
  const gguf::File f32 = gguf::File::open(dir + "tiny-llama-f32.gguf");
  const struct {
    const char* file;
    DType type;
    double bound;
  } cases[] = {
      {"q4_1", DType::Q4_1, 9e-3},
      {"q5_0", DType::Q5_0, 2.5e-3},
      {"q5_1", DType::Q5_1, 2e-3},
      {"q2_k", DType::Q2_K, 0.12},
      {"q3_k", DType::Q3_K, 3e-2},
      {"q4_k", DType::Q4_K, 8e-3},
      {"q5_k", DType::Q5_K, 2e-3},
      {"q6_k", DType::Q6_K, 5e-4},
      {"iq4_nl", DType::IQ4_NL, 8e-3},
      // The grid I-quants (llama-quantize with an importance matrix of ones; measured 0.12, 0.090,
      // 0.062, 0.033, 0.028, 0.24, 0.21).
      {"iq2_xxs", DType::IQ2_XXS, 0.18},
      {"iq2_xs", DType::IQ2_XS, 0.14},
      {"iq2_s", DType::IQ2_S, 0.095},
      {"iq3_xxs", DType::IQ3_XXS, 0.05},
      {"iq3_s", DType::IQ3_S, 0.042},
      {"iq1_s", DType::IQ1_S, 0.36},
      {"iq1_m", DType::IQ1_M, 0.31},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const gguf::File q = gguf::File::open(dir + "tiny-llama-" + c.file + ".gguf");
    int checked = 0;
    double worst = 0;
    for (const gguf::TensorInfo& ti : q.tensors()) {
      if (ti.n_dims != 2 || ti.type != c.type) continue;
      const gguf::TensorInfo* ref = f32.find_tensor(ti.name);
      ASSERT_NE(ref, nullptr) << ti.name;
      const int64_t n = ti.ne[0] * ti.ne[1];
      std::vector<float> y(static_cast<size_t>(n));
      const size_t row = row_bytes(c.type, ti.ne[0]);
      for (int64_t r = 0; r < ti.ne[1]; ++r)
        to_f32_row(c.type, q.tensor_data(ti) + r * row, y.data() + r * ti.ne[0], ti.ne[0]);
      std::vector<float> x(static_cast<size_t>(n));
      std::memcpy(x.data(), f32.tensor_data(*ref), x.size() * sizeof(float));
      double num = 0, den = 0;
      for (int64_t i = 0; i < n; ++i) {
        num += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
        den += double(x[i]) * x[i];
      }
      EXPECT_LT(num / den, c.bound) << ti.name;
      worst = std::max(worst, num / den);
      ++checked;
    }
    EXPECT_GE(checked, 14) << "2-D weights of type " << name(c.type);
    RecordProperty(c.file, std::to_string(worst));
  }
}
