// MUL_MAT on OpenCL where the conformance harness does not look: quantized and f16 weights read
// through a view that starts at a row offset (the device layout is addressed from the view's root)
// and stretched over batches, on the matrix-vector and on the GEMM path (set_gemm_min_columns
// forces one; the op library's path counters show which ran), against a double-precision product
// written here.
#include "opencl/ops/mul_mat.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "opencl/device_run.h"
#include "opencl/oplib.h"
#include "tessera/op_types.h"
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
    // Expected: the stored weights times b rounded as ggml rounds it (through Q8_0 for quantized
    // weights, to f16 for F16 ones).
    const std::vector<float> ws = stored(type, w, K);
    const std::vector<float> xs = is_quantized(type) ? stored(DType::Q8_0, x, K) : stored(DType::F16, x, K);
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

// One MUL_MAT shape: weights [K, M, A2, A3] times b [K, N, B2, B3] (b permuted from [K, B2, N, B3]
// when `permuted`), b in f32 or f16.
struct MulMatShape {
  int64_t k, m, n, a2, a3, b2, b3;
  bool permuted = false;
  DType b_type = DType::F32;
};

// MUL_MAT of quantized weights `type` on OpenCL<dev> against a double-precision product of the
// weights as the CPU reference dequantizes them and b rounded as ggml's CPU rounds it (through
// Q8_0, or Q8_K for the super-block types), on the path `path` forces.
void check_quantized_mul_mat(DType type, const MulMatShape& sh, Path path, int dev, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<uint8_t> w_image = test::random_image(type, {sh.k, sh.m, sh.a2, sh.a3}, rng);
  std::vector<float> w(static_cast<size_t>(sh.k * sh.m * sh.a2 * sh.a3));
  to_f32_row(type, w_image.data(), w.data(), static_cast<int64_t>(w.size()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(sh.k * sh.n * sh.b2 * sh.b3));  // b in logical [K, N, B2, B3]
  for (auto& v : x) v = dist(rng);
  if (sh.b_type == DType::F16) x = stored(DType::F16, x, sh.k);
  // b as ggml's CPU dot products see it: through Q8_K for the super-block types, else Q8_0.
  const std::vector<float> xs =
      stored(traits(type).block_size == kSuperBlock ? DType::Q8_K : DType::Q8_0, x, sh.k);
  // b's leaf image: [K, B2, N, B3] when permuted.
  std::vector<float> leaf_values(x.size());
  for (int64_t i3 = 0; i3 < sh.b3; ++i3)
    for (int64_t i2 = 0; i2 < sh.b2; ++i2)
      for (int64_t n = 0; n < sh.n; ++n) {
        const int64_t logical = ((i3 * sh.b2 + i2) * sh.n + n) * sh.k;
        const int64_t stored_at = sh.permuted ? ((i3 * sh.n + n) * sh.b2 + i2) * sh.k : logical;
        std::copy_n(x.begin() + logical, sh.k, leaf_values.begin() + stored_at);
      }
  std::vector<uint8_t> b_image(row_bytes(sh.b_type, static_cast<int64_t>(x.size())));
  from_f32_row(sh.b_type, leaf_values.data(), b_image.data(), static_cast<int64_t>(x.size()));

  const int64_t r2 = sh.b2 / sh.a2, r3 = sh.b3 / sh.a3;
  GemmSwitch sw(path == Path::Gemm ? "0" : "1000000");
  const opencl::MulMatPathCounts before = opencl::mul_mat_path_counts();
  Context ctx;
  Tensor* a = ctx.new_tensor(type, sh.k, sh.m, sh.a2, sh.a3);
  Tensor* b_leaf = sh.permuted ? ctx.new_tensor(sh.b_type, sh.k, sh.b2, sh.n, sh.b3)
                               : ctx.new_tensor(sh.b_type, sh.k, sh.n, sh.b2, sh.b3);
  Tensor* b = sh.permuted ? ops::permute(ctx, b_leaf, 0, 2, 1, 3) : b_leaf;
  Tensor* out = ops::mul_mat(ctx, a, b);
  Device& device = test::opencl_device(dev);
  auto buffer = test::allocate_all(device.buffer_type(), ctx);
  auto backend = device.make_backend();
  ASSERT_TRUE(backend->supports(*out)) << name(type);
  backend->set_async(*a, w_image.data(), 0, w_image.size());
  backend->set_async(*b_leaf, b_image.data(), 0, b_image.size());
  Graph graph{out};
  backend->compute(graph);
  backend->synchronize();
  std::vector<float> got(static_cast<size_t>(out->nelements()));
  tensor_get(*out, got.data(), 0, got.size() * sizeof(float));

  const opencl::MulMatPathCounts after = opencl::mul_mat_path_counts();
  EXPECT_EQ(after.gemm - before.gemm, path == Path::Gemm ? 1u : 0u);
  EXPECT_EQ(after.matrix_vector - before.matrix_vector, path == Path::Gemm ? 0u : 1u);
  const std::string what =
      fmt::format("{} k={} m={} n={} a=[{},{}] b=[{},{}]{} b {} on OpenCL{} ({})", name(type), sh.k, sh.m,
                  sh.n, sh.a2, sh.a3, sh.b2, sh.b3, sh.permuted ? " permuted" : "", name(sh.b_type), dev,
                  path == Path::Gemm ? "GEMM" : "matrix-vector");
  for (int64_t i3 = 0; i3 < sh.b3; ++i3)
    for (int64_t i2 = 0; i2 < sh.b2; ++i2)
      for (int64_t n = 0; n < sh.n; ++n)
        for (int64_t m = 0; m < sh.m; ++m) {
          const float* wr = w.data() + (((i3 / r3) * sh.a2 + i2 / r2) * sh.m + m) * sh.k;
          const float* xr = xs.data() + ((i3 * sh.b2 + i2) * sh.n + n) * sh.k;
          double sum = 0.0, mag = 0.0;
          for (int64_t k = 0; k < sh.k; ++k) {
            sum += static_cast<double>(wr[k]) * xr[k];
            mag += std::fabs(static_cast<double>(wr[k]) * xr[k]);
          }
          const size_t at = static_cast<size_t>(((i3 * sh.b2 + i2) * sh.n + n) * sh.m + m);
          ASSERT_NEAR(got[at], sum, 1e-5 * (1.0 + mag))
              << what << " at m=" << m << " n=" << n << " i2=" << i2 << " i3=" << i3;
        }
}

// The quantized weight types of the op table.
std::vector<DType> quantized_weight_types() {
  std::vector<DType> out;
  for (DType t : kAllDTypes)
    if (is_quantized(t) && op_source_types(Op::MulMat, 0).contains(t)) out.push_back(t);
  return out;
}

}  // namespace

