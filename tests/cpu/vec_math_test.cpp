// The vectorised math rows (src/cpu/vec_math.h): the AVX2 exp against std::exp in double over the
// whole float range, exp_poly bit for bit against it, SILU rows, and the f16 dot and accumulate rows against
// double sums, for every table the CPU has.
#include "cpu/vec_math.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/convert.h"

namespace tessera {
namespace {

using cpu::vec::MathKernels;

std::vector<const MathKernels*> tables() {
  std::vector<const MathKernels*> t{&cpu::vec::scalar_math()};
  if (cpu::vec::avx2_math() != nullptr) t.push_back(cpu::vec::avx2_math());
  return t;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Checks exp(x) for a batch of x against the double exp with the bounds of vec_math.h.
void check_exp(const MathKernels& k, const std::vector<float>& x, double& worst_rel) {
  std::vector<float> y(x.size());
  k.exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    if (want > static_cast<double>(FLT_MAX)) {
      ASSERT_EQ(y[i], std::numeric_limits<float>::infinity()) << "x = " << x[i];
    } else if (want >= static_cast<double>(FLT_MIN)) {
      const double rel = std::fabs(y[i] - want) / want;
      worst_rel = std::max(worst_rel, rel);
      ASSERT_LE(rel, cpu::vec::kExpMaxRelError) << "x = " << x[i] << " got " << y[i] << " want " << want;
    } else {
      ASSERT_LE(std::fabs(y[i] - want), cpu::vec::kExpMaxSubnormalError) << "x = " << x[i];
    }
  }
}

TEST(CpuVecMath, ExpOverTheWholeFloatRange) {
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    // Every 61st bit pattern of [-110, 90] (about 30 million values, both signs), in rows of odd
    // length so that the vector tails are exercised too.
    double worst = 0.0;
    std::vector<float> x;
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (uint32_t u = 0; u < 0x7f800000u; u += 61) {
        const float f = from_bits(sign | u);
        if (f < -110.0f || f > 90.0f) continue;
        x.push_back(f);
        if (x.size() == 1001) {
          check_exp(*k, x, worst);
          if (HasFatalFailure()) return;
          x.clear();
        }
      }
    }
    check_exp(*k, x, worst);
    std::printf("[%s] exp: worst relative error %.3g (bound %.3g)\n", k->isa, worst,
                cpu::vec::kExpMaxRelError);
  }
}

TEST(CpuVecMath, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    const std::vector<float> x = {0.0f,      -0.0f,     1.0f,       -inf,    inf,     -1000.0f,     1000.0f,
                                  88.72283f, 88.72284f, -87.33654f, -103.0f, -104.5f, std::nanf("")};
    std::vector<float> y(x.size());
    k->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_NEAR(y[2], 2.7182817f, 3e-7f);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_EQ(y[4], inf);
    EXPECT_EQ(y[5], 0.0f);
    EXPECT_EQ(y[6], inf);
    EXPECT_TRUE(std::isfinite(y[7]) && y[7] > 3.4e38f) << y[7];  // just below ln(FLT_MAX)
    EXPECT_EQ(y[8], inf);                                        // just above
    EXPECT_NEAR(y[9], FLT_MIN, FLT_MIN * 1e-5);                  // exp(ln FLT_MIN)
    EXPECT_GT(y[10], 0.0f);                                      // subnormal, not flushed
    EXPECT_EQ(y[11], 0.0f);
    EXPECT_TRUE(std::isnan(y[12]));
  }
}

// exp_poly is the AVX2 exp one float at a time: the same bits over the whole float range (NaN in,
// NaN out, its payload unspecified), and so
// the same accuracy, which is checked here too for CPUs without AVX2.
TEST(CpuVecMath, ExpPolyIsTheVectorExpBitForBit) {
  const MathKernels* avx2 = cpu::vec::avx2_math();
  std::vector<float> x, y;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t u = 0; u <= 0x7fc00000u; u += 607) x.push_back(from_bits(sign | u));
  x.push_back(std::numeric_limits<float>::infinity());
  y.resize(x.size());
  if (avx2 != nullptr) avx2->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float got = cpu::vec::exp_poly(x[i]);
    if (std::isnan(x[i])) {  // a NaN, whose payload is not specified
      ASSERT_TRUE(std::isnan(got));
      if (avx2 != nullptr) {
        ASSERT_TRUE(std::isnan(y[i]));
      }
      continue;
    }
    if (avx2 != nullptr) {
      ASSERT_EQ(std::memcmp(&got, &y[i], 4), 0) << "x = " << x[i] << ": " << got << " vs " << y[i];
    }
    const double want = std::exp(static_cast<double>(x[i]));
    if (want > static_cast<double>(FLT_MAX))
      ASSERT_EQ(got, std::numeric_limits<float>::infinity()) << "x = " << x[i];
    else if (want >= static_cast<double>(FLT_MIN))
      ASSERT_LE(std::fabs(got - want) / want, cpu::vec::kExpMaxRelError) << "x = " << x[i];
    else
      ASSERT_LE(std::fabs(got - want), cpu::vec::kExpMaxSubnormalError) << "x = " << x[i];
  }
}

