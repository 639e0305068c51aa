// UNARY family on OpenCL at inputs the conformance harness (values in [-1, 1]) never reaches:
// GELU's saturation at +-10, overflow of exp in SILU / GELU_QUICK, NaN and infinities in CLAMP.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "opencl/device_run.h"
#include "tessera/convert.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> unary_on(int dev, DType type, const std::vector<float>& x,
                            const std::function<Tensor*(Context&, Tensor*)>& op) {
  return test::run_on_device(dev, [&](Context& ctx) {
    Tensor* a = ctx.new_tensor(type, static_cast<int64_t>(x.size()));
    return test::DeviceGraph{{{a, x}}, op(ctx, a)};
  });
}

// GELU's tanh form in double, saturated as ggml's CPU table is.
double gelu_expected(double x) {
  if (x <= -10.0) return 0.0;
  if (x >= 10.0) return x;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x)));
}

}  // namespace

TEST(OpenClUnary, GeluSaturatesOutsideTen) {
  const std::vector<float> x{-1e30f, -30.0f, -10.5f, -10.0f, -9.99f, -3.0f, -0.5f, 0.0f,
                             0.5f,   3.0f,   9.99f,  10.0f,  10.5f,  30.0f, 1e30f};
  for (int dev = 0; dev < 2; ++dev) {
    const auto y = unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::gelu(ctx, a); });
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = gelu_expected(x[i]);
      EXPECT_NEAR(y[i], want, 1e-5 * std::max(1.0, std::fabs(want)))
          << "OpenCL" << dev << " GELU(" << x[i] << ")";
    }
    // Exactly x at and above 10, exactly 0 at and below -10.
    EXPECT_EQ(y[11], 10.0f);
    EXPECT_EQ(y[14], 1e30f);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[3], 0.0f);
  }
}

TEST(OpenClUnary, GeluOnF16RoundsTheF32Result) {
  const std::vector<float> x{-12.0f, -10.0f, -2.0f, 0.25f, 2.0f, 10.0f, 12.0f};
  for (int dev = 0; dev < 2; ++dev) {
    const auto y = unary_on(dev, DType::F16, x, [](Context& ctx, Tensor* a) { return ops::gelu(ctx, a); });
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = gelu_expected(x[i]);
      EXPECT_NEAR(y[i], want, 1e-3 * std::max(1.0, std::fabs(want)))
          << "OpenCL" << dev << " GELU(" << x[i] << ")";
    }
    EXPECT_EQ(y[6], 12.0f);
    EXPECT_EQ(y[0], 0.0f);
  }
}

TEST(OpenClUnary, SiluAndGeluQuickAtLargeMagnitudes) {
  const std::vector<float> x{-200.0f, -100.0f, -20.0f, 20.0f, 100.0f, 200.0f};
  for (int dev = 0; dev < 2; ++dev) {
    const auto silu = unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::silu(ctx, a); });
    const auto quick =
        unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::gelu_quick(ctx, a); });
    for (size_t i = 0; i < x.size(); ++i) {
      const double s = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
      const double q = x[i] / (1.0 + std::exp(-1.702 * x[i]));
      EXPECT_NEAR(silu[i], s, 1e-6 * std::max(1.0, std::fabs(s)))
          << "OpenCL" << dev << " SILU(" << x[i] << ")";
      EXPECT_NEAR(quick[i], q, 1e-6 * std::max(1.0, std::fabs(q)))
          << "OpenCL" << dev << " GELU_QUICK(" << x[i] << ")";
      EXPECT_FALSE(std::isnan(silu[i]) || std::isnan(quick[i])) << "exp overflow must not give NaN";
    }
  }
}

TEST(OpenClUnary, ClampHardSwishAndReluAtSpecialValues) {
  const std::vector<float> x{kNaN, -kInf, kInf, -3.0f, -1.0f, 0.0f, 1.0f, 3.0f, 4.0f};
  for (int dev = 0; dev < 2; ++dev) {
    const auto c =
        unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::clamp(ctx, a, -0.5f, 2.0f); });
    // max(min(x, 2), -0.5): a NaN fails every comparison, so it becomes the upper bound.
    const std::vector<float> want_clamp{2.0f, -0.5f, 2.0f, -0.5f, -0.5f, 0.0f, 1.0f, 2.0f, 2.0f};
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(c[i], want_clamp[i]) << "OpenCL" << dev << " CLAMP at " << i;

    const auto hs =
        unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::hardswish(ctx, a); });
    // x * min(1, max(0, (x + 3) / 6)); fmin/fmax drop the NaN, so NaN * 1 stays NaN.
    EXPECT_TRUE(std::isnan(hs[0]));
    EXPECT_TRUE(std::isnan(hs[1]));  // -inf * max(0, -inf) = -inf * 0
    EXPECT_EQ(hs[2], kInf);
    EXPECT_EQ(hs[3], 0.0f);
    EXPECT_FLOAT_EQ(hs[4], -1.0f / 3.0f);
    EXPECT_EQ(hs[5], 0.0f);
    EXPECT_FLOAT_EQ(hs[6], 2.0f / 3.0f);
    EXPECT_EQ(hs[7], 3.0f);
    EXPECT_EQ(hs[8], 4.0f);

    const auto r = unary_on(dev, DType::F32, x, [](Context& ctx, Tensor* a) { return ops::relu(ctx, a); });
    const std::vector<float> want_relu{0.0f, 0.0f, kInf, 0.0f, 0.0f, 0.0f, 1.0f, 3.0f, 4.0f};
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(r[i], want_relu[i]) << "OpenCL" << dev << " RELU at " << i;
  }
}
