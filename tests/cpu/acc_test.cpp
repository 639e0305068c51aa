// ACC on the CPU backend: b added into a copy of a at a byte offset with given strides.
#include <gtest/gtest.h>

#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::values;

TEST(CpuAcc, HandComputedWindows) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);  // a[i0, i1] = 4 i1 + i0
  fill(a, test::iota(12));
  Tensor* b = ctx.new_tensor(DType::F32, 2, 2);
  fill(b, {100, 200, 300, 400});
  // Rows of b land on a[1..2, 1] and a[1..2, 2].
  Tensor* out = ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 4 * (1 + 4 * 1));
  compute(out);
  EXPECT_EQ(values(*out), (std::vector<float>{0, 1, 2, 3, 4, 105, 206, 7, 8, 309, 410, 11}));
  EXPECT_EQ(values(*a), test::iota(12));  // a itself is untouched
  // Every other row: b rows on a[1..2, 0] and a[1..2, 2].
  Tensor* out2 = ops::acc(ctx, a, b, 2 * a->nb[1], a->nb[2], a->nb[3], 4);
  compute(out2);
  EXPECT_EQ(values(*out2), (std::vector<float>{0, 101, 202, 3, 4, 5, 6, 7, 8, 309, 410, 11}));
}

TEST(CpuAcc, TransposedBAndThreeDims) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3, 2);  // a[i0, i1, i2] = i0 + 4 i1 + 12 i2
  fill(a, test::iota(24));
  Tensor* base = ctx.new_tensor(DType::F32, 2, 1, 2);
  fill(base, {10, 20, 30, 40});
  Tensor* b = ops::permute(ctx, base, 2, 1, 0, 3);  // [2, 1, 2]: b[i0, 0, i2] = base[i2, 0, i0]
  Tensor* out = ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 4);
  compute(out, 2);
  std::vector<float> want = test::iota(24);
  want[1] += 10;       // b[0, 0, 0] = base[0, 0, 0]
  want[2] += 30;       // b[1, 0, 0] = base[0, 0, 1]
  want[1 + 12] += 20;  // b[0, 0, 1] = base[1, 0, 0]
  want[2 + 12] += 40;  // b[1, 0, 1] = base[1, 0, 1]
  EXPECT_EQ(values(*out), want);
}

// Overlapping targets accumulate every b element (OPS.md: dst bytes += b[i]), whatever the threads.
TEST(CpuAcc, OverlappingTargetsAccumulate) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  fill(a, {1, 2, 3, 4});
  Tensor* b = ctx.new_tensor(DType::F32, 2, 2);
  fill(b, {100, 200, 300, 400});
  Tensor* out = ops::acc(ctx, a, b, 4, 8, 8, 0);  // b[i0, i1] -> element i0 + i1
  for (const auto& c : test::kConfigs) {
    compute(out, c.threads, c.kernels);
    EXPECT_EQ(values(*out), (std::vector<float>{101, 502, 403, 4}));
  }
}

TEST(CpuAcc, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 64, 30, 4);
  fill(a, test::random_values(a->nelements(), 8));
  Tensor* b = ctx.new_tensor(DType::F32, 32, 20, 3);
  fill(b, test::random_values(b->nelements(), 9));
  Tensor* out = ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 4 * (5 + 64 * 7) + a->nb[2]);
  test::expect_same_bytes_everywhere(out);
  test::for_each(*b, [&](int64_t i0, int64_t i1, int64_t i2, int64_t, size_t) {
    const float want = test::get(*a, 5 + i0, 7 + i1, 1 + i2) + test::get(*b, i0, i1, i2);
    ASSERT_EQ(test::get(*out, 5 + i0, 7 + i1, 1 + i2), want);
  });
}

TEST(CpuAcc, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* b = ctx.new_tensor(DType::F32, 2, 2);
  test::expect_error([&] { ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 4 * 7); },
                     "ACC");                                                                 // past the end
  test::expect_error([&] { ops::acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 2); }, "ACC");  // misaligned
  test::expect_error(
      [&] { ops::acc(ctx, ctx.new_tensor(DType::F16, 4, 3), ctx.new_tensor(DType::F16, 2), 8, 24, 24, 0); },
      "ACC");
}

}  // namespace
}  // namespace tessera