// SILU rows: every table gives vec::silu's bits (rows of every length for the vector tails),
// within a few units in the last place of x / (1 + e^-x) in double.
TEST(CpuVecMath, SiluRowsAreTheScalarDefinition) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = test::random_values(4099, 5, -120.0f, 120.0f);
  const auto small = test::random_values(1000, 6, -3.0f, 3.0f);
  x.insert(x.end(), small.begin(), small.end());
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, -88.0f, 100.0f, -100.0f, inf, -inf}) x.push_back(v);
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{9}, static_cast<int64_t>(x.size())}) {
      std::vector<float> y(static_cast<size_t>(n));
      k->silu(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float xi = x[static_cast<size_t>(i)], got = y[static_cast<size_t>(i)];
        const float want_bits = cpu::vec::silu(xi);
        ASSERT_EQ(std::memcmp(&got, &want_bits, 4), 0) << "x = " << xi;
        if (std::isinf(xi)) continue;  // -inf / inf is NaN here, as in ggml
        // Below x = -88.7 e^-x overflows f32 and the result is -0 (the true one is under 3e-37).
        const double want = xi / (1.0 + std::exp(-static_cast<double>(xi)));
        ASSERT_NEAR(got, want, 4e-7 * std::fabs(want) + 3e-37) << "x = " << xi;
      }
    }
  }
}

// SOFT_MAX's logits: x * scale + slope * mask with each product and the sum rounded once (the
// reference's operations, no FMA), worked out here in double (exact products, one rounding each);
// the max leaves NaNs out; rows of every length for the vector tails.
TEST(CpuVecMath, SoftMaxLogitsAreScaledMaskedAndTheirMaxLeavesNaNsOut) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (int64_t n : {1, 5, 8, 9, 31, 4099}) {
      auto x = test::random_values(n, static_cast<uint32_t>(n), -50.0f, 50.0f);
      auto mask = test::random_values(n, static_cast<uint32_t>(n) + 1, -3.0f, 3.0f);
      for (int64_t i = 0; i < n; i += 3) mask[static_cast<size_t>(i)] = -inf;  // masked cells
      if (n > 4) x[4] = nan;
      for (bool masked : {false, true}) {
        for (float slope : {1.0f, 0.3f}) {
          std::vector<float> y(static_cast<size_t>(n));
          const float scale = 0.125f * 1.1f;
          const float max =
              k->scale_mask_max(x.data(), y.data(), scale, masked ? mask.data() : nullptr, slope, n);
          float want_max = -inf;
          for (int64_t i = 0; i < n; ++i) {
            const auto ii = static_cast<size_t>(i);
            float want = static_cast<float>(static_cast<double>(x[ii]) * scale);
            if (masked)
              want = static_cast<float>(static_cast<double>(want) +
                                        static_cast<float>(static_cast<double>(slope) * mask[ii]));
            ASSERT_EQ(std::memcmp(&y[ii], &want, 4), 0) << "i = " << i << ": " << y[ii] << " vs " << want;
            if (!std::isnan(want) && want > want_max) want_max = want;
          }
          EXPECT_EQ(max, want_max) << n << " masked " << masked;
        }
      }
      std::vector<float> y = test::random_values(n, 7, -1e3f, 1e3f), scaled = y;
      k->scale(scaled.data(), 0.37f, n);
      for (int64_t i = 0; i < n; ++i) {
        const auto ii = static_cast<size_t>(i);
        ASSERT_EQ(scaled[ii], static_cast<float>(static_cast<double>(y[ii]) * 0.37f)) << i;
      }
    }
  }
  // A row whose every logit is masked has no max.
  for (const MathKernels* k : tables()) {
    const std::vector<float> x(9, 1.0f), mask(9, -inf);
    std::vector<float> y(9);
    EXPECT_EQ(k->scale_mask_max(x.data(), y.data(), 1.0f, mask.data(), 1.0f, 9), -inf) << k->isa;
  }
}

