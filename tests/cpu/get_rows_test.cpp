// GET_ROWS on the CPU backend: every source type, repeated and edge indices, batched indices,
// strided operands, the out-of-range error, and thread/kernel-set independence.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace tessera {
namespace {

using test::compute;
using test::expect_error;
using test::fill;
using test::fill_i32;
using test::values;

// a[i0, r] = 10 r + i0 for a [3, 4].
Tensor* rows_table(Context& ctx, DType type) {
  Tensor* a = ctx.new_tensor(type, 3, 4);
  fill(a, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32});
  return a;
}

TEST(CpuGetRows, RepeatedAndEdgeIndices) {
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(name(type)));
    Context ctx(true);
    Tensor* a = rows_table(ctx, type);
    Tensor* idx = ctx.new_tensor(DType::I32, 5);
    fill_i32(idx, {3, 0, 3, 1, 0});
    Tensor* out = ops::get_rows(ctx, a, idx);
    ASSERT_EQ(out->type, DType::F32);
    ASSERT_EQ(out->ne, (std::array<int64_t, 4>{3, 5, 1, 1}));
    compute(out);
    EXPECT_EQ(values(*out), (std::vector<float>{30, 31, 32, 0, 1, 2, 30, 31, 32, 10, 11, 12, 0, 1, 2}));
  }
}

TEST(CpuGetRows, QuantizedRowsDequantize) {
  Context ctx(true);
  // Q8_0 [32, 3]: row r has d = 2^-r and q[j] = j - 16 + r.
  Tensor* q8 = ctx.new_tensor(DType::Q8_0, 32, 3);
  const uint16_t scales[3] = {0x3C00, 0x3800, 0x3400};  // 1, 0.5, 0.25
  for (int r = 0; r < 3; ++r) {
    auto* b = static_cast<BlockQ8_0*>(static_cast<void*>(test::elem_ptr(*q8, 0, r)));
    b->d = scales[r];
    for (int j = 0; j < 32; ++j) b->qs[j] = static_cast<int8_t>(j - 16 + r);
  }
  // Q4_0 [32, 2]: row r has d = 1 + r and nibbles (j, 15 - j).
  Tensor* q4 = ctx.new_tensor(DType::Q4_0, 32, 2);
  for (int r = 0; r < 2; ++r) {
    auto* b = static_cast<BlockQ4_0*>(static_cast<void*>(test::elem_ptr(*q4, 0, r)));
    b->d = r == 0 ? 0x3C00 : 0x4000;  // 1, 2
    for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  }
  Tensor* idx8 = ctx.new_tensor(DType::I32, 3);
  fill_i32(idx8, {2, 0, 2});
  Tensor* idx4 = ctx.new_tensor(DType::I32, 2);
  fill_i32(idx4, {1, 1});
  Tensor* out8 = ops::get_rows(ctx, q8, idx8);
  Tensor* out4 = ops::get_rows(ctx, q4, idx4);
  compute(out8);
  compute(out4);
  const int pick8[3] = {2, 0, 2};
  const float scale8[3] = {1.0f, 0.5f, 0.25f};
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 32; ++j)
      EXPECT_EQ(test::get(*out8, j, k), static_cast<float>(j - 16 + pick8[k]) * scale8[pick8[k]])
          << k << " " << j;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(test::get(*out4, j, k), static_cast<float>(j - 8) * 2.0f);
      EXPECT_EQ(test::get(*out4, j + 16, k), static_cast<float>(7 - j) * 2.0f);
    }
}

TEST(CpuGetRows, GridIQuantRowsDequantize) {
  // Rows of random blocks of each grid I-quant (two super-blocks a row), picked out of order and
  // twice: each output row has the bits of its source row's decoding.
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                  DType::IQ1_M}) {
    SCOPED_TRACE(std::string(name(t)));
    Context ctx(true);
    Tensor* a = ctx.new_tensor(t, 512, 3);
    for (int r = 0; r < 3; ++r)
      random_blocks(t, 11 + static_cast<uint64_t>(r), 2.0f, test::elem_ptr(*a, 0, r), 512);
    Tensor* idx = ctx.new_tensor(DType::I32, 4);
    fill_i32(idx, {2, 0, 2, 1});
    Tensor* out = ops::get_rows(ctx, a, idx);
    compute(out);
    const int pick[4] = {2, 0, 2, 1};
    std::vector<float> want(512);
    for (int k = 0; k < 4; ++k) {
      to_f32_row(t, test::elem_ptr(*a, 0, pick[k]), want.data(), 512);
      for (int j = 0; j < 512; ++j)
        ASSERT_EQ(test::get(*out, j, k), want[static_cast<size_t>(j)]) << k << " " << j;
    }
  }
}

