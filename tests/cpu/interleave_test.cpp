// The CPU's interleaved weight layout (cpu/interleave.h) and MUL_MAT on it: the byte positions the
// layout promises, exact reads back through tensor_get, results against the reference kernels on
// the same weights in ggml's blocks, and the same bits for every kernel table, column count, K
// split and thread count.
#include "cpu/interleave.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/ops/mul_mat_kernels.h"
#include "support/tensor_data.h"
#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace tessera {
namespace {

using cpu::KernelSet;

std::vector<char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> out(n);
  for (char& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// A weight tensor [k, m] (or n_as such matrices: a mixture of experts') in an interleaved buffer of
// its own.
struct Interleaved {
  Context ctx{false};
  std::unique_ptr<Buffer> buffer;
  Tensor* w = nullptr;
  Interleaved(DType type, int64_t k, int64_t m, int64_t n_as = 1) {
    w = ctx.new_tensor(type, k, m, n_as);
    buffer = cpu::interleaved_buffer_type().allocate(w->nbytes());
    buffer->place(*w, 0);
  }
};

TEST(CpuInterleave, BlockJOfRowLHoldsItsScaleAndWordsAtTheirPlaces) {
  for (DType type : {DType::Q4_0, DType::Q8_0}) {
    SCOPED_TRACE(std::string(name(type)));
    const int64_t k = 96, m = 13;  // 3 blocks a row; rows 0..7 interleaved, 8..12 as they are
    Interleaved il(type, k, m);
    ASSERT_EQ(cpu::interleaved_rows(*il.w), 8);
    const size_t bb = traits(type).block_bytes, row = il.w->row_size(), words = (bb - 2) / 4;
    const std::vector<char> native = random_bytes(il.w->nbytes(), 11);
    tensor_set(*il.w, native.data(), 0, native.size());
    const char* mem = static_cast<const char*>(il.w->data);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < k / 32; ++j) {
        const char* blk = native.data() + r * row + j * bb;
        if (r >= 8) {
          EXPECT_EQ(0, std::memcmp(mem + r * row + j * bb, blk, bb)) << "tail row " << r << " block " << j;
          continue;
        }
        const char* group_block = mem + j * 8 * bb;
        EXPECT_EQ(0, std::memcmp(group_block + 2 * r, blk, 2)) << "scale of row " << r << " block " << j;
        for (size_t v = 0; v < words; ++v)
          EXPECT_EQ(0, std::memcmp(group_block + 16 + 32 * v + 4 * r, blk + 2 + 4 * v, 4))
              << "word " << v << " of row " << r << " block " << j;
      }
    // Exact inverse, whole and block by block; set in ranges of a few blocks lays out the same.
    std::vector<char> back(native.size());
    tensor_get(*il.w, back.data(), 0, back.size());
    EXPECT_EQ(native, back);
    for (size_t o = 0; o < native.size(); o += bb) {
      std::vector<char> one(bb);
      tensor_get(*il.w, one.data(), o, bb);
      ASSERT_EQ(0, std::memcmp(one.data(), native.data() + o, bb)) << "block at " << o;
    }
    const std::vector<char> laid_out(mem, mem + native.size());
    std::memset(il.w->data, 0, native.size());
    for (size_t o = 0; o < native.size(); o += 5 * bb)
      tensor_set(*il.w, native.data() + o, o, std::min(5 * bb, native.size() - o));
    EXPECT_EQ(0, std::memcmp(mem, laid_out.data(), laid_out.size()));
    EXPECT_THROW(tensor_get(*il.w, back.data(), 1, bb), Error);  // not whole blocks
  }
}

TEST(CpuInterleave, HalfPieceJOfRowLIsAtByte128JPlus16L) {
  for (DType type : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(name(type)));
    const int64_t k = 24, m = 11;  // 3 pieces a row; rows 0..7 interleaved, 8..10 as they are
    Interleaved il(type, k, m);
    ASSERT_EQ(cpu::interleaved_rows(*il.w), 8);
    const size_t row = il.w->row_size();
    const std::vector<char> native = random_bytes(il.w->nbytes(), 12);
    tensor_set(*il.w, native.data(), 0, native.size());
    const char* mem = static_cast<const char*>(il.w->data);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < k / 8; ++j) {
        const char* piece = native.data() + r * row + 16 * j;
        const char* at = r < 8 ? mem + 128 * j + 16 * r : mem + r * row + 16 * j;
        EXPECT_EQ(0, std::memcmp(at, piece, 16)) << "row " << r << " piece " << j;
      }
    // Exact inverse, whole and element by element; set in 6-byte ranges (across pieces) lays out the same.
    std::vector<char> back(native.size());
    tensor_get(*il.w, back.data(), 0, back.size());
    EXPECT_EQ(native, back);
    for (size_t o = 0; o < native.size(); o += 2) {
      char one[2];
      tensor_get(*il.w, one, o, 2);
      ASSERT_EQ(0, std::memcmp(one, native.data() + o, 2)) << "element at byte " << o;
    }
    const std::vector<char> laid_out(mem, mem + native.size());
    std::memset(il.w->data, 0, native.size());
    for (size_t o = 0; o < native.size(); o += 6)
      tensor_set(*il.w, native.data() + o, o, std::min<size_t>(6, native.size() - o));
    EXPECT_EQ(0, std::memcmp(mem, laid_out.data(), laid_out.size()));
    EXPECT_THROW(tensor_get(*il.w, back.data(), 1, 2), Error);  // not whole elements
  }
}

