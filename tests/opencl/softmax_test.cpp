// SOFT_MAX on OpenCL with -inf logits, which the conformance harness (uniform inputs) never
// produces: a row masked entirely gives zeros (as the CPU defines it), partly masked rows put no
// weight on the masked places, and DIAG_MASK_INF feeding SOFT_MAX gives the causal pattern.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "opencl/device_run.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// softmax(x * scale + mask) of one row in double; all -inf gives zeros.
std::vector<double> soft_max_row(const std::vector<float>& x, const std::vector<float>& mask, float scale) {
  std::vector<double> w(x.size());
  double mx = -kInf;
  for (size_t i = 0; i < x.size(); ++i) {
    w[i] = static_cast<double>(x[i]) * scale + mask[i];
    mx = std::max(mx, w[i]);
  }
  if (mx == -kInf) return std::vector<double>(x.size(), 0.0);
  double sum = 0.0;
  for (auto& v : w) sum += v = std::exp(v - mx);
  for (auto& v : w) v /= sum;
  return w;
}

TEST(OpenClSoftMax, MaskedRowsAndAFullyMaskedRow) {
  constexpr int64_t ne0 = 5, ne1 = 3;
  const std::vector<float> x = {0.5f, -1.0f, 2.0f,  0.25f, 1.5f, 3.0f,   -2.0f, 0.0f,
                                1.0f, -0.5f, -1.5f, 0.75f, 2.5f, -0.25f, 0.125f};
  const std::vector<float> mask = {0.0f,  -kInf, 0.0f,  -kInf, -1.0f,  // partly masked
                                   -kInf, -kInf, -kInf, -kInf, -kInf,  // fully masked
                                   0.0f,  0.5f,  -0.5f, 0.0f,  0.0f};
  for (DType mt : {DType::F32, DType::F16}) {
    for (int dev = 0; dev < 2; ++dev) {
      const std::vector<float> got = test::run_on_device(dev, [&](Context& ctx) {
        Tensor* a = ctx.new_tensor(DType::F32, ne0, ne1);
        Tensor* m = ctx.new_tensor(mt, ne0, ne1);
        return test::DeviceGraph{{{a, x}, {m, mask}}, ops::soft_max(ctx, a, m, 0.5f)};
      });
      for (int64_t r = 0; r < ne1; ++r) {
        const std::vector<double> want =
            soft_max_row({x.begin() + r * ne0, x.begin() + (r + 1) * ne0},
                         {mask.begin() + r * ne0, mask.begin() + (r + 1) * ne0}, 0.5f);
        for (int64_t i = 0; i < ne0; ++i)
          EXPECT_NEAR(got[static_cast<size_t>(r * ne0 + i)], want[static_cast<size_t>(i)], 1e-6)
              << "row " << r << " col " << i << " mask " << name(mt) << " OpenCL" << dev;
      }
      for (int64_t i = 0; i < ne0; ++i) EXPECT_EQ(got[static_cast<size_t>(ne0 + i)], 0.0f);
    }
  }
}

TEST(OpenClSoftMax, CausalMaskFromDiagMaskInf) {
  // Row j of a 4x4 slice keeps columns 0..j (n_past 0): softmax over j+1 equal logits is 1/(j+1).
  std::vector<float> x(16, 0.75f);
  for (int dev = 0; dev < 2; ++dev) {
    const std::vector<float> got = test::run_on_device(dev, [&](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, 4, 4);
      return test::DeviceGraph{{{a, x}}, ops::soft_max(ctx, ops::diag_mask_inf(ctx, a, 0))};
    });
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i)
        EXPECT_NEAR(got[static_cast<size_t>(j * 4 + i)], i <= j ? 1.0 / (j + 1) : 0.0, 1e-7)
            << "row " << j << " col " << i << " OpenCL" << dev;
  }
}

}  // namespace