TEST(OpenClMulMat, SupportsEveryWeightTypeOfTheOpTableAndGetRowsFromIt) {
  for (int dev = 0; dev < 2; ++dev) {
    auto backend = test::opencl_device(dev).make_backend();
    Context ctx;
    for (DType t : kAllDTypes) {
      if (!op_source_types(Op::MulMat, 0).contains(t)) continue;
      const int64_t k = traits(t).block_size * 2;
      Tensor* a = ctx.new_tensor(t, k, 3);
      for (DType tb : {DType::F32, DType::F16}) {
        EXPECT_TRUE(backend->supports(*ops::mul_mat(ctx, a, ctx.new_tensor(tb, k, 2))))
            << "OpenCL" << dev << " MUL_MAT of " << name(t) << " and " << name(tb);
      }
      if (op_source_types(Op::GetRows, 0).contains(t)) {
        EXPECT_TRUE(backend->supports(*ops::get_rows(ctx, a, ctx.new_tensor(DType::I32, 2))))
            << "OpenCL" << dev << " GET_ROWS from " << name(t);
      }
    }
  }
}

TEST(OpenClMulMat, EveryQuantizedTypeOnTheMatrixVectorPath) {
  // K from 256 to 4096, odd M and N, weights stretched over dims 2 and 3, b permuted or f16.
  const MulMatShape shapes[] = {
      {256, 7, 1, 1, 1, 1, 1},
      {4096, 3, 5, 1, 1, 1, 1},
      {768, 9, 13, 2, 1, 4, 3},
      {512, 5, 3, 1, 2, 3, 2, true},
      {1280, 11, 7, 1, 1, 2, 1, false, DType::F16},
  };
  uint32_t seed = 100;
  for (DType t : quantized_weight_types())
    for (const MulMatShape& sh : shapes) {
      ++seed;
      check_quantized_mul_mat(t, sh, Path::MatrixVector, static_cast<int>(seed % 2), seed);
    }
}

