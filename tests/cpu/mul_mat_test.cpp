// MUL_MAT on the CPU (reference and fast kernels) against hand-computed values and a double-precision
// re-computation written here, which decodes every weight format on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/iq_grids.h"
#include "cpu/ops/mul_mat_kernels.h"
#if defined(__x86_64__)
#include "cpu/ops/mul_mat_kquants_avx2.h"
#endif
#include "support/tensor_data.h"
#include "tessera/blocks.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

using namespace tessera;
using cpu::KernelSet;

namespace {

using test::fill;
using test::fill_random;

uint16_t u16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Element (k, i1, i2, i3) of t read through its strides and decoded per OPS.md.
double elem(const Tensor& t, int64_t k, int64_t i1, int64_t i2, int64_t i3) {
  const char* row = static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
  switch (t.type) {
    case DType::F32: {
      float f;
      std::memcpy(&f, row + k * t.nb[0], 4);
      return f;
    }
    case DType::F16:
      return fp16_to_fp32(u16(row + k * t.nb[0]));
    case DType::BF16: {
      const uint32_t bits = static_cast<uint32_t>(u16(row + k * t.nb[0])) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::Q8_0: {
      const char* blk = row + (k / 32) * 34;
      return static_cast<double>(fp16_to_fp32(u16(blk))) * static_cast<int8_t>(blk[2 + k % 32]);
    }
    case DType::Q4_0: {
      const char* blk = row + (k / 32) * 18;
      const int j = static_cast<int>(k % 32);
      const auto byte = static_cast<uint8_t>(blk[2 + j % 16]);
      const int q = j < 16 ? (byte & 0x0f) : (byte >> 4);
      return static_cast<double>(fp16_to_fp32(u16(blk))) * (q - 8);
    }
    default:
      ADD_FAILURE() << "unexpected type";
      return 0.0;
  }
}

// Weight row (i1, i2, i3) as doubles: decoded here for the types above; the other block types through
// the reference dequantizers (which tests/core checks against llama.cpp's own dequantized files).
std::vector<double> weight_row(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  std::vector<double> out(static_cast<size_t>(t.ne[0]));
  const bool own = t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16 ||
                   t.type == DType::Q8_0 || t.type == DType::Q4_0;
  if (own) {
    for (int64_t k = 0; k < t.ne[0]; ++k) out[static_cast<size_t>(k)] = elem(t, k, i1, i2, i3);
    return out;
  }
  std::vector<float> f(out.size());
  to_f32_row(t.type, static_cast<const char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3], f.data(),
             t.ne[0]);
  std::copy(f.begin(), f.end(), out.begin());
  return out;
}

// b's row as the fast quantized path sees it: Q8_0 blocks (d = amax/127 stored as fp16, q = round(x/d)).
std::vector<double> q8_roundtrip(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += 32) {
    float amax = 0.0f;
    for (size_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(static_cast<float>(x[i])));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const double d16 = fp16_to_fp32(fp32_to_fp16(d));
    for (size_t i = b0; i < b0 + 32; ++i) out[i] = std::round(static_cast<float>(x[i]) * id) * d16;
  }
  return out;
}

// b's row as the K-quant kernels see it: Q8_K super-blocks (the first element of largest magnitude
// maps to -127, quants round to nearest even, clamped at 127; the scale is a float).
std::vector<double> q8k_roundtrip(const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += 256) {
    float amax = 0.0f, max = 0.0f;
    for (size_t i = b0; i < b0 + 256; ++i)
      if (std::fabs(static_cast<float>(x[i])) > amax) {
        amax = std::fabs(static_cast<float>(x[i]));
        max = static_cast<float>(x[i]);
      }
    if (amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (size_t i = b0; i < b0 + 256; ++i)
      out[i] = std::min(127.0f, std::nearbyint(iscale * static_cast<float>(x[i]))) * (1.0f / iscale);
  }
  return out;
}

struct Expected {
  std::vector<double> value, abs_sum;  // per output element, [M, N, B2, B3] order
};

Expected expect(const Tensor& a, const Tensor& b, bool quantize_b) {
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1], B2 = b.ne[2], B3 = b.ne[3];
  const int64_t A2 = a.ne[2], r2 = B2 / A2, r3 = B3 / a.ne[3];
  // Every weight row decoded once: [K, M, A2, A3].
  std::vector<double> av(static_cast<size_t>(K * M * A2 * a.ne[3]));
  for (int64_t i3 = 0; i3 < a.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < A2; ++i2)
      for (int64_t m = 0; m < M; ++m) {
        const std::vector<double> row = weight_row(a, m, i2, i3);
        std::copy(row.begin(), row.end(), av.begin() + ((i3 * A2 + i2) * M + m) * K);
      }
  Expected e;
  std::vector<double> brow(static_cast<size_t>(K));
  for (int64_t i3 = 0; i3 < B3; ++i3)
    for (int64_t i2 = 0; i2 < B2; ++i2)
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) brow[k] = elem(b, k, n, i2, i3);
        // ggml's semantics for F16 and BF16 weights: b rounded to f16 or bf16 (to nearest, ties to
        // even) first.
        if (a.type == DType::F16)
          for (double& v : brow) v = fp16_to_fp32(fp32_to_fp16(static_cast<float>(v)));
        if (a.type == DType::BF16)
          for (double& v : brow) v = bf16_to_fp32(fp32_to_bf16(static_cast<float>(v)));
        // Q4_1/Q5_1: ggml takes the sum of b's block times the weights' minimum from Q8_1's fp16 sum
        // s = fp16(sum(q) * amax / 127), not from the sum of the rounded values.
        std::vector<double> fix(static_cast<size_t>(K / 32), 0.0);
        if (quantize_b && (a.type == DType::Q4_1 || a.type == DType::Q5_1))
          for (int64_t j = 0; j < K / 32; ++j) {
            float amax = 0.0f;
            for (int64_t i = 32 * j; i < 32 * j + 32; ++i)
              amax = std::max(amax, std::fabs(static_cast<float>(brow[i])));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            const double d16 = fp16_to_fp32(fp32_to_fp16(d));
            int sum = 0;
            for (int64_t i = 32 * j; i < 32 * j + 32; ++i)
              sum += static_cast<int>(std::round(static_cast<float>(brow[i]) * id));
            fix[static_cast<size_t>(j)] = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * d)) - d16 * sum;
          }
        if (quantize_b) brow = traits(a.type).block_size == 256 ? q8k_roundtrip(brow) : q8_roundtrip(brow);
        for (int64_t m = 0; m < M; ++m) {
          const double* arow = av.data() + (((i3 / r3) * A2 + i2 / r2) * M + m) * K;
          double s = 0.0, sa = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = arow[k] * brow[k];
            s += p;
            sa += std::fabs(p);
          }
          for (int64_t j = 0; j < K / 32; ++j) {
            if (fix[static_cast<size_t>(j)] == 0.0) continue;
            uint16_t h;  // the block's minimum m, after d
            std::memcpy(&h,
                        static_cast<const char*>(a.data) + m * a.nb[1] + (i2 / r2) * a.nb[2] +
                            (i3 / r3) * a.nb[3] + j * traits(a.type).block_bytes + 2,
                        2);
            s += fp16_to_fp32(h) * fix[static_cast<size_t>(j)];
          }
          e.value.push_back(s);
          e.abs_sum.push_back(sa);
        }
      }
  return e;
}