TEST(CpuInterleave, OtherTypesAndShapesStayInGgmlBlocks) {
  Context ctx(false);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q4_1, 32, 16)), 0);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::F32, 32, 16)), 0);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::F16, 12, 16)), 0);  // rows not whole pieces
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::BF16, 16, 17)), 16);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q4_0, 32, 7)), 0);  // no whole group
  // Experts: each matrix whole groups (all 3 x 16 rows), or none interleaved.
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q8_0, 32, 16, 3)), 48);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q8_0, 32, 12, 2)), 0);
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q8_0, 32, 8, 2, 2)), 0);  // 4-D
  EXPECT_EQ(cpu::interleaved_rows(*ctx.new_tensor(DType::Q8_0, 32, 23)), 16);
}

// Element-wise |x| bound for an f32 dot of k products a_i b_i: the fast kernels' tolerance.
double abs_dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

std::vector<float> computed(Tensor* out, int threads, KernelSet kernels) {
  std::memset(out->data, 0xff, out->nbytes());  // NaN: an element a kernel forgets shows up
  test::compute(out, threads, kernels);
  return test::values(*out);
}

TEST(CpuInterleave, MulMatMatchesTheReferenceWithTheSameBitsEverywhere) {
  const std::vector<const cpu::mm::KernelTable*> tables = cpu::mm::available_kernels();
  for (DType type : {DType::Q4_0, DType::Q8_0})
    for (int64_t k : {32, 96, 4096})  // 4096: the tiles split K (ranges of 3072)
      for (int64_t m : {8, 13, 40}) {
        SCOPED_TRACE(std::string(name(type)) + " k " + std::to_string(k) + " m " + std::to_string(m));
        Context ctx(true);
        Tensor* native = ctx.new_tensor(type, k, m);
        test::fill_random(native, 3, -2.0f, 2.0f);
        Interleaved il(type, k, m);
        tensor_set(*il.w, native->data, 0, native->nbytes());
        const int64_t n = 70;
        Tensor* b = ctx.new_tensor(DType::F32, k, n);
        test::fill_random(b, 4);
        Tensor* want_out = ops::mul_mat(ctx, native, b);
        Tensor* got_out = ops::mul_mat(ctx, il.w, b);
        const std::vector<float> want = computed(want_out, 2, KernelSet::Reference);
        // The reference reads interleaved rows through the inverse: the same bits.
        EXPECT_EQ(want, computed(got_out, 2, KernelSet::Reference));

        std::vector<float> arow(static_cast<size_t>(k)), bcol(static_cast<size_t>(k));
        std::vector<float> first;
        for (const cpu::mm::KernelTable* table : tables) {
          SCOPED_TRACE(table->isa);
          cpu::mm::ScopedKernelOverride use(table);
          const std::vector<float> got = computed(got_out, 2, KernelSet::Fast);
          for (int64_t c = 0; c < n; ++c)
            for (int64_t r = 0; r < m; ++r) {
              to_f32_row(type, native->at(0, r), arow.data(), k);
              std::memcpy(bcol.data(), b->at(0, c), static_cast<size_t>(k) * sizeof(float));
              const size_t i = static_cast<size_t>(c * m + r);
              ASSERT_NEAR(got[i], want[i], 2e-5 * abs_dot(arow, bcol) + 1e-30) << "row " << r << " col " << c;
            }
          // The interleaved rows' kernels are one operation order on every table (the rows after
          // the last group go through the ggml-block kernels, whose scalar and SIMD orders differ).
          if (first.empty()) {
            first = got;
          } else {
            const int64_t grouped = cpu::interleaved_rows(*il.w);
            for (int64_t c = 0; c < n; ++c)
              ASSERT_EQ(0, std::memcmp(first.data() + c * m, got.data() + c * m,
                                       static_cast<size_t>(grouped) * sizeof(float)))
                  << "column " << c << ": the SIMD kernels differ from the scalar ones";
          }
          for (int threads : {1, 3})
            EXPECT_EQ(0, std::memcmp(got.data(), computed(got_out, threads, KernelSet::Fast).data(),
                                     got.size() * sizeof(float)))
                << threads << " threads";
          // Any column count: each column alone (generation's matrix-vector path), and 3 of them.
          for (int64_t c : {int64_t{0}, int64_t{37}, n - 1}) {
            Tensor* one = ctx.new_tensor(DType::F32, k, 1);
            std::memcpy(one->data, b->at(0, c), static_cast<size_t>(k) * sizeof(float));
            const std::vector<float> col = computed(ops::mul_mat(ctx, il.w, one), 2, KernelSet::Fast);
            EXPECT_EQ(0, std::memcmp(col.data(), got.data() + c * m, static_cast<size_t>(m) * sizeof(float)))
                << "column " << c << " alone";
          }
          Tensor* three = ctx.new_tensor(DType::F32, k, 3);
          std::memcpy(three->data, b->at(0, 5), 3 * static_cast<size_t>(k) * sizeof(float));
          const std::vector<float> cols = computed(ops::mul_mat(ctx, il.w, three), 1, KernelSet::Fast);
          EXPECT_EQ(0,
                    std::memcmp(cols.data(), got.data() + 5 * m, 3 * static_cast<size_t>(m) * sizeof(float)))
              << "columns 5..7 as a batch of 3";
        }
      }
}

