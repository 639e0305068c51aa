// DUP, CONT, CPY on the CPU backend: logical order through any strides, conversions between every
// type pair, hand-computed quantized blocks, and the same bytes for any thread count or kernel set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace tessera {
namespace {

using test::compute;
using test::expect_error;
using test::expect_same_bytes_everywhere;
using test::fill;
using test::iota;
using test::values;

TEST(CpuCopy, DupOfContiguousF32) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  fill(a, {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 7.0f});
  Tensor* out = ops::dup(ctx, a);
  compute(out);
  EXPECT_EQ(out->type, DType::F32);
  EXPECT_EQ(out->ne, a->ne);
  EXPECT_EQ(values(*out), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 7.0f}));
}

TEST(CpuCopy, ContOfTransposeReadsLogicalOrder) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);  // a[i0, i1] = 3*i1 + i0
  fill(a, iota(6));
  Tensor* out = ops::cont(ctx, ops::transpose(ctx, a));  // [2, 3]: out[j0, j1] = a[j1, j0]
  compute(out);
  EXPECT_EQ(out->ne, (std::array<int64_t, 4>{2, 3, 1, 1}));
  EXPECT_TRUE(out->is_contiguous());
  EXPECT_EQ(values(*out), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(CpuCopy, ContOfPermuted4D) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 2, 3, 4, 5);
  fill(a, iota(a->nelements()));
  // Source dim 0 -> result dim 1, 1 -> 2, 2 -> 0, 3 -> 3: result [4, 2, 3, 5].
  Tensor* out = ops::cont(ctx, ops::permute(ctx, a, 1, 2, 0, 3));
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{4, 2, 3, 5}));
  compute(out, 2);
  std::vector<float> expected;
  for (int64_t j3 = 0; j3 < 5; ++j3)
    for (int64_t j2 = 0; j2 < 3; ++j2)
      for (int64_t j1 = 0; j1 < 2; ++j1)
        for (int64_t j0 = 0; j0 < 4; ++j0)
          expected.push_back(static_cast<float>(j1 + 2 * (j2 + 3 * (j0 + 4 * j3))));  // a[j1, j2, j0, j3]
  EXPECT_EQ(values(*out), expected);
}

TEST(CpuCopy, ContOfOffsetView) {
  Context ctx(true);
  Tensor* big = ctx.new_tensor(DType::F32, 5, 4);  // big[i0, i1] = 5*i1 + i0
  fill(big, iota(20));
  // A [3, 2] window starting at big[1, 1].
  Tensor* v = ops::view(ctx, big, {3, 2, 1, 1}, big->nb[1], big->nb[2], big->nb[3], (1 * 5 + 1) * 4);
  Tensor* out = ops::cont(ctx, v);
  compute(out);
  EXPECT_EQ(values(*out), (std::vector<float>{6, 7, 8, 11, 12, 13}));
}

TEST(CpuCopy, DupKeepsEveryScalarTypeExactly) {
  Context ctx(true);
  // F16 and BF16 through a transposed view; I32 values beyond f32's exact range stay exact.
  for (DType type : {DType::F16, DType::BF16}) {
    Tensor* a = ctx.new_tensor(type, 2, 3);
    fill(a, {0.5f, -1.25f, 3.0f, 256.0f, -0.0078125f, 2.0f});
    Tensor* out = ops::dup(ctx, ops::transpose(ctx, a));
    compute(out);
    EXPECT_EQ(out->type, type);
    EXPECT_EQ(values(*out), (std::vector<float>{0.5f, 3.0f, -0.0078125f, -1.25f, 256.0f, 2.0f}))
        << name(type);
  }
  Tensor* a = ctx.new_tensor(DType::I32, 3);
  test::fill_i32(a, {16777217, -2147483647, 123});
  Tensor* out = ops::dup(ctx, a);
  compute(out);
  EXPECT_EQ(test::values_i32(*out), (std::vector<int32_t>{16777217, -2147483647, 123}));
}