// Computes `out` and returns its values; the memory is poisoned with NaN first so that an element
// the kernel forgets shows up.
std::vector<float> computed_values(Tensor* out, int threads, KernelSet kernels) {
  std::memset(out->data, 0xff, out->nbytes());
  test::compute(out, threads, kernels);
  return test::values(*out);
}

double nmse(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0.0 ? num / den : num;
}

enum class ALayout { Contiguous, Permuted, Transposed };
enum class BLayout { F32, F16, Permuted, Transposed };

struct Case {
  DType type = DType::F32;
  int64_t k = 32, m = 13, n = 1;
  int64_t a2 = 1, a3 = 1, r2 = 1, r3 = 1;
  ALayout a_layout = ALayout::Contiguous;
  BLayout b_layout = BLayout::F32;
  std::string str() const {
    return std::string(name(type)) + " K=" + std::to_string(k) + " M=" + std::to_string(m) +
           " N=" + std::to_string(n) + " a2=" + std::to_string(a2) + " a3=" + std::to_string(a3) +
           " r2=" + std::to_string(r2) + " r3=" + std::to_string(r3) +
           " a_layout=" + std::to_string(static_cast<int>(a_layout)) +
           " b_layout=" + std::to_string(static_cast<int>(b_layout));
  }
};

struct Built {
  std::unique_ptr<Context> ctx = std::make_unique<Context>(true);
  Tensor* a = nullptr;
  Tensor* b = nullptr;
  Tensor* out = nullptr;
};

Built build(const Case& c, uint32_t seed) {
  Built g;
  Context& ctx = *g.ctx;
  const int64_t b2 = c.a2 * c.r2, b3 = c.a3 * c.r3;
  switch (c.a_layout) {
    case ALayout::Contiguous:
      g.a = ctx.new_tensor(c.type, c.k, c.m, c.a2, c.a3);
      fill_random(g.a, seed);
      break;
    case ALayout::Permuted: {  // rows contiguous, dims 1 and 2 swapped (like a K cache view)
      Tensor* base = ctx.new_tensor(c.type, c.k, c.a2, c.m, c.a3);
      fill_random(base, seed);
      g.a = ops::permute(ctx, base, 0, 2, 1, 3);
      break;
    }
    case ALayout::Transposed: {  // elements strided
      Tensor* base = ctx.new_tensor(c.type, c.m, c.k, c.a2, c.a3);
      fill_random(base, seed);
      g.a = ops::transpose(ctx, base);
      break;
    }
  }
  switch (c.b_layout) {
    case BLayout::F32:
    case BLayout::F16:
      g.b = ctx.new_tensor(c.b_layout == BLayout::F32 ? DType::F32 : DType::F16, c.k, c.n, b2, b3);
      fill_random(g.b, seed + 1);
      break;
    case BLayout::Permuted: {
      Tensor* base = ctx.new_tensor(DType::F32, c.k, b2, c.n, b3);
      fill_random(base, seed + 1);
      g.b = ops::permute(ctx, base, 0, 2, 1, 3);
      break;
    }
    case BLayout::Transposed: {
      Tensor* base = ctx.new_tensor(DType::F32, c.n, c.k, b2, b3);
      fill_random(base, seed + 1);
      g.b = ops::transpose(ctx, base);
      break;
    }
  }
  g.out = ops::mul_mat(ctx, g.a, g.b);
  EXPECT_EQ(g.out->type, DType::F32);
  EXPECT_EQ(g.out->ne, (std::array<int64_t, 4>{c.m, c.n, b2, b3}));
  return g;
}

// Reference kernels: the double computation rounded to f32.
void check_reference(const std::vector<float>& got, const Expected& e) {
  ASSERT_EQ(got.size(), e.value.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], e.value[i], 1e-7 * e.abs_sum[i] + 1e-7 * std::fabs(e.value[i]) + 1e-30) << "at " << i;
}

// Fast kernels: f32 accumulation of the same products.
void check_fast(const std::vector<float>& got, const Expected& e) {
  ASSERT_EQ(got.size(), e.value.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], e.value[i], 2e-5 * e.abs_sum[i] + 1e-30) << "at " << i;
}