// 16-bit float weights: each kernel table gives, from the interleaved layout, exactly the bits it
// gives from ggml's rows, for every column count (1: the matrix-vector kernels), K split and thread count.
TEST(CpuInterleave, HalfMulMatHasTheBitsOfGgmlRows) {
  const std::vector<const cpu::mm::KernelTable*> tables = cpu::mm::available_kernels();
  for (DType type : {DType::F16, DType::BF16})
    for (int64_t k : {8, 40, 2304})  // 2304: the tiles split K
      for (int64_t m : {8, 13, 40})
        for (int64_t n : {1, 2, 3, 4, 7, 70}) {
          SCOPED_TRACE(std::string(name(type)) + " k " + std::to_string(k) + " m " + std::to_string(m) +
                       " n " + std::to_string(n));
          Context ctx(true);
          Tensor* native = ctx.new_tensor(type, k, m);
          test::fill_random(native, 5, -2.0f, 2.0f);
          Interleaved il(type, k, m);
          tensor_set(*il.w, native->data, 0, native->nbytes());
          Tensor* b = ctx.new_tensor(DType::F32, k, n);
          test::fill_random(b, 6);
          Tensor* want_out = ops::mul_mat(ctx, native, b);
          Tensor* got_out = ops::mul_mat(ctx, il.w, b);
          EXPECT_EQ(computed(want_out, 2, KernelSet::Reference), computed(got_out, 2, KernelSet::Reference));
          for (const cpu::mm::KernelTable* table : tables) {
            SCOPED_TRACE(table->isa);
            cpu::mm::ScopedKernelOverride use(table);
            const std::vector<float> want = computed(want_out, 2, KernelSet::Fast);
            for (int threads : {1, 2, 3})
              ASSERT_EQ(0, std::memcmp(want.data(), computed(got_out, threads, KernelSet::Fast).data(),
                                       want.size() * sizeof(float)))
                  << threads << " threads";
          }
        }
}