TEST(CpuCopy, CpyBetweenDifferentShapes) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 6, 2);
  fill(a, iota(12, 1.0f));
  Tensor* b = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* out = ops::cpy(ctx, a, b);
  EXPECT_EQ(out->view_src, b);
  compute(out);
  EXPECT_EQ(values(*b), iota(12, 1.0f));
  EXPECT_EQ(values(*out), iota(12, 1.0f));

  // The same through a conversion, and from a transposed source: [6, 2] -> logical order of a^T.
  Tensor* h = ctx.new_tensor(DType::F16, 3, 4);
  Tensor* out2 = ops::cpy(ctx, ops::transpose(ctx, a), h);
  compute(out2);
  EXPECT_EQ(values(*h), (std::vector<float>{1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12}));
}

TEST(CpuCopy, CpyIntoTransposedDestination) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 4);  // a[i0, i1] = 3*i1 + i0
  fill(a, iota(12));
  Tensor* big = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* out = ops::cpy(ctx, a, ops::transpose(ctx, big));  // big[i1, i0] = a[i0, i1]
  compute(out, 2);
  for (int64_t i1 = 0; i1 < 4; ++i1)
    for (int64_t i0 = 0; i0 < 3; ++i0) EXPECT_EQ(test::get(*big, i1, i0), static_cast<float>(3 * i1 + i0));
}

TEST(CpuCopy, CpyIntoRowViewLeavesTheRestAlone) {
  Context ctx(true);
  Tensor* big = ctx.new_tensor(DType::F32, 4, 4);
  fill(big, std::vector<float>(16, -1.0f));
  Tensor* rows = ops::view(ctx, big, {4, 2, 1, 1}, big->nb[1], big->nb[2], big->nb[3], big->nb[1]);
  Tensor* a = ctx.new_tensor(DType::F32, 8);
  fill(a, iota(8, 10.0f));
  compute(ops::cpy(ctx, a, rows));
  EXPECT_EQ(values(*big),
            (std::vector<float>{-1, -1, -1, -1, 10, 11, 12, 13, 14, 15, 16, 17, -1, -1, -1, -1}));
}

TEST(CpuCopy, F32ToHalfTypesRoundToNearestEven) {
  Context ctx(true);
  const float one = 1.0f;
  // f16 keeps 10 mantissa bits, bf16 7: ties go to the even neighbour.
  const std::vector<float> in = {one + std::ldexp(1.0f, -11),
                                 one + 3 * std::ldexp(1.0f, -11),
                                 one + std::ldexp(1.0f, -8),
                                 one + 3 * std::ldexp(1.0f, -8),
                                 70000.0f,
                                 -2.5f};
  Tensor* a = ctx.new_tensor(DType::F32, 6);
  fill(a, in);
  Tensor* h = ctx.new_tensor(DType::F16, 6);
  Tensor* bf = ctx.new_tensor(DType::BF16, 6);
  compute(ops::cpy(ctx, a, h));
  compute(ops::cpy(ctx, a, bf));
  const auto* hb = static_cast<const uint16_t*>(h->data);
  EXPECT_EQ(hb[0], 0x3C00);  // 1 + half an ulp -> 1
  EXPECT_EQ(hb[1], 0x3C02);  // 1 + 1.5 ulp -> 1 + 2 ulp
  EXPECT_EQ(hb[2], 0x3C04);  // 1 + 2^-8 is exact in f16
  EXPECT_EQ(hb[3], 0x3C0C);  // 1 + 3 * 2^-8 exact too
  EXPECT_EQ(hb[4], 0x7C00);  // overflow -> +inf
  EXPECT_EQ(hb[5], 0xC100);  // -2.5
  const auto* bb = static_cast<const uint16_t*>(bf->data);
  EXPECT_EQ(bb[0], 0x3F80);  // below half a bf16 ulp -> 1
  EXPECT_EQ(bb[1], 0x3F80);
  EXPECT_EQ(bb[2], 0x3F80);  // 1 + 2^-8: half an ulp, ties to even -> 1
  EXPECT_EQ(bb[3], 0x3F82);  // 1 + 1.5 ulp -> 1 + 2 ulp
  EXPECT_EQ(bb[4], 0x4789);  // 70000 = 0x4788B800 -> rounds up
  EXPECT_EQ(bb[5], 0xC020);
}

