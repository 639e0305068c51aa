// FLASH_ATTN_EXT on the CPU, reference and fast kernels: hand-computed attention, grouped heads,
// masks, ALiBi and soft-capping, and the fused result against the composed graph the model
// builders used before it (MUL_MAT, SOFT_MAX, MUL_MAT over the KV cache's F16 layout).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/tensor_data.h"
#include "tessera/context.h"
#include "tessera/ops.h"

namespace tessera {
namespace {

using test::compute;
using test::fill;
using test::get;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr cpu::KernelSet kBoth[] = {cpu::KernelSet::Reference, cpu::KernelSet::Fast};

const char* kernels_name(cpu::KernelSet k) { return k == cpu::KernelSet::Fast ? "fast" : "reference"; }

// A weight as an F16 cache's attention applies it where it rounds (the reference, the composed
// strategy: MUL_MAT's rule for F16 weights), or as the online softmax keeps it.
double weight(double w, bool rounded) {
  return rounded ? fp16_to_fp32(fp32_to_fp16(static_cast<float>(w))) : w;
}

// One query, two cells: scores [0, ln 3] give weights [1/4, 3/4]; v0 = [4, 8], v1 = [8, 0], so
// out = [1 + 6, 2 + 0] = [7, 2].
TEST(CpuFlashAttn, HandComputedTwoCells) {
  for (DType kv : {DType::F32, DType::F16})
    for (cpu::KernelSet ks : kBoth) {
      Context ctx(true);
      Tensor* q = ctx.new_tensor(DType::F32, 2, 1, 1);
      Tensor* k = ctx.new_tensor(kv, 2, 2, 1);
      Tensor* v = ctx.new_tensor(kv, 2, 2, 1);
      fill(q, {1, 0});
      fill(k, {0, 5, 1, -5});  // q.k = 0 and 1; the scale ln 3 makes them 0 and ln 3
      fill(v, {4, 8, 8, 0});
      Tensor* out = ops::flash_attn_ext(ctx, q, k, v, nullptr, std::log(3.0f));
      ASSERT_EQ(out->ne[0], 2);
      ASSERT_EQ(out->ne[1], 1);
      compute(out, 1, ks);
      EXPECT_NEAR(get(*out, 0, 0), 7.0f, 2e-6f) << name(kv) << " " << kernels_name(ks);
      EXPECT_NEAR(get(*out, 1, 0), 2.0f, 2e-6f) << name(kv) << " " << kernels_name(ks);
    }
}

// Two query heads share one K/V head; query row 0 may see cell 0 only, row 1 both. The result is
// [d_v, heads, queries]: heads come before queries.
TEST(CpuFlashAttn, GroupedHeadsMaskAndResultLayout) {
  for (cpu::KernelSet ks : kBoth) {
    Context ctx(true);
    Tensor* q = ctx.new_tensor(DType::F32, 1, 2, 2);  // [d=1, 2 queries, 2 heads]
    fill(q, {0, 0, 1, 1});                            // head 0 scores 0 everywhere, head 1 scores k
    Tensor* k = ctx.new_tensor(DType::F16, 1, 2, 1);
    fill(k, {0, 0.6931472f});  // ln 2 (f16 rounds it; the expectation uses the rounded value)
    Tensor* v = ctx.new_tensor(DType::F16, 3, 2, 1);
    fill(v, {1, 2, 3, 5, 7, 9});
    Tensor* mask = ctx.new_tensor(DType::F16, 2, 2);
    fill(mask, {0, -kInf, 0, 0});
    Tensor* out = ops::flash_attn_ext(ctx, q, k, v, mask, 1.0f);
    ASSERT_EQ(out->ne[0], 3);
    ASSERT_EQ(out->ne[1], 2);  // heads
    ASSERT_EQ(out->ne[2], 2);  // queries
    test::expect_thread_independent(out);
    compute(out, 2, ks);
    const double e = std::exp(static_cast<double>(get(*k, 0, 1)));  // about 2
    const double v0[3] = {1, 2, 3}, v1[3] = {5, 7, 9};
    // Head 1 weighs the cells 1 : e, rounded to f16 by the reference (V in rows: the fast path's
    // online softmax keeps them in f32).
    const bool rounded = ks == cpu::KernelSet::Reference;
    const double w0 = weight(1 / (1 + e), rounded), w1 = weight(e / (1 + e), rounded);
    for (int c = 0; c < 3; ++c) {
      SCOPED_TRACE(kernels_name(ks));
      EXPECT_NEAR(get(*out, c, 0, 0), v0[c], 1e-6);                    // head 0, query 0: cell 0 only
      EXPECT_NEAR(get(*out, c, 1, 0), v0[c], 1e-6);                    // head 1, query 0: cell 0 only
      EXPECT_NEAR(get(*out, c, 0, 1), (v0[c] + v1[c]) / 2, 1e-6);      // head 0, query 1: equal weights
      EXPECT_NEAR(get(*out, c, 1, 1), w0 * v0[c] + w1 * v1[c], 1e-5);  // head 1: weights 1 : e
    }
  }
}

TEST(CpuFlashAttn, FullyMaskedRowIsZeros) {
  for (cpu::KernelSet ks : kBoth) {
    Context ctx(true);
    Tensor* q = ctx.new_tensor(DType::F32, 8, 2, 1);
    Tensor* k = ctx.new_tensor(DType::F16, 8, 70, 1);
    Tensor* v = ctx.new_tensor(DType::F16, 8, 70, 1);
    test::fill_random(q, 1);
    test::fill_random(k, 2);
    test::fill_random(v, 3);
    Tensor* mask = ctx.new_tensor(DType::F32, 70, 2);
    std::vector<float> m(140, 0.0f);
    for (int j = 0; j < 70; ++j) m[static_cast<size_t>(j)] = -kInf;  // row 0: every cell hidden
    fill(mask, m);
    Tensor* out = ops::flash_attn_ext(ctx, q, k, v, mask, 0.3f);
    compute(out, 1, ks);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(get(*out, c, 0, 0), 0.0f) << kernels_name(ks);
    double norm = 0;
    for (int c = 0; c < 8; ++c) norm += std::fabs(get(*out, c, 0, 1));
    EXPECT_GT(norm, 0.0);
  }
}

// ALiBi: with 2 heads n = 2, max_bias 4 gives slopes 2^-2 and 2^-4; a mask of [0, 8] then adds
// [0, 2] and [0, 0.5] to scores of 0, so cell 1 weighs sigmoid(2) and sigmoid(0.5).
TEST(CpuFlashAttn, AlibiSlopesScaleTheMask) {
  for (cpu::KernelSet ks : kBoth) {
    Context ctx(true);
    Tensor* q = ctx.new_tensor(DType::F32, 1, 1, 2);
    fill(q, {0, 0});
    Tensor* k = ctx.new_tensor(DType::F32, 1, 2, 1);
    fill(k, {1, 1});
    Tensor* v = ctx.new_tensor(DType::F32, 1, 2, 1);
    fill(v, {0, 1});
    Tensor* mask = ctx.new_tensor(DType::F32, 2, 1);
    fill(mask, {0, 8});
    Tensor* out = ops::flash_attn_ext(ctx, q, k, v, mask, 1.0f, 4.0f);
    compute(out, 1, ks);
    EXPECT_NEAR(get(*out, 0, 0), 1 / (1 + std::exp(-2.0)), 1e-6) << kernels_name(ks);
    EXPECT_NEAR(get(*out, 0, 1), 1 / (1 + std::exp(-0.5)), 1e-6) << kernels_name(ks);
  }
}

// Soft-capping: scores 0 and 30 with cap 10 become 0 and 10 tanh(3), so cell 1 weighs
// sigmoid(10 tanh 3) (in f16 in the reference: 1).
TEST(CpuFlashAttn, SoftcapBoundsTheScores) {
  for (cpu::KernelSet ks : kBoth) {
    Context ctx(true);
    Tensor* q = ctx.new_tensor(DType::F32, 1, 1, 1);
    fill(q, {3});
    Tensor* k = ctx.new_tensor(DType::F16, 1, 2, 1);
    fill(k, {0, 1});
    Tensor* v = ctx.new_tensor(DType::F16, 1, 2, 1);
    fill(v, {0, 1});
    Tensor* out = ops::flash_attn_ext(ctx, q, k, v, nullptr, 10.0f, 0.0f, 10.0f);
    compute(out, 1, ks);
    EXPECT_NEAR(get(*out, 0, 0),
                weight(1 / (1 + std::exp(-10 * std::tanh(3.0))), ks == cpu::KernelSet::Reference), 1e-6)
        << kernels_name(ks);
  }
}

// The attention of src/llm/blocks.cpp before the fused op: K [d, n_kv, kv_heads] and V transposed
// ([n_kv, d] per head, as the KV cache stores it) in F16, queries permuted to [d, n_q, heads],
// kq = MUL_MAT(K, Q), optionally soft-capped, SOFT_MAX with mask and scale, MUL_MAT(V, kq), then
// heads before queries. FLASH_ATTN_EXT over the same tensors must give the same values (the online
// softmax to f16 rounding: it keeps Q and the weights in f32 where MUL_MAT rounds them).
TEST(CpuFlashAttn, MatchesComposedMulMatSoftMaxMulMat) {
  struct Shape {
    int64_t d, n_kv, n_q, heads, kv_heads;
    float softcap;
  };
  for (const Shape& sh : {Shape{64, 300, 1, 8, 2, 0.0f}, Shape{64, 130, 9, 4, 4, 0.0f},
                          Shape{32, 77, 5, 6, 3, 0.0f}, Shape{64, 96, 4, 4, 2, 30.0f}}) {
    SCOPED_TRACE(testing::Message() << "d=" << sh.d << " n_kv=" << sh.n_kv << " n_q=" << sh.n_q << " heads="
                                    << sh.heads << "/" << sh.kv_heads << " softcap=" << sh.softcap);
    Context ctx(true);
    Tensor* q3 = ctx.new_tensor(DType::F32, sh.d, sh.heads, sh.n_q);  // as ROPE leaves it
    test::fill_random(q3, 10, -2.0f, 2.0f);
    Tensor* k = ctx.new_tensor(DType::F16, sh.d, sh.n_kv, sh.kv_heads);
    test::fill_random(k, 11, -2.0f, 2.0f);
    Tensor* vt = ctx.new_tensor(DType::F16, sh.n_kv, sh.d, sh.kv_heads);
    test::fill_random(vt, 12);
    Tensor* mask = ctx.new_tensor(DType::F32, sh.n_kv, sh.n_q);
    std::vector<float> m(static_cast<size_t>(sh.n_kv * sh.n_q), 0.0f);
    for (int64_t i = 0; i < sh.n_q; ++i)  // causal over the last n_q cells, and a few cells hidden
      for (int64_t j = 0; j < sh.n_kv; ++j)
        if (j > sh.n_kv - sh.n_q + i || j % 11 == 3) m[static_cast<size_t>(i * sh.n_kv + j)] = -kInf;
    fill(mask, m);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.d));