// Runs the case with the reference kernels, the fast kernels the CPU picks, and the scalar fallback.
void check_case(const Case& c, uint32_t seed = 7) {
  SCOPED_TRACE(c.str());
  Built g = build(c, seed);
  const bool quant = is_quantized(c.type);
  const Expected exact = expect(*g.a, *g.b, false);
  // ggml's semantics for quantized weights: b goes through Q8_0 first (the reference does it too).
  const Expected with_q8_b = quant ? expect(*g.a, *g.b, true) : exact;
  check_reference(computed_values(g.out, 2, KernelSet::Reference), with_q8_b);

  std::vector<float> avx2;
  for (const cpu::mm::KernelTable* table : cpu::mm::available_kernels()) {
    SCOPED_TRACE(table->isa);
    cpu::mm::ScopedKernelOverride use(table);
    const std::vector<float> fast = computed_values(g.out, 2, KernelSet::Fast);
    check_fast(fast, with_q8_b);
    if (quant) {
      EXPECT_LT(nmse(fast, exact.value), 5e-4);
    }
    // The AVX-512 table redoes some AVX2 kernels in wider registers with the same operations per
    // output: the same bits.
    if (table == cpu::mm::avx2_kernels()) avx2 = fast;
  }
  if (const cpu::mm::KernelTable* wide = cpu::mm::avx512_kernels()) {
    cpu::mm::ScopedKernelOverride use(wide);
    EXPECT_EQ(0, std::memcmp(computed_values(g.out, 2, KernelSet::Fast).data(), avx2.data(),
                             avx2.size() * sizeof(float)))
        << "the AVX-512 kernels differ from the AVX2 ones";
  }
}

// Every type MUL_MAT takes as weights (core's op table).
std::vector<DType> weight_types() {
  std::vector<DType> out;
  for (DType t : kAllDTypes)
    if (op_source_types(Op::MulMat, 0).contains(t)) out.push_back(t);
  return out;
}
const std::vector<DType> kWeightTypes = weight_types();

// K rounded up to whole blocks of the type.
int64_t fit_k(DType type, int64_t k) {
  const int64_t bs = traits(type).block_size;
  return std::max(bs, (k + bs - 1) / bs * bs);
}

// ---------------------------------------------------------------- hand-computed

TEST(CpuMulMat, HandComputed2x3FloatWeights) {
  // a = [[1, 2, 3], [4, 5, 6]] (2 rows of K = 3), b columns (1, 0, -1) and (0.5, 1, 2).
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (DType btype : {DType::F32, DType::F16})
      for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast}) {
        SCOPED_TRACE(std::string(name(type)) + " x " + std::string(name(btype)));
        Context ctx(true);
        Tensor* a = ctx.new_tensor(type, 3, 2);
        Tensor* b = ctx.new_tensor(btype, 3, 2);
        fill(a, {1, 2, 3, 4, 5, 6});
        fill(b, {1, 0, -1, 0.5f, 1, 2});
        Tensor* out = ops::mul_mat(ctx, a, b);
        const std::vector<float> got = computed_values(out, 1, ks);
        // dst[m, n]: 1-3, 4-6, 0.5+2+6, 2+5+12
        EXPECT_EQ(got, (std::vector<float>{-2.0f, -2.0f, 8.5f, 19.0f}));
      }
}

TEST(CpuMulMat, HandComputed2x3Transposed) {
  // The same product with b given as a transposed view (elements strided) and a F32.
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 3, 2);
  Tensor* bt = ctx.new_tensor(DType::F32, 2, 3);  // bt[n, k]
  fill(a, {1, 2, 3, 4, 5, 6});
  fill(bt, {1, 0.5f, 0, 1, -1, 2});
  Tensor* out = ops::mul_mat(ctx, a, ops::transpose(ctx, bt));
  for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast})
    EXPECT_EQ(computed_values(out, 2, ks), (std::vector<float>{-2.0f, -2.0f, 8.5f, 19.0f}));
}

TEST(CpuMulMat, HandComputedQuantizedBlocks) {
  Context ctx(true);
  // Q8_0 row: d = 0.5, q_j = j - 16, so element j = (j - 16) / 2.
  Tensor* a8 = ctx.new_tensor(DType::Q8_0, 32, 1);
  auto* blk8 = static_cast<BlockQ8_0*>(a8->data);
  blk8->d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 32; ++j) blk8->qs[j] = static_cast<int8_t>(j - 16);
  // Q4_0 row: d = 0.25, element j = (j - 8) / 4 and element j + 16 = (7 - j) / 4 for j < 16.
  Tensor* a4 = ctx.new_tensor(DType::Q4_0, 32, 1);
  auto* blk4 = static_cast<BlockQ4_0*>(a4->data);
  blk4->d = fp32_to_fp16(0.25f);
  for (int j = 0; j < 16; ++j) blk4->qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // b columns: all ones; 2 at element 0; 1 at element 17.
  Tensor* b = ctx.new_tensor(DType::F32, 32, 3);
  std::vector<float> bv(96, 0.0f);
  for (int j = 0; j < 32; ++j) bv[j] = 1.0f;
  bv[32] = 2.0f;
  bv[64 + 17] = 1.0f;
  fill(b, bv);
  // Q8_0: sum (j-16)/2 = -8; 2 * (-16/2) = -16; (17-16)/2 = 0.5.
  // Q4_0: sum over j < 16 of (j-8 + 7-j)/4 = -4; 2 * (-8/4) = -4; element 17 = (7-1)/4 = 1.5.
  const std::vector<float> want8 = {-8.0f, -16.0f, 0.5f};
  const std::vector<float> want4 = {-4.0f, -4.0f, 1.5f};
  Tensor* out8 = ops::mul_mat(ctx, a8, b);
  Tensor* out4 = ops::mul_mat(ctx, a4, b);
  // Both kernel sets round b through Q8_0 as ggml does (here b's blocks hold 0, 1 and 2 only, scale
  // 1/127 or 2/127 in fp16), so they match to the fp16 scale's precision.
  for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast}) {
    const std::vector<float> got8 = computed_values(out8, 1, ks), got4 = computed_values(out4, 1, ks);
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(got8[i], want8[i], 2e-3 * std::fabs(want8[i]));
      EXPECT_NEAR(got4[i], want4[i], 2e-3 * std::fabs(want4[i]));
    }
  }
}

