// MUL_MAT on OpenCL where the conformance harness does not look: quantized and f16 weights read
// through a view that starts at a row offset (the device layout is addressed from the view's root)
// and stretched over batches, on the matrix-vector and on the GEMM path (set_gemm_min_columns
// forces one; the op library's path counters show which ran), against a double-precision product
// written here.
#include "opencl/ops/mul_mat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "opencl/device_run.h"
#include "opencl/oplib.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

// Sets the GEMM switch for one scope.
class GemmSwitch {
 public:
  explicit GemmSwitch(const char* value) { opencl::set_gemm_min_columns(std::atoll(value)); }
  ~GemmSwitch() { opencl::set_gemm_min_columns(std::nullopt); }
};

// Values as stored in `type` (quantized and read back), the way the device sees its input.
std::vector<float> stored(DType type, const std::vector<float>& x, int64_t row) {
  std::vector<uint8_t> bytes(row_bytes(type, row) * (x.size() / static_cast<size_t>(row)));
  from_f32_row(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  to_f32_row(type, bytes.data(), back.data(), static_cast<int64_t>(x.size()));
  return back;
}

enum class Path { MatrixVector, Gemm };

void check_weight_views_at_a_row_offset(Path path) {
  constexpr int64_t K = 96, rows = 20, M = 6, first = 5, N = 13, A2 = 2, B2 = 4;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(K * rows * A2), x(K * N * B2);
  for (auto& v : w) v = dist(rng);
  for (auto& v : x) v = dist(rng);

  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0}) {
    // Expected: the stored weights times b (rounded through Q8_0 for quantized weights, as ggml does).
    const std::vector<float> ws = stored(type, w, K);
    const std::vector<float> xs = is_quantized(type) ? stored(DType::Q8_0, x, K) : x;
    std::vector<double> expected(M * N * B2), magnitude(M * N * B2);
    for (int64_t i2 = 0; i2 < B2; ++i2)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
          double sum = 0.0, mag = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = static_cast<double>(ws[((i2 / (B2 / A2)) * rows + first + m) * K + k]) *
                             xs[(i2 * N + n) * K + k];
            sum += p;
            mag += std::fabs(p);
          }
          expected[(i2 * N + n) * M + m] = sum;
          magnitude[(i2 * N + n) * M + m] = mag;
        }
    {
      GemmSwitch sw(path == Path::Gemm ? "0" : "1000000");
      for (int dev = 0; dev < 2; ++dev) {
        const opencl::MulMatPathCounts before = opencl::mul_mat_path_counts();
        const std::vector<float> got = test::run_on_device(dev, [&](Context& ctx) {
          Tensor* leaf = ctx.new_tensor(type, K, rows, A2);
          Tensor* view = ops::view(ctx, leaf, {K, M, A2, 1}, leaf->nb[1], leaf->nb[2], leaf->nb[2] * A2,
                                   static_cast<size_t>(first) * leaf->nb[1]);
          Tensor* b = ctx.new_tensor(DType::F32, K, N, B2);
          return test::DeviceGraph{{{leaf, w}, {b, x}}, ops::mul_mat(ctx, view, b)};
        });
        // Exactly one MUL_MAT ran, on the path asked for.
        const opencl::MulMatPathCounts after = opencl::mul_mat_path_counts();
        EXPECT_EQ(after.gemm - before.gemm, path == Path::Gemm ? 1u : 0u);
        EXPECT_EQ(after.matrix_vector - before.matrix_vector, path == Path::Gemm ? 0u : 1u);
        ASSERT_EQ(got.size(), expected.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], expected[i], 1e-5 * (1.0 + magnitude[i]))
              << name(type) << " on OpenCL" << dev << (path == Path::Gemm ? " (GEMM)" : " (matrix-vector)")
              << " at " << i;
      }
    }
  }
}

}  // namespace

TEST(OpenClMulMat, WeightViewsAtARowOffsetOnTheMatrixVectorPath) {
  check_weight_views_at_a_row_offset(Path::MatrixVector);
}

TEST(OpenClMulMat, WeightViewsAtARowOffsetOnTheGemmPath) {
  if (!opencl::mul_mat_has_gemm()) GTEST_SKIP() << "built without CLBlast: MUL_MAT has no GEMM path";
  check_weight_views_at_a_row_offset(Path::Gemm);
}