    Tensor* qp = ops::permute(ctx, q3, 0, 2, 1, 3);  // [d, n_q, heads]
    Tensor* kq = ops::mul_mat(ctx, k, qp);
    float sm_scale = scale;
    if (sh.softcap != 0.0f) {
      kq = ops::scale(ctx, ops::tanh(ctx, ops::scale(ctx, kq, scale / sh.softcap)), sh.softcap);
      sm_scale = 1.0f;
    }
    kq = ops::soft_max(ctx, kq, mask, sm_scale);
    Tensor* kqv = ops::mul_mat(ctx, vt, kq);                                // [d, n_q, heads]
    Tensor* composed = ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3));  // [d, heads, n_q]
    compute(composed, 1, cpu::KernelSet::Reference);

    for (bool online : {false, true}) {  // the CPU's composed strategy, then its online softmax
      Tensor* fused =
          ops::flash_attn_ext(ctx, qp, k, ops::transpose(ctx, vt), mask, scale, 0.0f, sh.softcap, online);
      ASSERT_TRUE(fused->same_shape(*composed));
      for (cpu::KernelSet ks : kBoth) {
        compute(fused, 2, ks);
        double worst = 0;
        for (int64_t i2 = 0; i2 < sh.n_q; ++i2)
          for (int64_t i1 = 0; i1 < sh.heads; ++i1)
            for (int64_t i0 = 0; i0 < sh.d; ++i0)
              worst =
                  std::max<double>(worst, std::fabs(get(*fused, i0, i1, i2) - get(*composed, i0, i1, i2)));
        const bool f32_weights = online && ks == cpu::KernelSet::Fast;
        EXPECT_LT(worst, f32_weights ? 5e-4 : 2e-6) << kernels_name(ks) << (online ? " online softmax" : "");
      }
    }
  }
}