// ---------------------------------------------------------------- against the double computation

TEST(CpuMulMat, EveryWeightTypeEveryNAndK) {
  for (DType type : kWeightTypes)
    for (int64_t k : {32, 64, 4096})
      for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33}) {
        Case c;
        c.type = type;
        c.k = fit_k(type, k);
        c.n = n;
        c.m = 13;
        check_case(c, static_cast<uint32_t>(k * 100 + n));
      }
}

// Generation: one b column and every count of rows a matrix-vector pass can be left with (the
// kernels take up to 8 rows at a time, two per register in places).
TEST(CpuMulMat, MatrixVectorEveryRowCount) {
  for (DType type : kWeightTypes)
    for (int64_t m = 1; m <= 17; ++m) {
      Case c;
      c.type = type;
      c.k = fit_k(type, 512);
      c.n = 1;
      c.m = m;
      check_case(c, static_cast<uint32_t>(m));
    }
}

TEST(CpuMulMat, FloatWeightsOddK) {
  // K that is not a multiple of 8 (vector tails) for the float weight types.
  for (DType type : {DType::F32, DType::F16, DType::BF16})
    for (int64_t k : {1, 3, 7, 9, 31, 33, 100, 1029})
      for (int64_t n : {1, 2, 5}) {
        Case c;
        c.type = type;
        c.k = k;
        c.n = n;
        c.m = 6;
        check_case(c, static_cast<uint32_t>(k + n));
      }
}

TEST(CpuMulMat, LargeBlocksCrossCacheChunks) {
  // More weight rows and b columns than one cache block, and K split into several ranges.
  for (DType type : kWeightTypes) {
    Case c;
    c.type = type;
    c.k = 4096;
    c.m = traits(type).block_size == 256 ? 140 : 300;  // the K-quants' weight panels hold fewer rows
    c.n = 70;
    check_case(c, 11);
    // K past every type's K block (ranges of 256 plus a last range with a partial group of blocks).
    c.k = fit_k(type, 4640);
    c.m = 37;
    c.n = 19;
    check_case(c, 12);
  }
}

TEST(CpuMulMat, BroadcastOverDims2And3) {
  for (DType type : kWeightTypes)
    for (int64_t r : {1, 2, 3}) {
      Case c;
      c.type = type;
      c.k = fit_k(type, 64);
      c.m = 5;
      c.n = 3;
      c.a2 = 2;
      c.a3 = 1;
      c.r2 = r;
      check_case(c, static_cast<uint32_t>(r));
      c.a2 = 1;
      c.a3 = 2;
      c.r2 = 1;
      c.r3 = r;
      check_case(c, static_cast<uint32_t>(10 + r));
      c.a2 = 2;
      c.a3 = 2;
      c.r2 = r;
      c.r3 = 4 - r;
      c.n = 1;
      check_case(c, static_cast<uint32_t>(20 + r));
    }
}

TEST(CpuMulMat, PermutedAndF16B) {
  for (DType type : kWeightTypes)
    for (BLayout bl : {BLayout::Permuted, BLayout::F16})
      for (int64_t n : {1, 4, 9}) {
        Case c;
        c.type = type;
        c.k = fit_k(type, 96);
        c.m = 7;
        c.n = n;
        c.a2 = 3;
        c.r2 = 2;
        c.b_layout = bl;
        check_case(c, static_cast<uint32_t>(n));
      }
}

TEST(CpuMulMat, TransposedBWithF32Weights) {
  for (int64_t n : {1, 2, 5, 33}) {
    Case c;
    c.type = DType::F32;
    c.k = 67;
    c.m = 9;
    c.n = n;
    c.a2 = 2;
    c.r2 = 2;
    c.b_layout = BLayout::Transposed;
    check_case(c, static_cast<uint32_t>(n));
  }
}

TEST(CpuMulMat, NonContiguousWeights) {
  // Weights as a permuted view (rows contiguous) and, for float types, as a transposed view
  // (elements strided).
  for (DType type : kWeightTypes)
    for (int64_t n : {1, 3, 8}) {
      Case c;
      c.type = type;
      c.k = 80;
      c.m = 11;
      c.n = n;
      c.a2 = 2;
      c.r2 = 2;
      c.a_layout = ALayout::Permuted;
      c.b_layout = BLayout::Permuted;
      c.k = is_quantized(type) ? fit_k(type, 96) : 80;
      check_case(c, static_cast<uint32_t>(n));
      if (is_quantized(type)) continue;
      c.a_layout = ALayout::Transposed;
      c.b_layout = type == DType::F32 ? BLayout::Transposed : BLayout::F32;
      check_case(c, static_cast<uint32_t>(n + 1));
    }
}

// ---------------------------------------------------------------- determinism

TEST(CpuMulMat, ThreadCountDoesNotChangeBits) {
  for (DType type : kWeightTypes)
    for (int64_t n : {1, 7, 70}) {
      Case c;
      c.type = type;
      c.k = 4096;
      c.m = 150;
      c.n = n;
      c.r2 = 2;
      SCOPED_TRACE(c.str());
      Built g = build(c, 5);
      for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast}) {
        const std::vector<float> one = computed_values(g.out, 1, ks);
        for (int threads : {2, 3}) {
          const std::vector<float> more = computed_values(g.out, threads, ks);
          ASSERT_EQ(0, std::memcmp(one.data(), more.data(), one.size() * sizeof(float)))
              << threads << " threads, kernels " << (ks == KernelSet::Fast ? "fast" : "reference");
        }
      }
    }
}

// ---------------------------------------------------------------- kernels and errors

