#include "tessera/dtype.h"

#include <gtest/gtest.h>

using namespace tessera;

TEST(DType, TraitsMatchGgml) {
  EXPECT_EQ(traits(DType::Q4_0).block_bytes, 18u);
  EXPECT_EQ(traits(DType::Q8_0).block_bytes, 34u);
  EXPECT_EQ(traits(DType::BF16).gguf_id, 30u);
  EXPECT_EQ(dtype_from_gguf(8), DType::Q8_0);
  EXPECT_EQ(dtype_from_gguf(12), DType::Q4_K);
  EXPECT_EQ(traits(DType::Q4_K).block_bytes, 144u);
  EXPECT_EQ(traits(DType::Q8_K).block_bytes, 292u);
  EXPECT_EQ(dtype_from_name("iq4_xs"), DType::IQ4_XS);
  EXPECT_FALSE(dtype_from_gguf(16).has_value());  // IQ2_XXS: ggml has it, Tessera does not
  EXPECT_EQ(dtype_from_gguf(39), DType::MXFP4);
  EXPECT_EQ(traits(DType::MXFP4).block_bytes, 17u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
}
