// UNARY (7 functions), LEAKY_RELU, SCALE, SQR, CLAMP on the CPU backend: exact hand values where the
// math is exact, a double-precision re-computation for the transcendental ones, f16 tensors,
// strided inputs, thread/kernel-set independence, and builder errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::values;

double gelu_ref(double x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * x * (1.0 + 0.044715 * x * x)));
}
double gelu_quick_ref(double x) { return x / (1.0 + std::exp(-1.702 * x)); }
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }
double tanh_ref(double x) { return std::tanh(x); }

const std::vector<float> kInputs = {-10.5f, -10.0f, -9.99f, -4.0f, -3.0f, -1.0f, -0.5f, -0.0f, 0.0f,
                                    0.25f,  0.5f,   1.0f,   2.5f,  3.0f,  5.0f,  9.5f,  10.0f, 12.0f};

Tensor* run_unary(Context& ctx, UnaryOp op, const std::vector<float>& in, DType type = DType::F32) {
  Tensor* a = ctx.new_tensor(type, static_cast<int64_t>(in.size()));
  fill(a, in);
  Tensor* out = ops::unary(ctx, a, op);
  compute(out);
  return out;
}

TEST(CpuUnary, TranscendentalMatchDouble) {
  const std::pair<UnaryOp, double (*)(double)> cases[] = {{UnaryOp::Gelu, &gelu_ref},
                                                          {UnaryOp::GeluQuick, &gelu_quick_ref},
                                                          {UnaryOp::Silu, &silu_ref},
                                                          {UnaryOp::Tanh, &tanh_ref}};
  for (const auto& [op, ref] : cases) {
    SCOPED_TRACE(std::string(unary_op_name(op)));
    Context ctx(true);
    Tensor* out = run_unary(ctx, op, kInputs);
    for (size_t i = 0; i < kInputs.size(); ++i) {
      const double want = ref(kInputs[i]);
      EXPECT_NEAR(test::get(*out, static_cast<int64_t>(i)), want, 2e-6 * std::max(1.0, std::fabs(want)))
          << "x = " << kInputs[i];
    }
  }
}

TEST(CpuUnary, GeluSaturatesOutsideTen) {
  Context ctx(true);
  Tensor* out = run_unary(ctx, UnaryOp::Gelu, {-100.0f, -10.5f, -10.0f, 10.0f, 10.5f, 1000.0f});
  EXPECT_EQ(values(*out), (std::vector<float>{0.0f, 0.0f, 0.0f, 10.0f, 10.5f, 1000.0f}));
}

TEST(CpuUnary, PiecewiseFunctionsExact) {
  Context ctx(true);
  const std::vector<float> in = {-4.0f, -3.0f, -1.5f, 0.0f, 1.5f, 3.0f, 5.0f};
  EXPECT_EQ(values(*run_unary(ctx, UnaryOp::Relu, in)), (std::vector<float>{0, 0, 0, 0, 1.5f, 3, 5}));
  EXPECT_EQ(values(*run_unary(ctx, UnaryOp::HardSigmoid, in)),
            (std::vector<float>{0, 0, 0.25f, 0.5f, 0.75f, 1, 1}));
  EXPECT_EQ(values(*run_unary(ctx, UnaryOp::HardSwish, in)),
            (std::vector<float>{0, 0, -0.375f, 0, 1.125f, 3, 5}));
}

TEST(CpuUnary, ParameterisedOpsExact) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 5);
  fill(a, {-3.0f, -2.0f, 0.5f, 1.25f, 5.0f});
  Tensor* leaky = ops::leaky_relu(ctx, a, 0.1f);
  Tensor* scaled = ops::scale(ctx, a, 2.0f, 0.5f);
  Tensor* scaled_only = ops::scale(ctx, a, -0.25f);
  Tensor* sq = ops::sqr(ctx, a);
  Tensor* cl = ops::clamp(ctx, a, -1.0f, 2.0f);
  for (Tensor* t : {leaky, scaled, scaled_only, sq, cl}) compute(t);
  EXPECT_EQ(values(*leaky), (std::vector<float>{0.1f * -3.0f, 0.1f * -2.0f, 0.5f, 1.25f, 5.0f}));
  EXPECT_EQ(values(*scaled), (std::vector<float>{-5.5f, -3.5f, 1.5f, 3.0f, 10.5f}));
  EXPECT_EQ(values(*scaled_only), (std::vector<float>{0.75f, 0.5f, -0.125f, -0.3125f, -1.25f}));
  EXPECT_EQ(values(*sq), (std::vector<float>{9.0f, 4.0f, 0.25f, 1.5625f, 25.0f}));
  EXPECT_EQ(values(*cl), (std::vector<float>{-1.0f, -1.0f, 0.5f, 1.25f, 2.0f}));
}