TEST(CpuMulMat, SimdQuantizationMatchesScalarAndQ8_0) {
  const cpu::mm::KernelTable& scalar = cpu::mm::scalar_kernels();
  const cpu::mm::KernelTable* simd = cpu::mm::avx2_kernels();
  // Random blocks, a zero block, and one with exact halves (amax 127 gives d = 1): ties round away.
  std::vector<float> x = test::random_values(32 * 8, 3);
  for (int i = 0; i < 32; ++i) x[32 * 5 + i] = 0.0f;
  const float ties[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 126.5f, -0.49999997f};
  for (int i = 0; i < 32; ++i) x[32 * 6 + i] = ties[i % 9];
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<char> want(cpu::mm::q8_row_bytes(k)), got(want.size());
  scalar.quantize_q8_row(x.data(), want.data(), k);
  // Against the library's Q8_0 quantizer: same quants, same (fp16) scales.
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(k / 32));
  quantize_row_q8_0(x.data(), blocks.data(), k);
  for (int64_t j = 0; j < k / 32; ++j) {
    EXPECT_EQ(0, std::memcmp(blocks[j].qs, want.data() + 32 * j, 32)) << "block " << j;
    float d;
    std::memcpy(&d, want.data() + k + 4 * j, 4);
    EXPECT_EQ(d, fp16_to_fp32(blocks[j].d)) << "block " << j;
    // c = 8 * sum(q) * d: the block's share of Q4_0's offset of 8.
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += blocks[j].qs[i];
    float c;
    std::memcpy(&c, want.data() + k + 4 * (k / 32) + 4 * j, 4);
    EXPECT_EQ(c, static_cast<float>(8 * sum) * d) << "block " << j;
    // and sum(q) itself, which the interleaved Q4_0 kernels take back from their integer sums
    int32_t whole;
    std::memcpy(&whole, want.data() + k + 12 * (k / 32) + 4 * j, 4);
    EXPECT_EQ(whole, sum) << "block " << j;
  }
  EXPECT_EQ(static_cast<int8_t>(want[32 * 6 + 1]), 3);   // 2.5 -> 3
  EXPECT_EQ(static_cast<int8_t>(want[32 * 6 + 2]), -3);  // -2.5 -> -3
  EXPECT_EQ(static_cast<int8_t>(want[32 * 6 + 8]), 0);   // just under a half
  if (simd != nullptr) {  // CPUs without AVX2 have only the scalar quantizer checked above
    simd->quantize_q8_row(x.data(), got.data(), k);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), static_cast<size_t>(k + 16 * (k / 32))));
  }
}

TEST(CpuMulMat, MatVecKernelsMatchTheTilesBitForBit) {
  // The matrix-vector kernels (n == 1) promise each row the bits of the RN = 1 tile: every kind
  // that has one, 1..kMatVecRows rows, K with whole and partial groups of eight blocks (and float
  // tails), rows apart by more than their length.
  const cpu::mm::KernelTable* simd = cpu::mm::avx2_kernels();
  if (simd == nullptr) return;  // no AVX2: the scalar table has no matrix-vector kernels
  const std::pair<cpu::mm::WeightKind, DType> kinds[] = {
      {cpu::mm::WeightKind::F32, DType::F32},       {cpu::mm::WeightKind::F16, DType::F16},
      {cpu::mm::WeightKind::BF16, DType::BF16},     {cpu::mm::WeightKind::Q4_0, DType::Q4_0},
      {cpu::mm::WeightKind::Q8_0, DType::Q8_0},     {cpu::mm::WeightKind::Q4_1, DType::Q4_1},
      {cpu::mm::WeightKind::Q5_0, DType::Q5_0},     {cpu::mm::WeightKind::Q5_1, DType::Q5_1},
      {cpu::mm::WeightKind::IQ4_NL, DType::IQ4_NL}, {cpu::mm::WeightKind::MXFP4, DType::MXFP4}};
  constexpr int kRows = cpu::mm::kMatVecRows;
  for (const auto& [kind, type] : kinds) {
    const bool quant = is_quantized(type);
    const int kind_index = static_cast<int>(kind);
    ASSERT_NE(simd->matvec[kind_index][kRows - 1], nullptr) << name(type);
    for (int64_t k : {32, 96, 288, 1024, 2816, 67}) {
      if (quant && k % 32 != 0) continue;
      SCOPED_TRACE(std::string(name(type)) + " k " + std::to_string(k));
      const size_t row_bytes = traits(type).block_bytes * static_cast<size_t>(k / traits(type).block_size);
      const size_t stride = row_bytes + 64;
      std::vector<char> a(stride * kRows);
      for (int r = 0; r < kRows; ++r) {
        const std::vector<float> w = test::random_values(k, static_cast<uint32_t>(100 + r));
        from_f32_row(type, w.data(), a.data() + r * stride, k);
      }
      const std::vector<float> x = test::random_values(k, 7);
      std::vector<char> b_mem(cpu::mm::q8_row_bytes(k) + 4 * static_cast<size_t>(k) + 64);
      char* b = b_mem.data() + (64 - reinterpret_cast<uintptr_t>(b_mem.data()) % 64) % 64;
      if (quant)
        simd->quantize_q8_row(x.data(), b, k);
      else if (type == DType::BF16)
        fp32_to_bf16_row(x.data(), reinterpret_cast<uint16_t*>(b), k);
      else
        std::memcpy(b, x.data(), x.size() * sizeof(float));
      auto args = [&](int row, float* dst) {
        cpu::mm::TileArgs t;
        t.a = a.data() + row * stride;
        t.a_stride = stride;
        t.b = b;
        t.k = k;
        t.k1 = k;
        t.dst = dst;
        return t;
      };
      std::vector<float> want(kRows);
      for (int r = 0; r < kRows; ++r) simd->tile[kind_index][0][0](args(r, &want[static_cast<size_t>(r)]));
      for (int rows = 1; rows <= kRows; ++rows) {
        std::vector<float> got(kRows, -1.0f);
        simd->matvec[kind_index][rows - 1](args(0, got.data()));
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), static_cast<size_t>(rows) * sizeof(float)))
            << rows << " rows";
        if (rows < kRows) {
          EXPECT_EQ(got[static_cast<size_t>(rows)], -1.0f) << rows << " rows: wrote past them";
        }
      }
    }
  }
}