TEST(CpuGetRows, I32RowsStayI32) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::I32, 2, 3);
  fill_i32(a, {16777217, -1, 5, 6, 2147483647, -2147483647});
  Tensor* idx = ctx.new_tensor(DType::I32, 4);
  fill_i32(idx, {2, 0, 0, 1});
  Tensor* out = ops::get_rows(ctx, a, idx);
  ASSERT_EQ(out->type, DType::I32);
  compute(out);
  EXPECT_EQ(test::values_i32(*out),
            (std::vector<int32_t>{2147483647, -2147483647, 16777217, -1, 16777217, -1, 5, 6}));
}

// Indices [R, n1, n2] pick rows of a[:, :, j, k] for each (j, k).
TEST(CpuGetRows, BatchedIndicesWithStridedOperands) {
  Context ctx(true);
  // a: [2, 3, 2, 2] as a permuted view of a [3, 2, 2, 2] tensor (dims 0 and 1 swapped).
  Tensor* base = ctx.new_tensor(DType::F32, 3, 2, 2, 2);
  fill(base, test::iota(base->nelements()));
  Tensor* a = ops::transpose(ctx, base);  // a[i0, i1, j, k] = base[i1, i0, j, k]
  // Indices [2, 2, 2] read through a transposed view (nb0 = 8, nb1 = 4).
  Tensor* ibig = ctx.new_tensor(DType::I32, 2, 2, 2);
  Tensor* idx = ops::transpose(ctx, ibig);
  const int32_t picks[2][2][2] = {{{2, 0}, {1, 1}}, {{0, 2}, {2, 2}}};  // [k][j][r]
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 2; ++j)
      for (int r = 0; r < 2; ++r) test::set_i32(*idx, picks[k][j][r], r, j, k);
  Tensor* out = ops::get_rows(ctx, a, idx);
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{2, 2, 2, 2}));
  compute(out, 2);
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 2; ++j)
      for (int r = 0; r < 2; ++r)
        for (int i0 = 0; i0 < 2; ++i0) {
          const int row = picks[k][j][r];
          const float want = static_cast<float>(row + 3 * (i0 + 2 * (j + 2 * k)));  // base[row, i0, j, k]
          EXPECT_EQ(test::get(*out, i0, r, j, k), want);
        }
}

TEST(CpuGetRows, OutOfRangeIndexIsAnError) {
  for (int32_t bad : {4, -1, 1000000}) {
    Context ctx(true);
    Tensor* a = rows_table(ctx, DType::F32);
    Tensor* idx = ctx.new_tensor(DType::I32, 3);
    fill_i32(idx, {0, bad, 1});
    Tensor* out = ops::get_rows(ctx, a, idx);
    try {
      compute(out, 2);
      ADD_FAILURE() << "index " << bad << " accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(msg.find("GET_ROWS"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("4)"), std::string::npos) << msg;  // the bound [0, 4)
    }
  }
}

TEST(CpuGetRows, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F16, 64, 50, 3);
  fill(a, test::random_values(a->nelements(), 11));
  Tensor* idx = ctx.new_tensor(DType::I32, 17, 3);
  std::vector<int32_t> ids;
  for (int i = 0; i < 51; ++i) ids.push_back((i * 7) % 50);
  fill_i32(idx, ids);
  test::expect_same_bytes_everywhere(ops::get_rows(ctx, a, idx));
  Tensor* q = ctx.new_tensor(DType::Q4_0, 64, 50, 3);
  for (int64_t r = 0; r < 150; ++r) {
    const auto row = test::random_values(64, static_cast<uint32_t>(r));
    from_f32_row(DType::Q4_0, row.data(), test::elem_ptr(*q, 0, r % 50, r / 50), 64);
  }
  test::expect_same_bytes_everywhere(ops::get_rows(ctx, q, idx));
}

TEST(CpuGetRows, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 4, 2);
  expect_error([&] { ops::get_rows(ctx, a, ctx.new_tensor(DType::F32, 2, 2)); }, "GET_ROWS");
  expect_error([&] { ops::get_rows(ctx, a, ctx.new_tensor(DType::I32, 2, 3)); }, "GET_ROWS");
  expect_error([&] { ops::get_rows(ctx, a, ctx.new_tensor(DType::I32, 2, 2, 1, 2)); }, "GET_ROWS");
}

}  // namespace
}  // namespace tessera