TEST(OpenClMulMat, EveryQuantizedTypeOnTheGemmPath) {
  if (!opencl::mul_mat_has_gemm()) GTEST_SKIP() << "built without CLBlast: MUL_MAT has no GEMM path";
  const MulMatShape shapes[] = {
      {256, 7, 9, 1, 1, 1, 1},
      {2304, 5, 17, 2, 1, 2, 3},
      {512, 3, 6, 1, 1, 2, 1, true, DType::F16},
  };
  uint32_t seed = 200;
  for (DType t : quantized_weight_types())
    for (const MulMatShape& sh : shapes) {
      ++seed;
      check_quantized_mul_mat(t, sh, Path::Gemm, static_cast<int>(seed % 2), seed);
    }
}

TEST(OpenClMulMat, WeightViewsAtARowOffsetOnTheMatrixVectorPath) {
  check_weight_views_at_a_row_offset(Path::MatrixVector);
}

TEST(OpenClMulMat, WeightViewsAtARowOffsetOnTheGemmPath) {
  if (!opencl::mul_mat_has_gemm()) GTEST_SKIP() << "built without CLBlast: MUL_MAT has no GEMM path";
  check_weight_views_at_a_row_offset(Path::Gemm);
}

TEST(OpenClMulMatId, EachTokenGetsItsExpertsProductsAndABadIdGivesNaN) {
  // 3 experts of 2 rows, 2 slots, ids 5 and -1 outside [0, 3); small integers, so every sum is exact
  // and the result must equal the hand product. All 7 tokens take the grouped path (mul_mat.cl:
  // expert 1 takes more tokens than a group of columns holds, expert 2 none); each token alone the
  // per-output one.
  constexpr int64_t kK = 64, kM = 2, kE = 3, kUsed = 2, kT = 7;
  const std::vector<int> ids{1, 0, 1, 5, 0, 1, 1, -1, 1, 0, 1, 1, 0, 1};  // [slot, token]
  std::vector<float> as(kK * kM * kE), b(kK * kT);
  for (size_t i = 0; i < as.size(); ++i) as[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4);
  auto check = [&](int dev, int64_t t0, int64_t tokens) {
    SCOPED_TRACE(fmt::format("OpenCL{} tokens {}..{}", dev, t0, t0 + tokens - 1));
    const std::vector<float> got = test::run_on_device(dev, [&](Context& ctx) {
      Tensor* a = ctx.new_tensor(DType::F32, kK, kM, kE);
      Tensor* y = ctx.new_tensor(DType::F32, kK, 1, tokens);
      Tensor* id = ctx.new_tensor(DType::I32, kUsed, tokens);
      return test::DeviceGraph{
          {{a, as},
           {y, std::vector<float>(b.begin() + t0 * kK, b.begin() + (t0 + tokens) * kK)},
           {id, std::vector<float>(ids.begin() + t0 * kUsed, ids.begin() + (t0 + tokens) * kUsed)}},
          ops::mul_mat_id(ctx, a, y, id)};
    });
    ASSERT_EQ(got.size(), static_cast<size_t>(kM * kUsed * tokens));
    for (int64_t t = t0; t < t0 + tokens; ++t)
      for (int64_t e = 0; e < kUsed; ++e) {
        const int x = ids[static_cast<size_t>(t * kUsed + e)];
        for (int64_t m = 0; m < kM; ++m) {
          const float v = got[static_cast<size_t>(((t - t0) * kUsed + e) * kM + m)];
          if (x < 0 || x >= kE) {
            EXPECT_TRUE(std::isnan(v)) << "token " << t << " slot " << e;
            continue;
          }
          double want = 0.0;
          for (int64_t k = 0; k < kK; ++k)
            want += static_cast<double>(as[static_cast<size_t>((x * kM + m) * kK + k)]) *
                    b[static_cast<size_t>(t * kK + k)];
          EXPECT_EQ(v, static_cast<float>(want)) << "token " << t << " slot " << e << " row " << m;
        }
      }
  };
  for (int dev = 0; dev < 2; ++dev) {
    check(dev, 0, kT);
    for (int64_t t = 0; t < kT; ++t) check(dev, t, 1);
  }
}