TEST(CpuMulMat, EveryTableIsCompleteForWhatItHas) {
  // The driver calls any tile shape of any kind, and takes a kind's matrix-vector, interleaved and
  // interleaved-pair kernels for every width once the first is set: each is all there or absent.
  using cpu::mm::KernelTable;
  const auto count = [](const cpu::mm::TileFn* fns, int n) {
    return static_cast<int>(std::count_if(fns, fns + n, [](cpu::mm::TileFn f) { return f != nullptr; }));
  };
  for (const KernelTable* t : cpu::mm::available_kernels()) {
    SCOPED_TRACE(t->isa);
    for (int kind = 0; kind < cpu::mm::kWeightKinds; ++kind) {
      SCOPED_TRACE("kind " + std::to_string(kind));
      for (int m = 0; m < cpu::mm::kMaxRM; ++m)
        EXPECT_EQ(count(t->tile[kind][m], cpu::mm::kMaxRN), cpu::mm::kMaxRN);
      const int matvec = count(t->matvec[kind], cpu::mm::kMatVecRows);
      EXPECT_TRUE(matvec == 0 || matvec == cpu::mm::kMatVecRows) << matvec << " matrix-vector kernels";
      const int interleaved = count(t->interleaved[kind], cpu::mm::kMaxRN);
      EXPECT_TRUE(interleaved == 0 || interleaved == cpu::mm::kMaxRN)
          << interleaved << " interleaved kernels";
      const int pairs = count(t->interleaved_pair[kind], cpu::mm::kWideRN);
      EXPECT_TRUE(pairs == 0 || pairs == cpu::mm::kWideRN) << pairs << " interleaved-pair kernels";
    }
    EXPECT_NE(t->quantize_q8_row, nullptr);
    EXPECT_NE(t->quantize_q8k_row, nullptr);
    EXPECT_NE(t->f16_to_f32_row, nullptr);
  }
}

// BF16 weights' dot product as mul_mat_bf16.cpp defines it, worked out here one operation at a
// time: b rounded to bf16; 8 lanes, each 16-element chunk adding to lane l the product of elements
// 2l + 1, then 2l (one rounding each: the products are exact); the lanes summed as
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); the elements after the last whole chunk added
// one fused multiply-add at a time. even_first swaps the pair's order (to show the data tell them apart).
float bf16_dot(const uint16_t* a, const uint16_t* b, int64_t k, bool even_first = false) {
  const auto f = [](uint16_t h) { return bf16_to_fp32(h); };
  float lanes[8] = {};
  const int64_t whole = k / 16 * 16;
  for (int64_t i = 0; i < whole; i += 16)
    for (int l = 0; l < 8; ++l) {
      const int64_t first = i + 2 * l + (even_first ? 0 : 1), second = i + 2 * l + (even_first ? 1 : 0);
      lanes[l] = std::fma(f(a[first]), f(b[first]), lanes[l]);
      lanes[l] = std::fma(f(a[second]), f(b[second]), lanes[l]);
    }
  float s = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
  for (int64_t i = whole; i < k; ++i) s = std::fma(f(a[i]), f(b[i]), s);
  return s;
}

TEST(CpuMulMat, Bf16DotProductsHaveOneOrderOnEveryTable) {
  // Values over 2^-12..2^12, so that the order of additions shows in the bits; K with and without
  // tails, K split into ranges (4104), one column (the matrix-vector kernels) and many.
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  const auto spread = [&](Tensor* t) {
    std::vector<float> v(static_cast<size_t>(t->nelements()));
    for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
    test::fill(t, v);
  };
  int order_shows = 0;
  for (int64_t k : {5, 16, 24, 40, 1000, 4104})
    for (int64_t n : {1, 3, 70}) {
      SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n));
      const int64_t m = 13;
      Context ctx(true);
      Tensor* a = ctx.new_tensor(DType::BF16, k, m);
      Tensor* b = ctx.new_tensor(DType::F32, k, n);
      spread(a);
      spread(b);
      std::vector<float> want(static_cast<size_t>(m * n));
      std::vector<uint16_t> bq(static_cast<size_t>(k));
      for (int64_t c = 0; c < n; ++c) {
        const auto* bf = reinterpret_cast<const float*>(b->at(0, c));
        for (int64_t i = 0; i < k; ++i) bq[static_cast<size_t>(i)] = fp32_to_bf16(bf[i]);
        for (int64_t r = 0; r < m; ++r) {
          const auto* ar = reinterpret_cast<const uint16_t*>(a->at(0, r));
          want[static_cast<size_t>(c * m + r)] = bf16_dot(ar, bq.data(), k);
          order_shows += bf16_dot(ar, bq.data(), k, true) != want[static_cast<size_t>(c * m + r)];
        }
      }
      Tensor* out = ops::mul_mat(ctx, a, b);
      for (const cpu::mm::KernelTable* table : cpu::mm::available_kernels()) {
        SCOPED_TRACE(table->isa);
        cpu::mm::ScopedKernelOverride use(table);
        const std::vector<float> got = computed_values(out, 2, KernelSet::Fast);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
      }
    }
  EXPECT_GT(order_shows, 100) << "the data do not tell the orders apart";
}

TEST(CpuMulMat, Q8_1SumsForTheMinimumTypes) {
  // s = fp16(sum(q) * amax / 127): ggml's Q8_1 sum, which Q4_1/Q5_1's minimum multiplies.
  std::vector<float> x = test::random_values(32 * 4, 9);
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<char> row(cpu::mm::q8_row_bytes(k));
  const std::vector<const cpu::mm::KernelTable*> tables = cpu::mm::available_kernels();
  for (const cpu::mm::KernelTable* table : tables) {
    SCOPED_TRACE(table->isa);
    table->quantize_q8_row(x.data(), row.data(), k);
    for (int64_t j = 0; j < k / 32; ++j) {
      float amax = 0.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(x[32 * j + i]));
        sum += static_cast<int8_t>(row[32 * j + i]);
      }
      float s;
      std::memcpy(&s, row.data() + k + 8 * (k / 32) + 4 * j, 4);
      EXPECT_EQ(s, fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * (amax / 127.0f)))) << "block " << j;
    }
  }
}

