// CPU GLU: gpt-oss's clamped SwiGLU (ggml's SWIGLU_OAI), split and fused rows.
#include <gtest/gtest.h>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::values;

// min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1), worked out in double for these pairs:
// g 1, u 0: 1 / (1 + e^-1.702) = 0.845795766; g 2, u -0.5: 2 / (1 + e^-3.404) * 0.5 = 0.967829312;
// g -3, u 2: -3 / (1 + e^5.106) * 3 = -0.054213929; g 10, u 8 (both clamped): 7 / (1 + e^-11.914) * 8
// = 55.999625026; g 7, u -9 (u clamped): 7 / (1 + e^-11.914) * -6 = -41.99971877; g 0: 0.
const float kGate[6] = {1, 2, -3, 10, 7, 0};
const float kUp[6] = {0, -0.5f, 2, 8, -9, 5};
const double kWant[6] = {0.8457957659, 0.9678293116, -0.0542139291, 55.9996250264, -41.9997187698, 0.0};

TEST(CpuGlu, SwigluOaiHandComputed) {
  Context ctx(true);
  Tensor* g = ctx.new_tensor(DType::F32, 3, 2);
  Tensor* u = ctx.new_tensor(DType::F32, 3, 2);
  fill(g, std::vector<float>(kGate, kGate + 6));
  fill(u, std::vector<float>(kUp, kUp + 6));
  Tensor* out = ops::swiglu_oai(ctx, g, u, 1.702f, 7.0f);
  ASSERT_EQ(out->ne, g->ne);
  compute(out);
  const std::vector<float> got = values(*out);
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(got[static_cast<size_t>(i)], kWant[i], 2e-6 * (1 + std::abs(kWant[i]))) << i;
}

TEST(CpuGlu, FusedRowsHalveAndSwappedTakesUpFirst) {
  Context ctx(true);
  // Row r: [gate r (3), up r (3)]; the swapped tensor holds [up, gate].
  Tensor* fused = ctx.new_tensor(DType::F32, 6, 2);
  Tensor* swapped = ctx.new_tensor(DType::F32, 6, 2);
  std::vector<float> f, s;
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 3; ++i) f.push_back(kGate[3 * r + i]);
    for (int i = 0; i < 3; ++i) f.push_back(kUp[3 * r + i]);
    for (int i = 0; i < 3; ++i) s.push_back(kUp[3 * r + i]);
    for (int i = 0; i < 3; ++i) s.push_back(kGate[3 * r + i]);
  }
  fill(fused, f);
  fill(swapped, s);
  Tensor* a = ops::glu(ctx, fused, nullptr, GluParams{GluOp::SwigluOai, false, 1.702f, 7.0f});
  Tensor* b = ops::glu(ctx, swapped, nullptr, GluParams{GluOp::SwigluOai, true, 1.702f, 7.0f});
  ASSERT_EQ(a->ne[0], 3);
  compute(a, 2);
  compute(b);
  const std::vector<float> ga = values(*a), gb = values(*b);
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(ga[static_cast<size_t>(i)], kWant[i], 2e-6 * (1 + std::abs(kWant[i]))) << i;
    EXPECT_EQ(ga[static_cast<size_t>(i)], gb[static_cast<size_t>(i)]) << i;
  }
}

TEST(CpuGlu, OtherAlphaAndLimit) {
  // alpha 1, limit 0.5: g 2 -> 0.5 / (1 + e^-0.5) = 0.311234; u -3 -> -0.5 + 1 = 0.5: 0.155617.
  Context ctx(true);
  Tensor* g = ctx.new_tensor(DType::F32, 1);
  Tensor* u = ctx.new_tensor(DType::F32, 1);
  fill(g, {2});
  fill(u, {-3});
  Tensor* out = ops::swiglu_oai(ctx, g, u, 1.0f, 0.5f);
  compute(out);
  EXPECT_NEAR(values(*out)[0], 0.5 / (1 + std::exp(-0.5)) * 0.5, 1e-7);
}

TEST(CpuGlu, SameBytesForAnyThreadsAndKernels) {
  Context ctx(true);
  Tensor* g = ctx.new_tensor(DType::F32, 128, 5, 3);
  Tensor* u = ctx.new_tensor(DType::F32, 128, 5, 3);
  test::fill_random(g, 3, -10.0f, 10.0f);
  test::fill_random(u, 4, -10.0f, 10.0f);
  test::expect_same_bytes_everywhere(ops::swiglu_oai(ctx, g, u, 1.702f, 7.0f));
}

TEST(CpuGlu, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* g = ctx.new_tensor(DType::F32, 4, 2);
  test::expect_op_error([&] { ops::swiglu_oai(ctx, g, ctx.new_tensor(DType::F32, 4, 3), 1.702f, 7.0f); },
                        "GLU");
  test::expect_op_error([&] { ops::swiglu_oai(ctx, g, ctx.new_tensor(DType::F16, 4, 2), 1.702f, 7.0f); },
                        "GLU");
  test::expect_op_error([&] { ops::glu(ctx, ctx.new_tensor(DType::F32, 5, 2), nullptr, GluParams{}); },
                        "GLU");  // odd fused row
  test::expect_op_error([&] { ops::glu(ctx, g, g, GluParams{GluOp::SwigluOai, true, 1.702f, 7.0f}); }, "GLU");
  test::expect_op_error(
      [&] {
        ops::glu(ctx, g, nullptr, GluParams{static_cast<GluOp>(0), false, 1, 1});
      },
      "GLU");
  test::expect_op_error([&] { ops::glu(ctx, ops::transpose(ctx, g), nullptr, GluParams{}); }, "GLU");
}

}  // namespace
}  // namespace tessera