// f16 tensors: computed in f32 and rounded once to f16, so within half an f16 ulp (plus the f32
// error) of the exact value.
TEST(CpuUnary, F16Tensors) {
  Context ctx(true);
  const std::vector<float> in = {-3.0f, -1.0f, -0.5f, 0.25f, 0.5f, 1.0f, 2.5f, 3.0f};  // exact in f16
  for (UnaryOp op : {UnaryOp::Gelu, UnaryOp::Silu, UnaryOp::Tanh, UnaryOp::GeluQuick}) {
    SCOPED_TRACE(std::string(unary_op_name(op)));
    Tensor* out = run_unary(ctx, op, in, DType::F16);
    ASSERT_EQ(out->type, DType::F16);
    for (size_t i = 0; i < in.size(); ++i) {
      const double x = in[i];
      const double want = op == UnaryOp::Gelu   ? gelu_ref(x)
                          : op == UnaryOp::Silu ? silu_ref(x)
                          : op == UnaryOp::Tanh ? tanh_ref(x)
                                                : gelu_quick_ref(x);
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 6.1e-5)) - 10);
      EXPECT_NEAR(test::get(*out, static_cast<int64_t>(i)), want, 0.5 * ulp + 1e-6) << "x = " << x;
    }
  }
  Tensor* h = ctx.new_tensor(DType::F16, 3);
  fill(h, {-2.0f, 0.5f, 1.5f});
  Tensor* sc = ops::scale(ctx, h, 3.0f, 0.25f);
  Tensor* sq = ops::sqr(ctx, h);
  compute(sc);
  compute(sq);
  EXPECT_EQ(values(*sc), (std::vector<float>{-5.75f, 1.75f, 4.75f}));
  EXPECT_EQ(values(*sq), (std::vector<float>{4.0f, 0.25f, 2.25f}));
}

TEST(CpuUnary, TransposedInput) {
  Context ctx(true);
  Tensor* base = ctx.new_tensor(DType::F32, 3, 4);
  fill(base, test::random_values(12, 4, -5.0f, 5.0f));
  Tensor* t = ops::transpose(ctx, base);  // [4, 3]
  Tensor* out = ops::silu(ctx, t);
  Tensor* out_sq = ops::sqr(ctx, t);
  compute(out, 2);
  compute(out_sq, 2);
  for (int64_t i1 = 0; i1 < 3; ++i1)
    for (int64_t i0 = 0; i0 < 4; ++i0) {
      const float x = test::get(*base, i1, i0);
      EXPECT_NEAR(test::get(*out, i0, i1), silu_ref(x), 2e-6 * std::max(1.0, std::fabs(silu_ref(x))));
      EXPECT_EQ(test::get(*out_sq, i0, i1), x * x);
    }
}

TEST(CpuUnary, SameBytesForAnyThreadsAndKernels) {
  for (DType type : {DType::F32, DType::F16}) {
    Context ctx(true);
    Tensor* a = ctx.new_tensor(type, 33, 9, 2);
    fill(a, test::random_values(a->nelements(), 21, -12.0f, 12.0f));
    Tensor* t = ops::permute(ctx, a, 1, 0, 2, 3);
    std::vector<std::function<Tensor*(Tensor*)>> builders;
    for (int op = 0; op < kUnaryOpCount; ++op)
      builders.push_back([&, op](Tensor* x) { return ops::unary(ctx, x, static_cast<UnaryOp>(op)); });
    builders.push_back([&](Tensor* x) { return ops::leaky_relu(ctx, x, 0.01f); });
    builders.push_back([&](Tensor* x) { return ops::scale(ctx, x, 0.3f, -0.7f); });
    builders.push_back([&](Tensor* x) { return ops::sqr(ctx, x); });
    builders.push_back([&](Tensor* x) { return ops::clamp(ctx, x, -2.0f, 3.5f); });
    for (auto& build : builders) {
      test::expect_same_bytes_everywhere(build(a));
      test::expect_same_bytes_everywhere(build(t));
    }
  }
}

TEST(CpuUnary, BuildersRejectBadOperands) {
  Context ctx(true);
  Tensor* i = ctx.new_tensor(DType::I32, 4);
  Tensor* bf = ctx.new_tensor(DType::BF16, 4);
  Tensor* f = ctx.new_tensor(DType::F32, 4);
  test::expect_error([&] { ops::unary(ctx, i, UnaryOp::Gelu); }, "UNARY");
  test::expect_error([&] { ops::unary(ctx, f, static_cast<UnaryOp>(99)); }, "UNARY");
  test::expect_error([&] { ops::leaky_relu(ctx, bf, 0.1f); }, "LEAKY_RELU");
  test::expect_error([&] { ops::scale(ctx, ctx.new_tensor(DType::Q8_0, 32), 2.0f); }, "SCALE");
  test::expect_error([&] { ops::sqr(ctx, i); }, "SQR");
  test::expect_error([&] { ops::clamp(ctx, f, 2.0f, 1.0f); }, "CLAMP");
}

}  // namespace
}  // namespace tessera