TEST(CpuVecMath, ExpSumShiftsAndSums) {
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (int64_t n : {1, 7, 8, 9, 100, 4099}) {
      const auto x = test::random_values(n, static_cast<uint32_t>(n), -30.0f, 5.0f);
      std::vector<float> y(static_cast<size_t>(n));
      const double sum = k->exp_sum(x.data(), y.data(), n, 5.0f);
      double want_sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        // The shift is subtracted in f32, as the softmax reference does.
        const float shifted = x[static_cast<size_t>(i)] - 5.0f;
        const double want = std::exp(static_cast<double>(shifted));
        want_sum += want;
        EXPECT_NEAR(y[static_cast<size_t>(i)], want, want * cpu::vec::kExpMaxRelError + 1e-30) << i;
      }
      EXPECT_NEAR(sum, want_sum, want_sum * 1e-6) << "n = " << n;
    }
    // -inf after the shift (a masked logit) is exactly 0.
    const float x[3] = {-std::numeric_limits<float>::infinity(), 0.0f, 0.0f};
    float y[3];
    EXPECT_DOUBLE_EQ(k->exp_sum(x, y, 3, 0.0f), 2.0);
    EXPECT_EQ(y[0], 0.0f);
  }
}

// One row of a against n rows of b: each result against a double sum, and the same bits whatever n
// is (the attention kernel groups its queries by how many share a K/V head).
TEST(CpuVecMath, DotRowsAndScaleAdd) {
  for (const MathKernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (int64_t len : {1, 8, 13, 16, 64, 77}) {
      const auto af = test::random_values(len, 100 + static_cast<uint32_t>(len));
      const int64_t stride = len + 3;
      const auto b = test::random_values(stride * cpu::vec::kMaxDotRows, 200 + static_cast<uint32_t>(len));
      std::vector<uint16_t> a16(static_cast<size_t>(len));
      std::vector<float> a32(static_cast<size_t>(len));
      for (size_t t = 0; t < a16.size(); ++t) {
        a16[t] = fp32_to_fp16(af[t]);
        a32[t] = fp16_to_fp32(a16[t]);
      }
      float all16[cpu::vec::kMaxDotRows], all32[cpu::vec::kMaxDotRows];
      k->dot_rows_f16(a16.data(), b.data(), stride, cpu::vec::kMaxDotRows, len, all16);
      k->dot_rows_f32(a32.data(), b.data(), stride, cpu::vec::kMaxDotRows, len, all32);
      for (int i = 0; i < cpu::vec::kMaxDotRows; ++i) {
        double want = 0.0;
        for (int64_t t = 0; t < len; ++t)
          want += static_cast<double>(a32[static_cast<size_t>(t)]) * b[static_cast<size_t>(i * stride + t)];
        EXPECT_NEAR(all16[i], want, 1e-5 * static_cast<double>(len)) << len << " row " << i;
        EXPECT_NEAR(all32[i], want, 1e-5 * static_cast<double>(len)) << len << " row " << i;
      }
      for (int n = 1; n < cpu::vec::kMaxDotRows; ++n) {
        float some[cpu::vec::kMaxDotRows];
        const int first = cpu::vec::kMaxDotRows - n;  // the last n rows, alone
        k->dot_rows_f16(a16.data(), b.data() + first * stride, stride, n, len, some);
        for (int i = 0; i < n; ++i) ASSERT_EQ(some[i], all16[first + i]) << "n = " << n << ", len = " << len;
      }
      std::vector<float> y(b.begin(), b.begin() + len);
      k->scale_add_f16(y.data(), 0.5f, -2.0f, a16.data(), len);
      for (size_t t = 0; t < y.size(); ++t)
        EXPECT_NEAR(y[t], 0.5 * b[t] - 2.0 * a32[t], 1e-6) << len << " " << t;
      y.assign(b.begin(), b.begin() + len);
      k->scale_add_f32(y.data(), 0.5f, -2.0f, a32.data(), len);
      for (size_t t = 0; t < y.size(); ++t)
        EXPECT_NEAR(y[t], 0.5 * b[t] - 2.0 * a32[t], 1e-6) << len << " " << t;
    }
  }
}

}  // namespace
}  // namespace tessera
