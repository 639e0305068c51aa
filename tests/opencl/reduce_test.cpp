// SUM_ROWS and ARGSORT on OpenCL where the conformance harness cannot look: ARGSORT with ties,
// signed zeros and NaNs (the harness sorts unique values) in the local-memory sort and in the
// long-row sort in global memory, a strided source, and SUM_ROWS over a long row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "opencl/device_run.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> argsort_on(int dev, const std::vector<float>& x, int64_t ne0, SortOrder order) {
  return test::run_on_device(dev, [&](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, ne0, static_cast<int64_t>(x.size()) / ne0);
    return test::DeviceGraph{{{a, x}}, ops::argsort(ctx, a, order)};
  });
}

// Each row's indices by a stable sort: numbers by value, NaNs after them (index order on ties).
std::vector<float> stable_argsort(const std::vector<float>& x, int64_t ne0, bool descending) {
  std::vector<float> out;
  for (size_t r = 0; r < x.size() / static_cast<size_t>(ne0); ++r) {
    const float* row = x.data() + r * static_cast<size_t>(ne0);
    std::vector<int> idx(static_cast<size_t>(ne0));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int l, int m) {
      const float u = row[l], v = row[m];
      if (std::isnan(u) || std::isnan(v)) return !std::isnan(u) && std::isnan(v);
      return descending ? u > v : u < v;
    });
    out.insert(out.end(), idx.begin(), idx.end());
  }
  return out;
}

// ne0 values with many ties and a few NaNs.
std::vector<float> tied_row(int64_t ne0, int rows) {
  std::vector<float> x;
  for (int r = 0; r < rows; ++r)
    for (int64_t i = 0; i < ne0; ++i)
      x.push_back(i % 97 == 13 ? kNaN : static_cast<float>((i * 37 + r) % 101) - 50.0f);
  return x;
}

}  // namespace

TEST(OpenClArgsort, TiesKeepIndexOrderAndNansGoLast) {
  const std::vector<float> x{3.0f, 1.0f, 2.0f, 1.0f, 3.0f, kNaN, 0.0f, -0.0f, 2.0f, kNaN};
  const std::vector<float> asc{6, 7, 1, 3, 2, 8, 0, 4, 5, 9};
  const std::vector<float> desc{0, 4, 2, 8, 1, 3, 6, 7, 5, 9};
  for (int dev = 0; dev < 2; ++dev) {
    EXPECT_EQ(argsort_on(dev, x, 10, SortOrder::Ascending), asc) << "OpenCL" << dev;
    EXPECT_EQ(argsort_on(dev, x, 10, SortOrder::Descending), desc) << "OpenCL" << dev;
  }
}

TEST(OpenClArgsort, LongRowsWithTiesMatchAStableSort) {
  // 1000 pads to 1024 (sorted in local memory); 6000 pads to 8192 (sorted in global memory).
  for (int64_t ne0 : {1000, 6000}) {
    const std::vector<float> x = tied_row(ne0, 2);
    for (bool descending : {false, true}) {
      const auto got = argsort_on(1, x, ne0, descending ? SortOrder::Descending : SortOrder::Ascending);
      EXPECT_EQ(got, stable_argsort(x, ne0, descending)) << "ne0=" << ne0 << " descending=" << descending;
    }
  }
}

TEST(OpenClArgsort, StridedSource) {
  // A transposed [5, 9] leaf: rows of 9 values 5 floats apart.
  std::vector<float> leaf(45);
  for (size_t i = 0; i < leaf.size(); ++i) leaf[i] = static_cast<float>((i * 7) % 11);
  std::vector<float> rows;  // the transposed view's rows, for the expectation
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 9; ++c) rows.push_back(leaf[static_cast<size_t>(c * 5 + r)]);
  const auto got = test::run_on_device(0, [&](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, 5, 9);
    return test::DeviceGraph{{{a, leaf}}, ops::argsort(ctx, ops::transpose(ctx, a), SortOrder::Descending)};
  });
  EXPECT_EQ(got, stable_argsort(rows, 9, true));
}

TEST(OpenClSumRows, LongRowMatchesADoubleSum) {
  const int64_t ne0 = 300000;
  std::vector<float> x(static_cast<size_t>(2 * ne0));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.1f + static_cast<float>(i % 7) * 1e-3f - (i % 2 ? 0.0f : 0.15f);
  for (int dev = 0; dev < 2; ++dev) {
    const auto got = test::run_on_device(dev, [&](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, ne0, 2);
      return test::DeviceGraph{{{a, x}}, ops::sum_rows(ctx, a)};
    });
    ASSERT_EQ(got.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      double want = 0.0;
      for (int64_t i = 0; i < ne0; ++i) want += x[static_cast<size_t>(r * ne0 + i)];
      EXPECT_NEAR(got[static_cast<size_t>(r)], want, 1e-6 * std::fabs(want))
          << "OpenCL" << dev << " row " << r;
    }
  }
}

TEST(OpenClSumRows, EmptyRowsSumToZero) {
  const auto got = test::run_on_device(0, [](Context& ctx) {
    Tensor* a = ctx.new_tensor(DType::F32, 0, 3);
    return test::DeviceGraph{{{a, {}}}, ops::sum_rows(ctx, a)};
  });
  EXPECT_EQ(got, (std::vector<float>{0.0f, 0.0f, 0.0f}));
}