// MUL_MAT_ID on experts in the interleaved layout: the reference kernels read the same weights (the
// same bits as from ggml's blocks), the fast ones agree with them within the dot products'
// tolerance, and a token alone (the matrix-vector kernels) or within a batch (tokens grouped by
// expert) gets the same bits.
TEST(CpuInterleave, MulMatIdReadsEachExpertFromItsGroups) {
  struct Shape {
    int64_t k, m, n_as, n_used, n_tokens;
  };
  for (const Shape sh : {Shape{64, 24, 5, 2, 7}, Shape{256, 256, 4, 2, 10}, Shape{256, 256, 4, 2, 1}})
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::F16, DType::BF16}) {
      const int64_t k = sh.k, m = sh.m, n_as = sh.n_as, n_used = sh.n_used, n_tokens = sh.n_tokens;
      SCOPED_TRACE(fmt::format("{} k {} m {} tokens {}", name(type), k, m, n_tokens));
      Context ctx(true);
      Tensor* native = ctx.new_tensor(type, k, m, n_as);
      test::fill_random(native, 8, -2.0f, 2.0f);
      Interleaved il(type, k, m, n_as);
      ASSERT_EQ(cpu::interleaved_rows(*il.w), m * n_as);
      tensor_set(*il.w, native->data, 0, native->nbytes());
      std::vector<char> back(native->nbytes());
      tensor_get(*il.w, back.data(), 0, back.size());
      EXPECT_EQ(0, std::memcmp(back.data(), native->data, back.size()));
      Tensor* b = ctx.new_tensor(DType::F32, k, 1, n_tokens);
      test::fill_random(b, 9);
      Tensor* ids = ctx.new_tensor(DType::I32, n_used, n_tokens);
      auto* id = static_cast<int32_t*>(ids->data);
      for (int64_t i = 0; i < n_used * n_tokens; ++i) id[i] = static_cast<int32_t>((i * 3 + i / 5) % n_as);
      const std::vector<float> want = computed(ops::mul_mat_id(ctx, native, b, ids), 2, KernelSet::Reference);
      Tensor* got_out = ops::mul_mat_id(ctx, il.w, b, ids);
      EXPECT_EQ(want, computed(got_out, 2, KernelSet::Reference));
      const std::vector<float> got = computed(got_out, 2, KernelSet::Fast);
      std::vector<float> arow(static_cast<size_t>(k)), bcol(static_cast<size_t>(k));
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t e = 0; e < n_used; ++e)
          for (int64_t r = 0; r < m; ++r) {
            to_f32_row(type, native->at(0, r, id[t * n_used + e]), arow.data(), k);
            std::memcpy(bcol.data(), b->at(0, 0, t), static_cast<size_t>(k) * sizeof(float));
            const size_t i = static_cast<size_t>((t * n_used + e) * m + r);
            ASSERT_NEAR(got[i], want[i], 2e-5 * abs_dot(arow, bcol) + 1e-30)
                << "token " << t << " slot " << e << " row " << r;
          }
      for (int64_t t : {int64_t{0}, n_tokens - 1}) {  // a token alone
        Tensor* one = ctx.new_tensor(DType::F32, k, 1, 1);
        std::memcpy(one->data, b->at(0, 0, t), static_cast<size_t>(k) * sizeof(float));
        Tensor* one_ids = ctx.new_tensor(DType::I32, n_used, 1);
        std::memcpy(one_ids->data, id + t * n_used, static_cast<size_t>(n_used) * sizeof(int32_t));
        const std::vector<float> alone =
            computed(ops::mul_mat_id(ctx, il.w, one, one_ids), 2, KernelSet::Fast);
        EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + t * n_used * m,
                                 static_cast<size_t>(n_used * m) * sizeof(float)))
            << "token " << t << " alone";
      }
    }
}

TEST(CpuInterleave, OtherOpsRefuseInterleavedWeights) {
  Context ctx(true);
  Interleaved il(DType::Q4_0, 64, 16);
  const std::vector<char> bytes(il.w->nbytes(), 0);
  tensor_set(*il.w, bytes.data(), 0, bytes.size());
  Tensor* idx = ctx.new_tensor(DType::I32, 1);
  test::fill_i32(idx, {3});
  Tensor* rows = ops::get_rows(ctx, il.w, idx);
  try {
    test::compute(rows, 1, KernelSet::Fast);
    ADD_FAILURE() << "GET_ROWS read interleaved weights";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("interleaved"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