// Over the KV cache's layout the fast kernel runs the composed ops' own kernels, per group of query
// rows whose KQ holds about 4 MiB (here 64 rows: 2048 cells x 8 heads): the same bits as those ops
// in one graph (MUL_MAT, SCALE and TANH for the soft-cap, SOFT_MAX, MUL_MAT, the merged heads), so
// the model graphs' logits are those of the composed attention they were built with before.
TEST(CpuFlashAttn, OverTheCacheLayoutTheFastKernelHasTheComposedOpsBits) {
  struct Shape {
    int64_t n_kv, n_q;
    float scale, softcap;
  };
  for (const Shape& sh : {Shape{2048, 200, 0.125f, 0.0f}, Shape{96, 1, 0.125f, 0.0f},
                          Shape{96, 7, 1.0f, 30.0f}, Shape{96, 7, 0.3f, 5.0f}}) {
    SCOPED_TRACE(testing::Message() << "n_kv=" << sh.n_kv << " n_q=" << sh.n_q << " softcap=" << sh.softcap);
    constexpr int64_t d = 16, heads = 8, kv_heads = 2;
    Context ctx(true);
    Tensor* q3 = ctx.new_tensor(DType::F32, d, heads, sh.n_q);
    test::fill_random(q3, 30, -2.0f, 2.0f);
    Tensor* k = ctx.new_tensor(DType::F16, d, sh.n_kv, kv_heads);
    test::fill_random(k, 31, -2.0f, 2.0f);
    Tensor* vt = ctx.new_tensor(DType::F16, sh.n_kv, d, kv_heads);
    test::fill_random(vt, 32);
    Tensor* mask = ctx.new_tensor(DType::F32, sh.n_kv, sh.n_q + 3);  // padded rows, as the sessions' are
    std::vector<float> m(static_cast<size_t>(sh.n_kv * (sh.n_q + 3)), 0.0f);
    for (int64_t i = 0; i < sh.n_q + 3; ++i)
      for (int64_t j = 0; j < sh.n_kv; ++j)
        if (j > sh.n_kv - sh.n_q + i) m[static_cast<size_t>(i * sh.n_kv + j)] = -kInf;
    fill(mask, m);
    Tensor* qp = ops::permute(ctx, q3, 0, 2, 1, 3);
    Tensor* kq = ops::mul_mat(ctx, k, qp);
    float sm_scale = sh.scale;
    if (sh.softcap != 0.0f) {  // the fused op's definition: the tanh sees the scaled score
      kq = ops::tanh(ctx, ops::scale(ctx, kq, sh.scale / sh.softcap));
      sm_scale = sh.softcap;
    }
    kq = ops::soft_max(ctx, kq, mask, sm_scale);
    Tensor* composed = ops::cont(ctx, ops::permute(ctx, ops::mul_mat(ctx, vt, kq), 0, 2, 1, 3));
    compute(composed, 2, cpu::KernelSet::Fast);
    Tensor* fused =
        ops::flash_attn_ext(ctx, qp, k, ops::transpose(ctx, vt), mask, sh.scale, 0.0f, sh.softcap);
    for (int threads : {1, 3}) {
      compute(fused, threads, cpu::KernelSet::Fast);
      ASSERT_EQ(test::values(*fused), test::values(*composed)) << threads << " threads";
    }
  }
}

