// MXFP4 blocks (ggml's block_mxfp4): hand-built blocks decoded, and ggml's quantizer's choices of
// exponent and codes, worked out by hand from the format (E8M0 scale, doubled E2M1 codes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/blocks.h"
#include "tessera/dtype.h"
#include "tessera/quant.h"

namespace tessera {
namespace {

TEST(Mxfp4, TypeTraitsAreGgmls) {
  EXPECT_EQ(name(DType::MXFP4), "mxfp4");
  EXPECT_EQ(traits(DType::MXFP4).gguf_id, 39u);
  EXPECT_EQ(traits(DType::MXFP4).block_size, 32);
  EXPECT_EQ(traits(DType::MXFP4).block_bytes, 17u);
  EXPECT_EQ(dtype_from_gguf(39), DType::MXFP4);
  EXPECT_EQ(dtype_from_name("mxfp4"), DType::MXFP4);
  EXPECT_EQ(row_bytes(DType::MXFP4, 64), 34u);
}

TEST(Mxfp4, HalfScaleOfTheExponentByte) {
  EXPECT_EQ(e8m0_half(127), 0.5f);  // 2^0 / 2
  EXPECT_EQ(e8m0_half(128), 1.0f);
  EXPECT_EQ(e8m0_half(130), 4.0f);
  EXPECT_EQ(e8m0_half(2), std::ldexp(1.0f, -126));  // the smallest normal
  EXPECT_EQ(e8m0_half(1), std::ldexp(1.0f, -127));  // denormals below
  EXPECT_EQ(e8m0_half(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_half(254), std::ldexp(1.0f, 126));
}

TEST(Mxfp4, DecodesEveryCode) {
  // e = 127: x = code's E2M1 value. Low nibbles are elements 0-15, high nibbles 16-31; element j
  // takes code j and element j + 16 code 15 - j.
  BlockMXFP4 blk{};
  blk.e = 127;
  for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  float y[32];
  ref::dequantize_row_mxfp4(&blk, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], e2m1[j]) << j;
    EXPECT_EQ(y[j + 16], e2m1[15 - j]) << j;
  }
  // e = 131: everything times 16; to_f32_row reaches the same decoder.
  blk.e = 131;
  float z[32];
  to_f32_row(DType::MXFP4, &blk, z, 32);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(z[j], 16 * e2m1[j]) << j;
  EXPECT_EQ(z[16], 16 * -6.0f);
}

TEST(Mxfp4, QuantizerPicksTheExponentFromTheLargestMagnitude) {
  // amax 6: floor(log2 6) = 2, e = 2 - 2 + 127 = 127, so 6 is code 7 exactly.
  std::vector<float> x(32, 0.0f);
  x[3] = -6.0f;
  x[4] = 1.5f;
  x[20] = 3.0f;
  BlockMXFP4 blk{};
  ref::quantize_row_mxfp4(x.data(), &blk, 32);
  EXPECT_EQ(blk.e, 127);
  EXPECT_EQ(blk.qs[3] & 0x0f, 15);  // -6
  EXPECT_EQ(blk.qs[4] & 0x0f, 3);   // 1.5
  EXPECT_EQ(blk.qs[4] >> 4, 5);     // element 20: 3
  EXPECT_EQ(blk.qs[0], 0);          // zeros take code 0 (+0), the first of the two zeros
  // amax 7.9: still e = 127 (floor(log2 7.9) = 2), 7.9 rounds to the largest code, 6.
  x[3] = 7.9f;
  ref::quantize_row_mxfp4(x.data(), &blk, 32);
  EXPECT_EQ(blk.e, 127);
  EXPECT_EQ(blk.qs[3] & 0x0f, 7);
  // amax 8: e = 128 (d = 1): 8 is code 6 (value 8 / 2 = 4 times 2).
  x[3] = 8.0f;
  ref::quantize_row_mxfp4(x.data(), &blk, 32);
  EXPECT_EQ(blk.e, 128);
  EXPECT_EQ(blk.qs[3] & 0x0f, 6);
  EXPECT_EQ(blk.qs[4] & 0x0f, 1);  // at d = 1, 1.5 is a tie between code 1 (1) and code 2 (2): code 1
  // An all-zero block: e = 0, every code 0.
  std::vector<float> zeros(32, 0.0f);
  ref::quantize_row_mxfp4(zeros.data(), &blk, 32);
  EXPECT_EQ(blk.e, 0);
  for (uint8_t q : blk.qs) EXPECT_EQ(q, 0);
}

TEST(Mxfp4, TiesGoToTheLowerCode) {
  // With e = 127 (amax 6 present): 0.25 sits between 0 (code 0) and 0.5 (code 1): code 0; -0.25
  // between +0 (code 0) and -0.5 (code 9): code 0; 5 between 4 (code 6) and 6 (code 7): code 6;
  // -2.5 between -2 (code 12) and -3 (code 13): code 12; 1.3 is nearer 1.5: code 3.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  x[1] = 0.25f;
  x[2] = -0.25f;
  x[3] = 5.0f;
  x[4] = -2.5f;
  x[5] = 1.3f;
  BlockMXFP4 blk{};
  ref::quantize_row_mxfp4(x.data(), &blk, 32);
  ASSERT_EQ(blk.e, 127);
  EXPECT_EQ(blk.qs[1] & 0x0f, 0);
  EXPECT_EQ(blk.qs[2] & 0x0f, 0);
  EXPECT_EQ(blk.qs[3] & 0x0f, 6);
  EXPECT_EQ(blk.qs[4] & 0x0f, 12);
  EXPECT_EQ(blk.qs[5] & 0x0f, 3);
  // from_f32_row (CPY's conversion) and quantize_weights (llama-quantize's) write the same bits.
  BlockMXFP4 a{}, b{};
  from_f32_row(DType::MXFP4, x.data(), &a, 32);
  quantize_weights(DType::MXFP4, x.data(), &b, 32);
  EXPECT_EQ(0, std::memcmp(&a, &blk, sizeof blk));
  EXPECT_EQ(0, std::memcmp(&b, &blk, sizeof blk));
}

}  // namespace
}  // namespace tessera
