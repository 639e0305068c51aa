// ADD / DIV and ACC on OpenCL where the conformance harness cannot look: results that overflow
// f16 or divide by zero, and ACC's overlapping targets, which must add in b's logical order
// (bit for bit what one sequential f32 loop gives).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "opencl/device_run.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST(OpenClBinary, F16OverflowAndDivisionByZero) {
  for (int dev = 0; dev < 2; ++dev) {
    const auto sum = test::run_on_device(dev, [](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F16, 3);
      Tensor* b = ctx.new_tensor(DType::F32, 3);
      return test::DeviceGraph{{{a, {65000.0f, -65000.0f, 1.0f}}, {b, {10000.0f, -10000.0f, 0.5f}}},
                               ops::add(ctx, a, b)};
    });
    EXPECT_EQ(sum, (std::vector<float>{kInf, -kInf, 1.5f})) << "OpenCL" << dev;
    const auto quot = test::run_on_device(dev, [](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, 4);
      Tensor* b = ctx.new_tensor(DType::F32, 4);
      return test::DeviceGraph{{{a, {1.0f, -1.0f, 0.0f, 3.0f}}, {b, {0.0f, 0.0f, 0.0f, 4.0f}}},
                               ops::div(ctx, a, b)};
    });
    EXPECT_EQ(quot[0], kInf);
    EXPECT_EQ(quot[1], -kInf);
    EXPECT_TRUE(std::isnan(quot[2]));
    EXPECT_EQ(quot[3], 0.75f);
  }
}

TEST(OpenClAcc, OverlappingTargetsAddInLogicalOrder) {
  // b [5, 4, 2] onto a [16, 3] with nb1 = 0 (every row of a plane on the same 5 floats) and
  // nb2 = 12 bytes (the two planes overlap by 2 floats), offset 4 bytes.
  std::vector<float> a(48), b(40);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f + 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = 1.0f / static_cast<float>(3 + i) + 1e4f * static_cast<float>(i % 3);
  std::vector<float> want = a;  // one sequential loop over b in logical order
  for (int i2 = 0; i2 < 2; ++i2)
    for (int i1 = 0; i1 < 4; ++i1)
      for (int i0 = 0; i0 < 5; ++i0)
        want[static_cast<size_t>(1 + i0 + 3 * i2)] += b[static_cast<size_t>(i0 + 5 * i1 + 20 * i2)];
  for (int dev = 0; dev < 2; ++dev) {
    const auto got = test::run_on_device(dev, [&](Context& ctx) {
      Tensor* ta = ctx.new_tensor(DType::F32, 16, 3);
      Tensor* tb = ctx.new_tensor(DType::F32, 5, 4, 2);
      return test::DeviceGraph{{{ta, a}, {tb, b}}, ops::acc(ctx, ta, tb, 0, 12, 24, 4)};
    });
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
          << "OpenCL" << dev << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(OpenClAcc, DisjointTargetsThroughAStridedView) {
  // b [3, 2] into columns 1..3 of rows 0 and 2 of a [6, 4] (nb1 = 2 rows), offset 1 float.
  std::vector<float> a(24), b{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  std::vector<float> want = a;
  for (int i1 = 0; i1 < 2; ++i1)
    for (int i0 = 0; i0 < 3; ++i0)
      want[static_cast<size_t>(1 + i0 + 12 * i1)] += b[static_cast<size_t>(i0 + 3 * i1)];
  for (int dev = 0; dev < 2; ++dev) {
    const auto got = test::run_on_device(dev, [&](Context& ctx) {
      Tensor* ta = ctx.new_tensor(DType::F32, 6, 4);
      Tensor* tb = ctx.new_tensor(DType::F32, 3, 2);
      return test::DeviceGraph{{{ta, a}, {tb, b}}, ops::acc(ctx, ta, tb, 48, 96, 96, 4)};
    });
    EXPECT_EQ(got, want) << "OpenCL" << dev;
  }
}
