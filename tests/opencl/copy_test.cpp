// DUP, CONT, CPY on OpenCL0 and OpenCL1 against the CPU reference backend (byte-exact).
#include <gtest/gtest.h>

#include "opencl/ops_test_util.h"
#include "tessera/convert.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

bool valid_cpy(DType s, DType d) { return op_types_defined(Op::Cpy, OpTypes{d, {s, d}}); }
bool valid_cont(DType t) { return op_types_defined(Op::Cont, OpTypes{t, {t}}); }
// The quantized types OpenCL's kernels quantize into (the super-block types' searches stay on the CPU).
bool device_quantizes_into(DType d) {
  return d == DType::Q4_0 || d == DType::Q8_0 || d == DType::Q4_1 || d == DType::Q5_0 || d == DType::Q5_1 ||
         d == DType::IQ4_NL;
}

}  // namespace

TEST(OpenClCopy, CpyBetweenEveryTypePairMatchesTheCpu) {
  // Source: a permuted [256, 4, 3] leaf (rows of whole super-blocks); destination: a transposed
  // [192, 16] leaf for scalar types (strided, another shape), a contiguous [256, 12] leaf for
  // quantized types.
  std::vector<std::pair<DType, DType>> pairs;
  for (DType s : kAllDTypes)
    for (DType d : kAllDTypes)
      if (valid_cpy(s, d) && (!is_quantized(d) || d == s || device_quantizes_into(d)))
        pairs.emplace_back(s, d);
  auto build = [&](Context& ctx) {
    test::BuiltGraph g;
    for (auto [s, d] : pairs) {
      Tensor* a = ctx.new_tensor(s, 256, 4, 3);
      Tensor* b = is_quantized(d) ? ctx.new_tensor(d, 256, 12) : ctx.new_tensor(d, 192, 16);
      Tensor* dst = is_quantized(d) ? b : ops::transpose(ctx, b);
      g.inputs.push_back(a);
      g.outputs.push_back(ops::cpy(ctx, ops::permute(ctx, a, 0, 2, 1, 3), dst));
      g.results.push_back(b);
    }
    return g;
  };
  std::mt19937 rng(21);
  std::vector<std::vector<uint8_t>> images;
  for (auto [s, d] : pairs) images.push_back(test::random_image(s, {256, 4, 3, 1}, rng));
  for (int dev = 0; dev < 2; ++dev) {
    const auto r = test::run_on_cpu_and_device(test::opencl_device(dev), build, images);
    for (size_t i = 0; i < pairs.size(); ++i)
      EXPECT_EQ(r.device[i], r.cpu[i])
          << "OpenCL" << dev << " CPY " << name(pairs[i].first) << " -> " << name(pairs[i].second);
  }
}

TEST(OpenClCopy, SupportsExactlyTheCpysItsKernelsRun) {
  // From every type; into every scalar type, the same block type, or a type it quantizes into.
  for (int dev = 0; dev < 2; ++dev) {
    auto backend = test::opencl_device(dev).make_backend();
    Context ctx;
    for (DType s : kAllDTypes)
      for (DType d : kAllDTypes) {
        if (!valid_cpy(s, d)) continue;
        Tensor* node = ops::cpy(ctx, ctx.new_tensor(s, 256, 3), ctx.new_tensor(d, 256, 3));
        EXPECT_EQ(backend->supports(*node), !is_quantized(d) || d == s || device_quantizes_into(d))
            << "OpenCL" << dev << " CPY " << name(s) << " -> " << name(d);
      }
  }
}

TEST(OpenClCopy, DupAndContOfStridedSourcesMatchTheCpu) {
  auto build = [](Context& ctx) {
    test::BuiltGraph g;
    for (DType t : kAllDTypes) {
      if (!valid_cont(t)) continue;
      Tensor* a = ctx.new_tensor(t, 256, 5, 3, 2);
      g.inputs.push_back(a);
      // CONT of a permutation (rows stay whole, so quantized types qualify), DUP of a row subset.
      Tensor* c = ops::cont(ctx, ops::permute(ctx, a, 0, 3, 1, 2));
      Tensor* v = ops::view(ctx, a, {256, 2, 3, 2}, 2 * a->nb[1], a->nb[2], a->nb[3], a->nb[1]);
      Tensor* d = ops::dup(ctx, v);
      g.outputs.insert(g.outputs.end(), {c, d});
      g.results.insert(g.results.end(), {c, d});
    }
    return g;
  };
  std::mt19937 rng(22);
  std::vector<std::vector<uint8_t>> images;
  std::vector<DType> types;
  for (DType t : kAllDTypes)
    if (valid_cont(t)) types.push_back(t);
  for (DType t : types) images.push_back(test::random_image(t, {256, 5, 3, 2}, rng));
  for (int dev = 0; dev < 2; ++dev) {
    const auto r = test::run_on_cpu_and_device(test::opencl_device(dev), build, images);
    for (size_t i = 0; i < r.cpu.size(); ++i)
      EXPECT_EQ(r.device[i], r.cpu[i])
          << "OpenCL" << dev << (i % 2 ? " DUP " : " CONT ") << name(types[i / 2]);
  }
}

TEST(OpenClCopy, ConversionsFollowTheDocumentedRounding) {
  // Values computed here, independent of either backend: f32 -> f16 / bf16 round to nearest even,
  // f32 -> i32 truncates, Q8_0 dequantizes q * d.
  const float x[4] = {1.0f + 1.0f / 2048.0f, -2.5f, 65520.0f, 3.999f};  // a tie, exact, overflow, near 4
  auto build = [](Context& ctx) {
    test::BuiltGraph g;
    Tensor* a = ctx.new_tensor(DType::F32, 4);
    g.inputs.push_back(a);
    for (DType d : {DType::F16, DType::BF16, DType::I32}) {
      Tensor* b = ctx.new_tensor(d, 4);
      g.outputs.push_back(ops::cpy(ctx, a, b));
      g.results.push_back(b);
    }
    return g;
  };
  std::vector<uint8_t> img(sizeof x);
  std::memcpy(img.data(), x, sizeof x);
  const auto r = test::run_on_cpu_and_device(test::opencl_device(1), build, {img});
  uint16_t h[4], bf[4];
  int32_t i[4];
  std::memcpy(h, r.device[0].data(), 8);
  std::memcpy(bf, r.device[1].data(), 8);
  std::memcpy(i, r.device[2].data(), 16);
  EXPECT_EQ(h[0], 0x3C00);  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1.0
  EXPECT_EQ(h[1], 0xC100);  // -2.5
  EXPECT_EQ(h[2], 0x7C00);  // rounds past the largest half: +inf
  EXPECT_EQ(bf[1], 0xC020);
  EXPECT_EQ(bf[3], 0x4080);  // 3.999 = 0x407FEF9E -> rounds up to 4.0
  EXPECT_EQ(i[0], 1);
  EXPECT_EQ(i[1], -2);
  EXPECT_EQ(i[3], 3);
}
