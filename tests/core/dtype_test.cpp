#include "tessera/dtype.h"

#include <gtest/gtest.h>

using namespace tessera;

TEST(DType, TraitsMatchGgml) {
  EXPECT_EQ(traits(DType::Q4_0).block_bytes, 18u);
  EXPECT_EQ(traits(DType::Q8_0).block_bytes, 34u);
  EXPECT_EQ(traits(DType::BF16).gguf_id, 30u);
  EXPECT_EQ(dtype_from_gguf(8), DType::Q8_0);
  EXPECT_FALSE(dtype_from_gguf(12).has_value());
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
}
