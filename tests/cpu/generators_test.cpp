// ARANGE and TIMESTEP_EMBEDDING on the CPU reference kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

using test::compute;
using test::expect_error;
using test::get;

// The OPS.md formula in double: row for timestep t.
std::vector<double> embedding(double t, int dim, int max_period) {
  std::vector<double> y(static_cast<size_t>(dim), 0.0);
  const int half = dim / 2;
  for (int j = 0; j < half; ++j) {
    const double f = std::exp(-std::log(static_cast<double>(max_period)) * j / half);
    y[static_cast<size_t>(j)] = std::cos(t * f);
    y[static_cast<size_t>(j + half)] = std::sin(t * f);
  }
  return y;
}

}  // namespace

TEST(CpuGenerators, ArangeFractionalStep) {
  Context ctx(true);
  Tensor* out = ops::arange(ctx, 0.0f, 5.0f, 1.5f);
  ASSERT_EQ(out->ne[0], 4);
  compute(out);
  const float expected[4] = {0, 1.5f, 3, 4.5f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(get(*out, i), expected[i]) << i;
}

TEST(CpuGenerators, ArangeNegativeStepAndExactEnd) {
  Context ctx(true);
  Tensor* down = ops::arange(ctx, 5.0f, 0.0f, -2.0f);   // ceil(2.5) = 3 elements
  Tensor* exact = ops::arange(ctx, 1.0f, 2.0f, 0.25f);  // stop excluded
  ASSERT_EQ(down->ne[0], 3);
  ASSERT_EQ(exact->ne[0], 4);
  compute(down);
  compute(exact);
  EXPECT_EQ(get(*down, 0), 5.0f);
  EXPECT_EQ(get(*down, 1), 3.0f);
  EXPECT_EQ(get(*down, 2), 1.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(get(*exact, i), 1.0f + 0.25f * static_cast<float>(i));
}

TEST(CpuGenerators, ArangeLongMatchesFormula) {
  Context ctx(true);
  Tensor* one = ops::arange(ctx, -3.0f, 1000.0f, 0.5f);
  Tensor* two = ops::arange(ctx, -3.0f, 1000.0f, 0.5f);
  ASSERT_EQ(one->ne[0], 2006);
  compute(one, 1);
  compute(two, 2);
  for (int64_t i = 0; i < one->ne[0]; ++i) EXPECT_EQ(get(*one, i), -3.0 + 0.5 * static_cast<double>(i)) << i;
  EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
}

TEST(CpuGenerators, TimestepEmbeddingEvenDim) {
  Context ctx(true);
  Tensor* t = ctx.new_tensor(DType::F32, 4);
  const float ts[4] = {0.0f, 1.0f, 2.5f, 100.0f};
  std::memcpy(t->data, ts, sizeof ts);
  Tensor* out = ops::timestep_embedding(ctx, t, 8, 10000);
  ASSERT_EQ(out->ne, (std::array<int64_t, 4>{8, 4, 1, 1}));
  compute(out);
  for (int64_t i = 0; i < 4; ++i) {
    const auto y = embedding(ts[i], 8, 10000);
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_NEAR(get(*out, j, i), y[static_cast<size_t>(j)], 2e-5) << j << "," << i;
  }
  // t = 0: cos 0 = 1, sin 0 = 0.
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(get(*out, j, 0), 1.0f);
    EXPECT_EQ(get(*out, j + 4, 0), 0.0f);
  }
}

TEST(CpuGenerators, TimestepEmbeddingOddDimZeroesLast) {
  Context ctx(true);
  Tensor* t = ctx.new_tensor(DType::F32, 3);
  const float ts[3] = {3.0f, 7.5f, 42.0f};
  std::memcpy(t->data, ts, sizeof ts);
  Tensor* out = ops::timestep_embedding(ctx, t, 7, 100);
  ASSERT_EQ(out->ne[0], 7);
  compute(out);
  for (int64_t i = 0; i < 3; ++i) {
    const auto y = embedding(ts[i], 7, 100);
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_NEAR(get(*out, j, i), y[static_cast<size_t>(j)], 2e-5) << j << "," << i;
    EXPECT_EQ(get(*out, 6, i), 0.0f);
  }
}

TEST(CpuGenerators, TimestepEmbeddingStridedTimesteps) {
  Context ctx(true);
  Tensor* base = ctx.new_tensor(DType::F32, 2, 5);
  std::vector<float> values(10);
  for (int i = 0; i < 10; ++i) values[static_cast<size_t>(i)] = 1.5f * static_cast<float>(i);
  std::memcpy(base->data, values.data(), 40);
  // Column 1 of base: timesteps 1.5, 4.5, 7.5, 10.5, 13.5 with an 8-byte stride.
  Tensor* col = ops::transpose(ctx, ops::view(ctx, base, {1, 5, 1, 1}, 8, 40, 40, 4));
  ASSERT_EQ(col->nb[0], 8u);
  Tensor* out = ops::timestep_embedding(ctx, col, 6, 10000);
  compute(out);
  for (int64_t i = 0; i < 5; ++i) {
    const auto y = embedding(values[static_cast<size_t>(2 * i + 1)], 6, 10000);
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_NEAR(get(*out, j, i), y[static_cast<size_t>(j)], 2e-5) << j << "," << i;
  }
}

TEST(CpuGenerators, TimestepEmbeddingThreadCountDoesNotChangeResult) {
  Context ctx(true);
  Tensor* t = ctx.new_tensor(DType::F32, 33);
  for (int i = 0; i < 33; ++i) static_cast<float*>(t->data)[i] = 31.0f * static_cast<float>(i);
  Tensor* one = ops::timestep_embedding(ctx, t, 65, 10000);
  Tensor* two = ops::timestep_embedding(ctx, t, 65, 10000);
  compute(one, 1);
  compute(two, 2);
  EXPECT_EQ(std::memcmp(one->data, two->data, one->nbytes()), 0);
}

TEST(CpuGenerators, BuildersRejectBadInput) {
  Context ctx(true);
  expect_error([&] { ops::arange(ctx, 0.0f, 5.0f, 0.0f); }, "ARANGE");
  expect_error([&] { ops::arange(ctx, 0.0f, 5.0f, -1.0f); }, "ARANGE");
  Tensor* t2 = ctx.new_tensor(DType::F32, 3, 2);
  Tensor* t = ctx.new_tensor(DType::F32, 3);
  Tensor* h = ctx.new_tensor(DType::F16, 3);
  expect_error([&] { ops::timestep_embedding(ctx, t2, 8, 10000); }, "TIMESTEP_EMBEDDING");
  expect_error([&] { ops::timestep_embedding(ctx, t, 0, 10000); }, "TIMESTEP_EMBEDDING");
  expect_error([&] { ops::timestep_embedding(ctx, h, 8, 10000); }, "TIMESTEP_EMBEDDING");
}