TEST(CpuMulMat, SimdQ8KQuantizationMatchesTheReference) {
  // Random super-blocks, a zero one, one whose largest magnitude is negative and repeated (the first
  // one sets the sign), and exact halves (ties round to even).
  std::vector<float> x = test::random_values(256 * 6, 4, -3.0f, 3.0f);
  for (int i = 0; i < 256; ++i) x[256 + i] = 0.0f;
  x[512 + 7] = -5.0f;
  x[512 + 9] = 5.0f;
  x[512 + 20] = -5.0f;
  for (int i = 0; i < 256; ++i) x[768 + i] = static_cast<float>(i % 9) - 4.5f;  // iscale 127/4.5
  for (int i = 0; i < 256; ++i) x[1024 + i] = (i % 2 ? 0.5f : -1.5f) * (i == 3 ? 127.0f / 1.5f : 1.0f);
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<BlockQ8_K> want(static_cast<size_t>(k / 256));
  ref::quantize_row_q8_k(x.data(), want.data(), k);
  const std::vector<const cpu::mm::KernelTable*> tables = cpu::mm::available_kernels();
  for (const cpu::mm::KernelTable* table : tables) {
    SCOPED_TRACE(table->isa);
    std::vector<char> row(cpu::mm::q8k_row_bytes(k));
    table->quantize_q8k_row(x.data(), row.data(), k);
    const cpu::mm::Q8KRow r = cpu::mm::q8k_row(row.data(), k);
    for (int64_t j = 0; j < k / 256; ++j) {
      EXPECT_EQ(0, std::memcmp(r.qs + 256 * j, want[j].qs, 256)) << "super-block " << j;
      EXPECT_EQ(r.d[j], want[j].d) << "super-block " << j;
      EXPECT_EQ(0, std::memcmp(r.bsums + 16 * j, want[j].bsums, 32)) << "super-block " << j;
    }
  }
  EXPECT_EQ(want[2].qs[7], -127);  // max = -5 (the first), iscale = -127 / max = 25.4
  EXPECT_EQ(want[2].qs[9], 127);
  EXPECT_EQ(want[1].d, 0.0f);
}

TEST(CpuMulMat, Q8KPairOrderOfTheSimdTiles) {
  // The AVX2 K-quant tiles read b's quants regrouped per 64 bytes (chunks c0, c1): 32-bit lane l of
  // the first 32 bytes holds c0's elements 4l, 4l + 1 and c1's 4l + 2, 4l + 3, of the second c0's
  // 4l + 2, 4l + 3 and c1's 4l, 4l + 1. Scales and group sums stay where they were.
  EXPECT_EQ(cpu::mm::scalar_kernels().pair_q8k_row, nullptr);  // the scalar tiles read rows in order
  const cpu::mm::KernelTable* simd = cpu::mm::avx2_kernels();
  if (simd == nullptr) return;  // CPUs without AVX2 have only the in-order layout checked above
  ASSERT_NE(simd->pair_q8k_row, nullptr);
  const int64_t k = 512;
  std::vector<char> row(cpu::mm::q8k_row_bytes(k));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<char>(i * 7 + 3);
  const std::vector<char> in_order = row;
  simd->pair_q8k_row(row.data(), k);
  for (int64_t p = 0; p < k / 64; ++p) {
    const char* c0 = in_order.data() + 64 * p;
    const char* c1 = c0 + 32;
    const char* first = row.data() + 64 * p;
    const char* second = first + 32;
    for (int l = 0; l < 8; ++l) {
      const char want_first[4] = {c0[4 * l], c0[4 * l + 1], c1[4 * l + 2], c1[4 * l + 3]};
      const char want_second[4] = {c0[4 * l + 2], c0[4 * l + 3], c1[4 * l], c1[4 * l + 1]};
      EXPECT_EQ(0, std::memcmp(first + 4 * l, want_first, 4)) << "pair " << p << " lane " << l;
      EXPECT_EQ(0, std::memcmp(second + 4 * l, want_second, 4)) << "pair " << p << " lane " << l;
    }
  }
  EXPECT_EQ(0, std::memcmp(row.data() + k, in_order.data() + k, row.size() - static_cast<size_t>(k)));
  // The AVX-512 tiles load two chunk pairs' `first` pieces at once: per 128 bytes, the AVX2 order's
  // pieces [first 0, second 0, first 1, second 1] become [first 0, first 1, second 0, second 1].
  const cpu::mm::KernelTable* wide = cpu::mm::avx512_kernels();
  if (wide == nullptr) return;
  std::vector<char> wide_row = in_order;
  wide->pair_q8k_row(wide_row.data(), k);
  for (int64_t i = 0; i < k; i += 128) {
    const char* avx2 = row.data() + i;
    const char* got = wide_row.data() + i;
    EXPECT_EQ(0, std::memcmp(got, avx2, 32)) << "at " << i;
    EXPECT_EQ(0, std::memcmp(got + 32, avx2 + 64, 32)) << "at " << i;
    EXPECT_EQ(0, std::memcmp(got + 64, avx2 + 32, 32)) << "at " << i;
    EXPECT_EQ(0, std::memcmp(got + 96, avx2 + 96, 32)) << "at " << i;
  }
  EXPECT_EQ(0, std::memcmp(wide_row.data() + k, in_order.data() + k, row.size() - static_cast<size_t>(k)));
}