TEST(CpuCopy, F32AndI32Conversions) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  fill(a, {2.7f, -2.7f, 0.5f, 1e6f});
  Tensor* i = ctx.new_tensor(DType::I32, 4);
  compute(ops::cpy(ctx, a, i));
  EXPECT_EQ(test::values_i32(*i), (std::vector<int32_t>{2, -2, 0, 1000000}));  // truncation

  Tensor* j = ctx.new_tensor(DType::I32, 3);
  test::fill_i32(j, {123456, -7, 16777217});
  Tensor* f = ctx.new_tensor(DType::F32, 3);
  compute(ops::cpy(ctx, j, f));
  EXPECT_EQ(values(*f), (std::vector<float>{123456.0f, -7.0f, 16777216.0f}));  // via f32
  Tensor* k = ctx.new_tensor(DType::I32, 3);
  compute(ops::cpy(ctx, j, k));
  EXPECT_EQ(test::values_i32(*k), (std::vector<int32_t>{123456, -7, 16777217}));  // i32 -> i32 is exact
}

// Two rows: the first with amax 127 (d = 1), the second with amax 63.5 (d = 0.5), so x * id is exact
// and the expected quants are plain roundings (halves away from zero).
TEST(CpuCopy, F32ToQ8_0KnownBlocks) {
  Context ctx(true);
  std::vector<float> row0 = {127, -127, 2.5f, -2.5f, 0.49f, -0.51f, 3.7f, -3.7f, 100.2f, 0};
  for (int j = 10; j < 32; ++j) row0.push_back(static_cast<float>(j - 16));
  std::vector<float> row1(32, 0.0f);
  row1[0] = 63.5f;
  row1[1] = -1.25f;
  row1[2] = 0.3f;
  row1[3] = -0.2f;
  row1[4] = 10.75f;
  std::vector<float> in = row0;
  in.insert(in.end(), row1.begin(), row1.end());
  Tensor* a = ctx.new_tensor(DType::F32, 32, 2);
  fill(a, in);
  Tensor* q = ctx.new_tensor(DType::Q8_0, 32, 2);
  compute(ops::cpy(ctx, a, q));
  const auto* blocks = static_cast<const BlockQ8_0*>(q->data);
  EXPECT_EQ(blocks[0].d, 0x3C00);  // 1.0
  const int8_t expect0[10] = {127, -127, 3, -3, 0, -1, 4, -4, 100, 0};
  for (int j = 0; j < 10; ++j) EXPECT_EQ(blocks[0].qs[j], expect0[j]) << j;
  for (int j = 10; j < 32; ++j) EXPECT_EQ(blocks[0].qs[j], j - 16) << j;
  EXPECT_EQ(blocks[1].d, 0x3800);  // 0.5
  const int8_t expect1[5] = {127, -3, 1, 0, 22};
  for (int j = 0; j < 5; ++j) EXPECT_EQ(blocks[1].qs[j], expect1[j]) << j;
  for (int j = 5; j < 32; ++j) EXPECT_EQ(blocks[1].qs[j], 0) << j;
}

