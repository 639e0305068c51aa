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
  EXPECT_FALSE(dtype_from_gguf(9).has_value());   // Q8_1: ggml has it, Tessera does not
  EXPECT_EQ(dtype_from_gguf(39), DType::MXFP4);
  EXPECT_EQ(traits(DType::MXFP4).block_bytes, 17u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
}

TEST(DType, GridIQuantsAsGgmlDefinesThem) {
  // ggml's names, type ids and block geometry (ggml.h, ggml-common.h).
  const struct {
    DType type;
    const char* name;
    uint32_t id;
    size_t bytes;
  } expect[] = {{DType::IQ2_XXS, "iq2_xxs", 16, 66}, {DType::IQ2_XS, "iq2_xs", 17, 74},
                {DType::IQ3_XXS, "iq3_xxs", 18, 98}, {DType::IQ1_S, "iq1_s", 19, 50},
                {DType::IQ3_S, "iq3_s", 21, 110},    {DType::IQ2_S, "iq2_s", 22, 82},
                {DType::IQ1_M, "iq1_m", 29, 56}};
  for (const auto& e : expect) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(name(e.type), e.name);
    EXPECT_EQ(traits(e.type).gguf_id, e.id);
    EXPECT_EQ(traits(e.type).block_size, 256);
    EXPECT_EQ(traits(e.type).block_bytes, e.bytes);
    EXPECT_TRUE(is_quantized(e.type));
    EXPECT_TRUE(is_grid_iquant(e.type));
    EXPECT_EQ(dtype_from_gguf(e.id), e.type);
    EXPECT_EQ(dtype_from_name(e.name), e.type);
  }
  EXPECT_FALSE(is_grid_iquant(DType::IQ4_XS));
  EXPECT_FALSE(is_grid_iquant(DType::Q2_K));
}