// A server's step: rows of sequences that each hold their own range of the cache (one ending at
// n_kv, which is no multiple of the span's 64 cells), a row with holes in its cells, a fully hidden
// row and a prompt of 40 rows. The kernel reads only the span of cells each row group's mask leaves
// visible: NaNs in every cell outside the spans change nothing, and the result has the bits of the
// composed ops over all cells [0, n_kv) of clean K/V (and the reference's values).
TEST(CpuFlashAttn, RowsReadOnlyTheSpanTheirMaskLeavesVisible) {
  constexpr int64_t d = 64, heads = 8, kv_heads = 2, n_kv = 1000, n_q = 45;
  // Each row's visible cells.
  auto visible = [](int64_t t, int64_t j) {
    if (t == 0) return j >= 100 && j < 260;
    if (t == 1) return j >= 300 && j < 310;
    if (t == 2) return j >= 900;
    if (t == 3) return false;
    if (t == 4) return j >= 500 && j < 700 && j % 3 != 0;
    return j >= 704 && j <= 704 + (t - 5);  // the prompt, causal
  };
  // Cells outside every row's span (visible cells rounded out to 64): never read.
  auto outside = [](int64_t j) { return j < 64 || (j >= 320 && j < 448) || (j >= 768 && j < 896); };
  struct Variant {
    DType mask_type;
    float scale, max_bias, softcap;
  };
  for (const Variant& va :
       {Variant{DType::F32, 0.125f, 0.0f, 0.0f}, Variant{DType::F16, 0.125f, 0.0f, 0.0f},
        Variant{DType::F32, 1.0f, 0.0f, 30.0f}, Variant{DType::F32, 0.125f, 8.0f, 0.0f}}) {
    SCOPED_TRACE(testing::Message() << "mask " << name(va.mask_type) << " softcap " << va.softcap
                                    << " max_bias " << va.max_bias);
    Context ctx(true);
    Tensor* q3 = ctx.new_tensor(DType::F32, d, heads, n_q);
    test::fill_random(q3, 40, -2.0f, 2.0f);
    Tensor* k = ctx.new_tensor(DType::F16, d, n_kv, kv_heads);
    test::fill_random(k, 41, -2.0f, 2.0f);
    Tensor* vt = ctx.new_tensor(DType::F16, n_kv, d, kv_heads);
    test::fill_random(vt, 42);
    Tensor* mask = ctx.new_tensor(va.mask_type, n_kv, n_q);
    std::vector<float> m(static_cast<size_t>(n_kv * n_q));
    for (int64_t t = 0; t < n_q; ++t)
      for (int64_t j = 0; j < n_kv; ++j)  // visible cells with a bias (ALiBi scales it by the head)
        m[static_cast<size_t>(t * n_kv + j)] = visible(t, j) ? -0.25f * static_cast<float>(j % 5) : -kInf;
    fill(mask, m);

    Tensor* qp = ops::permute(ctx, q3, 0, 2, 1, 3);
    Tensor* kq = ops::mul_mat(ctx, k, qp);
    float sm_scale = va.scale;
    if (va.softcap != 0.0f) {
      kq = ops::tanh(ctx, ops::scale(ctx, kq, va.scale / va.softcap));
      sm_scale = va.softcap;
    }
    kq = ops::soft_max(ctx, kq, mask, sm_scale, va.max_bias);
    Tensor* composed = ops::cont(ctx, ops::permute(ctx, ops::mul_mat(ctx, vt, kq), 0, 2, 1, 3));
    compute(composed, 2, cpu::KernelSet::Fast);
    const std::vector<float> expected = test::values(*composed);
    Tensor* fused =
        ops::flash_attn_ext(ctx, qp, k, ops::transpose(ctx, vt), mask, va.scale, va.max_bias, va.softcap);
    compute(fused, 1, cpu::KernelSet::Reference);
    const std::vector<float> reference = test::values(*fused);

    // Garbage where no row looks.
    for (int64_t h = 0; h < kv_heads; ++h)
      for (int64_t j = 0; j < n_kv; ++j) {
        if (!outside(j)) continue;
        for (int64_t c = 0; c < d; ++c) {
          test::set(*k, std::nanf(""), c, j, h);
          test::set(*vt, std::nanf(""), j, c, h);
        }
      }
    for (int threads : {1, 2, 3}) {
      compute(fused, threads, cpu::KernelSet::Fast);
      const std::vector<float> got = test::values(*fused);
      ASSERT_EQ(got, expected) << threads << " threads";
      // (Both round the weights to f16, from a float and a double softmax: now and then one rounds
      // the other way, by half an f16 step of a weight.)
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], reference[i], 1e-4) << i;
    }
    for (int64_t h = 0; h < heads; ++h)  // the hidden row: zeros
      for (int64_t c = 0; c < d; ++c) EXPECT_EQ(get(*fused, c, h, 3), 0.0f);
  }
}