// max = -8 gives d = 1 and q = min(15, (int)(x + 8.5)); max = +8 gives d = -1 and q = (int)(8.5 - x).
TEST(CpuCopy, F32ToQ4_0KnownBlocks) {
  Context ctx(true);
  std::vector<float> row0 = {-8, 7, 7.4f, 0, -0.6f, 0.5f, -3.2f, 2.49f};
  for (int j = 8; j < 32; ++j) row0.push_back(static_cast<float>(j % 16 - 8));
  const int q0[32] = {0, 15, 15, 8, 7, 9, 5, 10, 8, 9, 10, 11, 12, 13, 14, 15,
                      0, 1,  2,  3, 4, 5, 6, 7,  8, 9, 10, 11, 12, 13, 14, 15};
  std::vector<float> row1(32, 0.0f);
  row1[0] = 8;
  row1[1] = -7;
  row1[2] = 1;
  row1[3] = -0.4f;
  int q1[32];
  for (int& q : q1) q = 8;
  q1[0] = 0;
  q1[1] = 15;
  q1[2] = 7;
  q1[3] = 8;
  std::vector<float> in = row0;
  in.insert(in.end(), row1.begin(), row1.end());
  Tensor* a = ctx.new_tensor(DType::F32, 32, 2);
  fill(a, in);
  Tensor* q = ctx.new_tensor(DType::Q4_0, 32, 2);
  compute(ops::cpy(ctx, a, q));
  const auto* blocks = static_cast<const BlockQ4_0*>(q->data);
  EXPECT_EQ(blocks[0].d, 0x3C00);  // +1
  EXPECT_EQ(blocks[1].d, 0xBC00);  // -1
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(blocks[0].qs[j], q0[j] | (q0[j + 16] << 4)) << j;
    EXPECT_EQ(blocks[1].qs[j], q1[j] | (q1[j + 16] << 4)) << j;
  }
}

TEST(CpuCopy, QuantizedSourcesDequantize) {
  Context ctx(true);
  Tensor* q4 = ctx.new_tensor(DType::Q4_0, 32);
  auto* b4 = static_cast<BlockQ4_0*>(q4->data);
  b4->d = 0x3400;  // 0.25
  for (int j = 0; j < 16; ++j) b4->qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  Tensor* q8 = ctx.new_tensor(DType::Q8_0, 32);
  auto* b8 = static_cast<BlockQ8_0*>(q8->data);
  b8->d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) b8->qs[j] = static_cast<int8_t>(4 * j - 64);

  Tensor* f4 = ctx.new_tensor(DType::F32, 32);
  Tensor* h8 = ctx.new_tensor(DType::F16, 32);
  compute(ops::cpy(ctx, q4, f4));
  compute(ops::cpy(ctx, q8, h8));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(test::get(*f4, j), (j - 8) * 0.25f) << j;
    EXPECT_EQ(test::get(*f4, j + 16), (7 - j) * 0.25f) << j;
  }
  for (int j = 0; j < 32; ++j) EXPECT_EQ(test::get(*h8, j), (4 * j - 64) * 0.5f) << j;

  // DUP of a quantized tensor copies its blocks byte for byte.
  Tensor* d = ops::dup(ctx, q4);
  compute(d);
  EXPECT_EQ(test::raw_bytes(*d), test::raw_bytes(*q4));
}

// Every allowed (source, destination) pair, from a non-contiguous source (transposed for scalar
// types, every other row for quantized ones) into a destination of another shape where allowed.
// Expected values: the source's logical values converted row by row with the format functions.
TEST(CpuCopy, EveryTypePairThroughStrides) {
  constexpr int64_t kN0 = kSuperBlock, kRows = 3;  // rows of whole blocks of every type
  for (DType st : kAllDTypes) {
    for (DType dt : kAllDTypes) {
      if (!op_types_defined(Op::Cpy, OpTypes{dt, {st, dt}})) continue;  // not in the op table
      SCOPED_TRACE(std::string(name(st)) + " -> " + std::string(name(dt)));
      Context ctx(true);
      std::vector<float> logical =
          st == DType::I32 ? std::vector<float>{} : test::random_values(kN0 * kRows, 7, -4.0f, 4.0f);
      if (st == DType::I32)
        for (int64_t i = 0; i < kN0 * kRows; ++i) logical.push_back(static_cast<float>((i * 37) % 201 - 100));
      Tensor* src = nullptr;
      std::vector<uint8_t> src_bytes;  // the source's bytes, row after row, as stored
      if (is_quantized(st)) {
        Tensor* backing = ctx.new_tensor(st, kN0, 2 * kRows);
        for (int64_t r = 0; r < kRows; ++r)
          from_f32_row(st, logical.data() + r * kN0, test::elem_ptr(*backing, 0, 2 * r), kN0);
        src = ops::view(ctx, backing, {kN0, kRows, 1, 1}, 2 * backing->nb[1], backing->nb[2], backing->nb[3],
                        0);
        for (int64_t r = 0; r < kRows; ++r) {
          const auto* p = reinterpret_cast<const uint8_t*>(test::elem_ptr(*src, 0, r));
          src_bytes.insert(src_bytes.end(), p, p + src->row_size());
          to_f32_row(st, p, logical.data() + r * kN0, kN0);  // what the source really holds
        }
      } else {
        Tensor* backing = ctx.new_tensor(st, kRows, kN0);
        src = ops::transpose(ctx, backing);  // [kN0, kRows], nb0 = a whole row of backing
        fill(src, logical);
        logical = values(*src);
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t i = 0; i < kN0; ++i) {
            const auto* p = reinterpret_cast<const uint8_t*>(test::elem_ptr(*src, i, r));
            src_bytes.insert(src_bytes.end(), p, p + traits(st).block_bytes);
          }
      }
      Tensor* dst =
          is_quantized(dt) ? ctx.new_tensor(dt, kN0, kRows) : ctx.new_tensor(dt, kN0 / 2, 2 * kRows);
      std::vector<uint8_t> expected(dst->nbytes());
      if (st == dt)
        expected = src_bytes;
      else
        from_f32_row(dt, logical.data(), expected.data(), kN0 * kRows);  // rows are whole blocks
      Tensor* out = ops::cpy(ctx, src, dst);
      for (const auto& c : test::kConfigs) {
        std::memset(dst->data, 0xA5, dst->nbytes());
        compute(out, c.threads, c.kernels);
        EXPECT_EQ(test::raw_bytes(*dst), expected) << c.threads << " threads";
      }
    }
  }
}