TEST(CpuMulMat, HandComputedQ4_KBlock) {
  // One Q4_K super-block: d = 0.5, dmin = 0.25, group g has scale g + 1 and minimum 2g (packed as
  // k_scale_min unpacks them), every quant 3. Element i of group g is 0.5 (g + 1) 3 - 0.25 (2g).
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::Q4_K, 256, 1);
  auto* blk = static_cast<BlockQ4_K*>(a->data);
  blk->d = fp32_to_fp16(0.5f);
  blk->dmin = fp32_to_fp16(0.25f);
  std::memset(blk->scales, 0, 12);
  for (int g = 0; g < 4; ++g) {
    blk->scales[g] = static_cast<uint8_t>(g + 1);
    blk->scales[g + 4] = static_cast<uint8_t>(2 * g);
  }
  for (int g = 4; g < 8; ++g)  // scales 5..8 and minimums 8..14 fit in the low/high nibbles
    blk->scales[g + 4] = static_cast<uint8_t>((g + 1) | ((2 * g) << 4));
  std::memset(blk->qs, 0x33, 128);
  // b: 1 on group 0's elements, 2 on group 7's, 0 elsewhere; Q8_K keeps it exact (max 2 -> -127,
  // scale -2/127: 1 -> -63.5 rounds to -64, so use 2 and -2 only).
  Tensor* b = ctx.new_tensor(DType::F32, 256, 1);
  std::vector<float> bv(256, 0.0f);
  for (int i = 0; i < 32; ++i) {
    bv[i] = 2.0f;
    bv[224 + i] = -2.0f;
  }
  fill(b, bv);
  // group 0: 32 * 2 * (0.5 * 1 * 3 - 0) = 96; group 7: 32 * -2 * (0.5 * 8 * 3 - 0.25 * 14) = -544.
  const float want = 96.0f - 544.0f;
  Tensor* out = ops::mul_mat(ctx, a, b);
  for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast}) {
    const cpu::mm::KernelTable* tables[] = {&cpu::mm::active_kernels(), &cpu::mm::scalar_kernels()};
    for (const cpu::mm::KernelTable* table : tables) {
      cpu::mm::ScopedKernelOverride use(table);
      EXPECT_FLOAT_EQ(computed_values(out, 1, ks)[0], want) << table->isa;
    }
  }
}

TEST(CpuMulMat, BuilderRejectsMismatchedK) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::Q4_0, 64, 4);
  Tensor* b = ctx.new_tensor(DType::F32, 32, 3);
  test::expect_error([&] { ops::mul_mat(ctx, a, b); }, "MUL_MAT");
  Tensor* bf = ctx.new_tensor(DType::F32, 48, 3);
  EXPECT_THROW(ops::mul_mat(ctx, ctx.new_tensor(DType::F32, 32, 2), bf), Error);
}

TEST(CpuMulMat, ZeroLengthRowsGiveZeros) {
  Context ctx(true);
  Tensor* a = ctx.new_tensor(DType::F32, 0, 3);
  Tensor* b = ctx.new_tensor(DType::F32, 0, 2);
  Tensor* out = ops::mul_mat(ctx, a, b);
  for (KernelSet ks : {KernelSet::Reference, KernelSet::Fast})
    EXPECT_EQ(computed_values(out, 2, ks), std::vector<float>(6, 0.0f));
}

}  // namespace

#if defined(__x86_64__)
namespace {

// The SIMD tiles' decoding of a grid I-quant chunk and of the block's scales, for comparison with
// the scalar decoder (core/iq_grids.h).
template <class Block>
TESSERA_AVX2 void simd_chunk(const Block& b, int c, int8_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), cpu::mm::kq::grid_chunk(b, c));
}
template <class Block>
TESSERA_AVX2 void simd_scales(const Block& b, int16_t* lo, int16_t* hi, float& d) {
  const cpu::mm::kq::Scales s = cpu::mm::kq::scales_of(b);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), s.lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), s.hi);
  d = s.d;
}

template <class Block>
void check_grid_decoding(DType type) {
  SCOPED_TRACE(std::string(name(type)));
  constexpr int kBlocks = 64;
  std::vector<Block> blocks(kBlocks);
  random_blocks(type, 3, 1.0f, blocks.data(), kBlocks * 256);
  for (const Block& b : blocks) {
    iq::Unpacked u;
    iq::unpack(b, u);
    for (int c = 0; c < 8; ++c) {
      int8_t got[32];
      simd_chunk(b, c, got);
      ASSERT_EQ(0, std::memcmp(got, u.v + 32 * c, 32)) << "chunk " << c;
    }
    int16_t lo[16], hi[16];
    float d;
    simd_scales(b, lo, hi, d);
    EXPECT_EQ(d, u.d);
    for (int i = 0; i < 8; ++i) {
      if (cpu::mm::kq::kGroups16<Block>) {  // one scale per 16 elements: 0..7, then 8..15
        ASSERT_EQ(lo[i], u.sc[i]) << i;
        ASSERT_EQ(hi[i], u.sc[8 + i]) << i;
      } else {  // one per chunk, equal in pairs
        ASSERT_EQ(lo[i], u.sc[2 * i]) << i;
        ASSERT_EQ(lo[8 + i], u.sc[2 * i]) << i;
      }
    }
  }
}

}  // namespace

TEST(CpuMulMat, SimdGridIQuantDecodingMatchesTheScalarDecoder) {
  // The AVX2 (and AVX-512) tiles decode the grid I-quants in registers: every chunk's values and
  // the block's scales equal the scalar decoder's, on random blocks of each type.
  if (cpu::mm::avx2_kernels() == nullptr) return;  // no AVX2: only the scalar decoder runs
  check_grid_decoding<BlockIQ2_XXS>(DType::IQ2_XXS);
  check_grid_decoding<BlockIQ2_XS>(DType::IQ2_XS);
  check_grid_decoding<BlockIQ2_S>(DType::IQ2_S);
  check_grid_decoding<BlockIQ3_XXS>(DType::IQ3_XXS);
  check_grid_decoding<BlockIQ3_S>(DType::IQ3_S);
  check_grid_decoding<BlockIQ1_S>(DType::IQ1_S);
  check_grid_decoding<BlockIQ1_M>(DType::IQ1_M);
}
#endif