// Each query row's result is the same alone as in a batch, and on any number of threads: with V in
// rows (the online softmax), over the KV cache's transposed V (the composed ops), and with the
// online softmax asked for there.
TEST(CpuFlashAttn, RowsDoNotDependOnTheBatchOrThreads) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Context ctx(true);
    Tensor* q = ctx.new_tensor(DType::F32, 64, 13, 4);
    test::fill_random(q, 20);
    Tensor* k = ctx.new_tensor(DType::F16, 64, 200, 2);
    test::fill_random(k, 21);
    Tensor* v = variant == 0 ? ctx.new_tensor(DType::F16, 64, 200, 2)
                             : ops::transpose(ctx, ctx.new_tensor(DType::F16, 200, 64, 2));
    test::fill_random(v->view_src != nullptr ? v->view_src : v, 22);
    const bool online = variant == 2;
    Tensor* batch = ops::flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f, online);
    test::expect_thread_independent(batch);
    for (int threads : {1, 3}) {
      compute(batch, threads, cpu::KernelSet::Fast);
      for (int64_t r : {0, 6, 12}) {
        Tensor* row =
            ops::view(ctx, q, {64, 1, 4, 1}, q->nb[1], q->nb[2], q->nb[3], static_cast<size_t>(r) * q->nb[1]);
        Tensor* alone = ops::flash_attn_ext(ctx, row, k, v, nullptr, 0.125f, 0.0f, 0.0f, online);
        compute(alone, 1, cpu::KernelSet::Fast);
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t c = 0; c < 64; ++c)
            ASSERT_EQ(get(*alone, c, h, 0), get(*batch, c, h, r)) << r << " " << h;
      }
    }
  }
}