TEST(CpuCopy, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 64, 7, 3, 2);
  fill(a, test::random_values(a->nelements(), 3));
  Tensor* p = ops::permute(ctx, a, 0, 2, 1, 3);  // [64, 3, 7, 2]
  expect_same_bytes_everywhere(ops::cont(ctx, p));
  expect_same_bytes_everywhere(ops::cont(ctx, a));
  Tensor* h = ctx.new_tensor(DType::F16, 64, 3, 7, 2);
  expect_same_bytes_everywhere(ops::cpy(ctx, p, h), h);
  Tensor* q = ctx.new_tensor(DType::Q8_0, 64, 3, 7, 2);
  expect_same_bytes_everywhere(ops::cpy(ctx, p, q), q);
  Tensor* q4 = ctx.new_tensor(DType::Q4_0, 128, 21);
  expect_same_bytes_everywhere(ops::cpy(ctx, a, q4), q4);  // contiguous, rows of another length
  Tensor* back = ctx.new_tensor(DType::F32, 64, 42);
  expect_same_bytes_everywhere(ops::cpy(ctx, q4, back), back);
}

TEST(CpuCopy, BuildersRejectBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);
  expect_error([&] { ops::cpy(ctx, a, ctx.new_tensor(DType::F32, 5, 3)); }, "CPY");
  expect_error([&] { ops::cpy(ctx, ctx.new_tensor(DType::I32, 4), ctx.new_tensor(DType::F16, 4)); }, "CPY");
  // A quantized destination must be contiguous: every other row of a Q8_0 tensor is not.
  Tensor* qbig = ctx.new_tensor(DType::Q8_0, 64, 4);
  Tensor* qrows = ops::view(ctx, qbig, {64, 2, 1, 1}, 2 * qbig->nb[1], qbig->nb[2], qbig->nb[3], 0);
  expect_error([&] { ops::cpy(ctx, ctx.new_tensor(DType::F32, 64, 2), qrows); }, "CPY");
  // A quantized source needs whole rows: the transpose of a [64, 32] Q8_0 tensor has nb0 = 2 blocks.
  Tensor* qt = ops::transpose(ctx, ctx.new_tensor(DType::Q8_0, 64, 32));
  expect_error([&] { ops::dup(ctx, qt); }, "DUP");
  expect_error([&] { ops::cont(ctx, qt); }, "CONT");
  expect_error([&] { ops::cpy(ctx, qt, ctx.new_tensor(DType::F32, 32, 64)); }, "CPY");
}

}  // namespace
}  // namespace tessera