// Attention sinks (gpt-oss): one logit per head joins the denominator and attends to nothing. Two
// heads on one K/V head, scores [0, ln 3] (exp 1 and 3), v0 = [4, 8], v1 = [8, 0]. Head 0's sink
// ln 4 makes the denominator 8: [0.5 + 3, 1 + 0] = [3.5, 1]. Head 1's sink 10 lies above every
// score (the online softmax rescales what it gathered): [28, 8] / (4 + e^10), the weights 1 and
// 3 / (4 + e^10) in f16 where an F16 cache's attention rounds them (the reference, the composed
// ops). Query row 1 sees no cell: zeros, whatever the sink. Every strategy: the reference, the online softmax
// over V rows, the composed ops over the cache's transposed V, and the online softmax there.
TEST(CpuFlashAttn, SinksJoinTheDenominator) {
  for (int variant = 0; variant < 4; ++variant) {
    const cpu::KernelSet ks = variant == 0 ? cpu::KernelSet::Reference : cpu::KernelSet::Fast;
    const bool transposed = variant >= 2, online = variant == 3;
    SCOPED_TRACE(variant);
    for (DType kv : {DType::F32, DType::F16}) {
      Context ctx(true);
      Tensor* q = ctx.new_tensor(DType::F32, 2, 2, 2);  // [d, queries, heads]
      fill(q, {1, 0, 1, 0, 1, 0, 1, 0});
      Tensor* k = ctx.new_tensor(kv, 2, 2, 1);
      fill(k, {0, 5, 1, -5});
      Tensor* v = transposed ? ops::transpose(ctx, ctx.new_tensor(kv, 2, 2, 1)) : ctx.new_tensor(kv, 2, 2, 1);
      fill(v->view_src != nullptr ? v->view_src : v,
           {4, 8, 8, 0});  // channel rows of V^T are the same numbers
      Tensor* mask = ctx.new_tensor(DType::F16, 2, 2);
      fill(mask, {0, 0, -kInf, -kInf});
      Tensor* sinks = ctx.new_tensor(DType::F32, 2);
      fill(sinks, {std::log(4.0f), 10.0f});
      Tensor* out = ops::flash_attn_ext(ctx, q, k, v, mask, std::log(3.0f), 0.0f, 0.0f, online, sinks);
      compute(out, 2, ks);
      const double big = 4 + std::exp(10.0);
      const bool rounded = kv == DType::F16 && !online && variant != 1;
      const double w0 = weight(1 / big, rounded), w1 = weight(3 / big, rounded);
      EXPECT_NEAR(get(*out, 0, 0, 0), 3.5, 2e-6) << name(kv);
      EXPECT_NEAR(get(*out, 1, 0, 0), 1.0, 2e-6) << name(kv);
      EXPECT_NEAR(get(*out, 0, 1, 0), 4 * w0 + 8 * w1, 1e-9) << name(kv);
      EXPECT_NEAR(get(*out, 1, 1, 0), 8 * w0, 1e-9) << name(kv);
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) EXPECT_EQ(get(*out, c, h, 1), 0.0f) << name(kv) << " " << h;
      test::expect_op_error(
          [&] {
            ops::flash_attn_ext(ctx, q, k, v, mask, 1.0f, 0.0f, 0.0f, false, ctx.new_tensor(DType::F32, 3));
          },
          "FLASH_ATTN_EXT");
    }
  }
}

// The fused op with sinks has the bits of the composed ops with SOFT_MAX's sinks (the scheduler's
// decomposition and the CPU's composed strategy both make that graph).
TEST(CpuFlashAttn, SinksOverTheCacheLayoutHaveTheComposedOpsBits) {
  constexpr int64_t d = 16, heads = 4, kv_heads = 2, n_kv = 70, n_q = 5;
  Context ctx(true);
  Tensor* q3 = ctx.new_tensor(DType::F32, d, heads, n_q);
  test::fill_random(q3, 40, -2.0f, 2.0f);
  Tensor* k = ctx.new_tensor(DType::F16, d, n_kv, kv_heads);
  test::fill_random(k, 41, -2.0f, 2.0f);
  Tensor* vt = ctx.new_tensor(DType::F16, n_kv, d, kv_heads);
  test::fill_random(vt, 42);
  Tensor* sinks = ctx.new_tensor(DType::F32, heads);
  fill(sinks, {-1.0f, 0.5f, 3.0f, 8.0f});
  Tensor* qp = ops::permute(ctx, q3, 0, 2, 1, 3);
  Tensor* kq = ops::soft_max(ctx, ops::mul_mat(ctx, k, qp), nullptr, 0.25f, 0.0f, sinks);
  Tensor* composed = ops::cont(ctx, ops::permute(ctx, ops::mul_mat(ctx, vt, kq), 0, 2, 1, 3));
  compute(composed, 2, cpu::KernelSet::Fast);
  Tensor* fused =
      ops::flash_attn_ext(ctx, qp, k, ops::transpose(ctx, vt), nullptr, 0.25f, 0.0f, 0.0f, false, sinks);
  compute(fused, 3, cpu::KernelSet::Fast);
  EXPECT_EQ(test::values(*fused), test::values(*composed));
  // The reference agrees to float rounding.
  compute(fused, 1, cpu::KernelSet::Reference);
  const std::vector<float> ref = test::values(*fused), fast = test::values(*composed);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(ref[i], fast[i], 1e-4 * (1 + std::abs(ref[i]))) << i;
}

TEST(CpuFlashAttn, BuilderRejectsBadOperands) {
  Context ctx(true);
  Tensor* q = ctx.new_tensor(DType::F32, 16, 3, 4);
  Tensor* k = ctx.new_tensor(DType::F16, 16, 10, 2);
  Tensor* v = ctx.new_tensor(DType::F16, 16, 10, 2);
  auto fa = [&](Tensor* qq, Tensor* kk, Tensor* vv, Tensor* mm, float softcap = 0.0f, float max_bias = 0.0f) {
    ops::flash_attn_ext(ctx, qq, kk, vv, mm, 1.0f, max_bias, softcap);
  };
  test::expect_op_error([&] { fa(q, ctx.new_tensor(DType::F16, 8, 10, 2), v, nullptr); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, ctx.new_tensor(DType::F16, 16, 11, 2), nullptr); }, "FLASH_ATTN_EXT");
  test::expect_op_error(
      [&] { fa(q, ctx.new_tensor(DType::F16, 16, 10, 3), ctx.new_tensor(DType::F16, 16, 10, 3), nullptr); },
      "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, ctx.new_tensor(DType::F32, 16, 10, 2), nullptr); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(ctx.new_tensor(DType::F16, 16, 3, 4), k, v, nullptr); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, v, ctx.new_tensor(DType::F16, 9, 3)); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, v, ctx.new_tensor(DType::F16, 10, 2)); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, v, nullptr, -1.0f); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, v, nullptr, 0.0f, -1.0f); }, "FLASH_ATTN_EXT");
  test::expect_op_error([&] { fa(q, k, v, nullptr, kInf); }, "FLASH_ATTN_EXT");
  Tensor* ok = ops::flash_attn_ext(ctx, q, k, v, ctx.new_tensor(DType::F16, 10, 8), 0.5f, 2.0f, 30.0f);
  EXPECT_EQ(ok->ne, (std::array<int64_t, 4>{16, 4, 3, 1}));
  const FlashAttnParams p = flash_attn_params(*ok);
  EXPECT_EQ(p.scale, 0.5f);
  EXPECT_EQ(p.max_bias, 2.0f);
  EXPECT_EQ(p.softcap, 30.0f);
}

}  // namespace
}  // namespace tessera
