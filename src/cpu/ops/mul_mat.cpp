// MUL_MAT on the CPU: dst[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3].
//
// Reference: each weight row converted to f32, dotted with b's row in double (for quantized weights b
// goes through Q8_0 or Q8_K first, for F16 and BF16 weights it is rounded to f16 or bf16, as ggml's CPU
// does). Fast: b is prepared once (Q8_0 or Q8_K blocks for quantized weights, bf16 rows for BF16
// weights, f32 rows rounded to f16 for F16 weights, f32 rows otherwise) and tile kernels (mul_mat_kernels.h)
// run over cache blocks of (weight rows x b columns x K); for one b column (generation), matrix-vector
// kernels take more weight rows per pass with each row's bits unchanged. Each output is computed by
// one kernel call chain whatever the blocking, so results do not depend on thread counts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/interleave.h"
#include "cpu/kernels.h"
#include "cpu/ops/mul_mat_kernels.h"
#include "tessera/convert.h"
#include "tessera/op_types.h"
#include "tessera/quant.h"

namespace tessera::cpu {
namespace {

struct Shape {
  int64_t k, m, n, b2, b3, r2, r3;
};

Shape check(const Tensor& dst, const Tensor& a, const Tensor& b) {
  const bool a_ok = op_source_types(Op::MulMat, 0).contains(a.type);
  if (!a_ok || (b.type != DType::F32 && b.type != DType::F16) || dst.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: MUL_MAT of {} weights by {} into {} is not supported", name(a.type),
          name(b.type), name(dst.type));
  if (a.ne[0] != b.ne[0] || a.ne[2] == 0 || a.ne[3] == 0 || b.ne[2] % a.ne[2] != 0 ||
      b.ne[3] % a.ne[3] != 0 || dst.ne[0] != a.ne[1] || dst.ne[1] != b.ne[1] || dst.ne[2] != b.ne[2] ||
      dst.ne[3] != b.ne[3])
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT shapes do not fit: a {}, b {}, dst {}", a.describe(),
          b.describe(), dst.describe());
  if (is_quantized(a.type) && !a.rows_contiguous())
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT quantized weights {} need whole rows", a.describe());
  if (dst.nb[0] != sizeof(float))
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT result {} must be contiguous in dim 0", dst.describe());
  return {a.ne[0], a.ne[1], b.ne[1], b.ne[2], b.ne[3], b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]};
}

inline float* dst_at(const Tensor& dst, int64_t m, int64_t n, int64_t i2, int64_t i3) {
  return reinterpret_cast<float*>(dst.at(m, n, i2, i3));
}

void fill_zero(const Tensor& dst) {
  for (int64_t i3 = 0; i3 < dst.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < dst.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < dst.ne[1]; ++i1) std::fill_n(dst_at(dst, 0, i1, i2, i3), dst.ne[0], 0.0f);
}

// ---------------------------------------------------------------- reference

// Q4_1 and Q5_1 weights add their minimum m times the sum of b's block, which ggml takes from b's
// Q8_1 blocks: s = fp16(sum(q) * amax / 127) (the Q8_1 quants and scale are Q8_0's).
bool has_min(DType type) { return type == DType::Q4_1 || type == DType::Q5_1; }

float block_min(const Tensor& a, int64_t m, int64_t i2, int64_t i3, int64_t j) {
  uint16_t h;  // m follows d at the start of both block types
  std::memcpy(&h, a.at(0, m, i2, i3) + static_cast<size_t>(j) * traits(a.type).block_bytes + 2, 2);
  return fp16_to_fp32(h);
}

// b's row as the reference multiplies it by weights of `type` (ggml's semantics): rounded to f16 for
// F16 weights, to bf16 for BF16 weights, through Q8_0 blocks (Q8_K for the 256-element types) for the
// quantized ones; for Q4_1/Q5_1 weights sum_fix[j] gets what block j's Q8_1 sum adds beyond the sum of its
// Q8_0 values.
void reference_b_row(DType type, float* row, int64_t k, double* sum_fix) {
  const int64_t nblocks = k / kQuantBlock;
  if (type == DType::F16)
    for (int64_t i = 0; i < k; ++i) row[i] = fp16_to_fp32(fp32_to_fp16(row[i]));
  if (type == DType::BF16)
    for (int64_t i = 0; i < k; ++i) row[i] = bf16_to_fp32(fp32_to_bf16(row[i]));
  if (traits(type).block_size == kSuperBlock) {
    std::vector<BlockQ8_K> q(static_cast<size_t>(k / kSuperBlock));
    ref::quantize_row_q8_k(row, q.data(), k);
    ref::dequantize_row_q8_k(q.data(), row, k);
  } else if (is_quantized(type)) {
    std::vector<BlockQ8_0> q(static_cast<size_t>(nblocks));
    ref::quantize_row_q8_0(row, q.data(), k);
    for (int64_t j = 0; has_min(type) && j < nblocks; ++j) {
      float amax = 0.0f;
      int sum = 0;
      for (int i = 0; i < kQuantBlock; ++i) {
        amax = std::fmax(amax, std::fabs(row[j * kQuantBlock + i]));
        sum += q[static_cast<size_t>(j)].qs[i];
      }
      const double d = fp16_to_fp32(q[static_cast<size_t>(j)].d);
      const float q8_1_sum = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * (amax / 127.0f)));
      sum_fix[j] = q8_1_sum - d * sum;
    }
    ref::dequantize_row_q8_0(q.data(), row, k);
  }
}

// Weight row m of matrix (i2, i3) as f32 (native: a row's bytes, for weights in the interleaved layout).
void reference_a_row(const Tensor& a, int64_t m, int64_t i2, int64_t i3, float* out,
                     std::vector<char>& native) {
  if (is_interleaved(a)) {  // (a 3-D tensor's matrices start groups at their ggml offsets)
    native.resize(a.row_size());
    from_interleaved(a, a.data, static_cast<size_t>(m) * a.nb[1] + static_cast<size_t>(i2) * a.nb[2],
                     native.size(), native.data());
    to_f32_row(a.type, native.data(), out, a.ne[0]);
  } else {
    load_row_f32(a, m, i2, i3, out);
  }
}

// The exact sum of weight row m (arow, of matrix (i2, i3)) times a prepared reference b row, in double.
double reference_dot(const Tensor& a, const float* arow, int64_t m, int64_t i2, int64_t i3, const float* brow,
                     const double* sum_fix) {
  const int64_t k = a.ne[0];
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(arow[i]) * static_cast<double>(brow[i]);
  if (has_min(a.type))
    for (int64_t j = 0; j < k / kQuantBlock; ++j) sum += block_min(a, m, i2, i3, j) * sum_fix[j];
  return sum;
}

void run_reference(const ComputeContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b,
                   const Shape& s) {
  auto* brows = reinterpret_cast<float*>(ctx.scratch_memory(static_cast<size_t>(s.n * s.k) * sizeof(float)));
  const int64_t nblocks = s.k / kQuantBlock;
  std::vector<double> sum_fix(static_cast<size_t>(s.n * nblocks));
  for (int64_t i3 = 0; i3 < s.b3; ++i3) {
    for (int64_t i2 = 0; i2 < s.b2; ++i2) {
      for (int64_t n = 0; n < s.n; ++n) {
        float* row = brows + n * s.k;
        load_row_f32(b, n, i2, i3, row);
        reference_b_row(a.type, row, s.k, sum_fix.data() + n * nblocks);
      }
      ctx.parallel_for(s.m, [&](int64_t m0, int64_t m1) {
        std::vector<float> arow(static_cast<size_t>(s.k));
        std::vector<char> native;
        for (int64_t m = m0; m < m1; ++m) {
          reference_a_row(a, m, i2 / s.r2, i3 / s.r3, arow.data(), native);
          for (int64_t n = 0; n < s.n; ++n)
            *dst_at(dst, m, n, i2, i3) = static_cast<float>(reference_dot(
                a, arow.data(), m, i2 / s.r2, i3 / s.r3, brows + n * s.k, sum_fix.data() + n * nblocks));
        }
      });
    }
  }
}

// ---------------------------------------------------------------- fast

mm::WeightKind kind_of(DType type) {
  switch (type) {
    case DType::F16:
      return mm::WeightKind::F16;
    case DType::BF16:
      return mm::WeightKind::BF16;
    case DType::Q4_0:
      return mm::WeightKind::Q4_0;
    case DType::Q8_0:
      return mm::WeightKind::Q8_0;
    case DType::Q4_1:
      return mm::WeightKind::Q4_1;
    case DType::Q5_0:
      return mm::WeightKind::Q5_0;
    case DType::Q5_1:
      return mm::WeightKind::Q5_1;
    case DType::IQ4_NL:
      return mm::WeightKind::IQ4_NL;
    case DType::MXFP4:
      return mm::WeightKind::MXFP4;
    case DType::Q2_K:
      return mm::WeightKind::Q2_K;
    case DType::Q3_K:
      return mm::WeightKind::Q3_K;
    case DType::Q4_K:
      return mm::WeightKind::Q4_K;
    case DType::Q5_K:
      return mm::WeightKind::Q5_K;
    case DType::Q6_K:
      return mm::WeightKind::Q6_K;
    case DType::IQ4_XS:
      return mm::WeightKind::IQ4_XS;
    case DType::IQ2_XXS:
      return mm::WeightKind::IQ2_XXS;
    case DType::IQ2_XS:
      return mm::WeightKind::IQ2_XS;
    case DType::IQ2_S:
      return mm::WeightKind::IQ2_S;
    case DType::IQ3_XXS:
      return mm::WeightKind::IQ3_XXS;
    case DType::IQ3_S:
      return mm::WeightKind::IQ3_S;
    case DType::IQ1_S:
      return mm::WeightKind::IQ1_S;
    case DType::IQ1_M:
      return mm::WeightKind::IQ1_M;
    default:
      return mm::WeightKind::F32;
  }
}

// Cache budgets (bytes): the b micro-panel (RN rows x KC) stays in L1 while RM weight rows stream
// past it; the weight panel (MC rows x KC) stays in L2 while the item's b columns pass over it.
constexpr size_t kL1Panel = 16 * 1024;
constexpr size_t kL2Panel = 256 * 1024;
constexpr int64_t kMatVecChunksPerThread = 4;

// Columns of the float and most quantized tiles (4 rows x 3 columns: 12 accumulators of 16 registers).
constexpr int kFloatTileRN = 3;

struct Blocking {
  int rm, rn;
  int64_t kc, mc, nc;
};

Blocking choose_blocking(const Shape& s, DType type, double a_bytes_per_elem, bool wide, bool matvec,
                         bool interleaved, bool pairs, bool a_direct, int threads) {
  // Tile shapes measured on Zen 3 (AVX2): the largest that keep accumulators in 16 registers.
  const bool quant = is_quantized(type);
  Blocking bl{};
  if (interleaved) {
    // One group of interleaved rows (two where the table has kernels for pairs of groups) against
    // up to kMaxRN columns (float weights: as many as their ggml-layout tiles take, which the kernel
    // runs on each half of the group).
    const bool paired = pairs && s.n > 1;
    bl.rm = paired ? 2 * kInterleaveRows : kInterleaveRows;
    bl.rn = s.n == 1 ? 1 : paired ? mm::kWideRN : quant ? mm::kMaxRN : kFloatTileRN;
  } else if (s.n == 1) {
    // Matrix-vector: several weight rows (one accumulator chain each) share each load of b, up to
    // kMatVecRows with a matrix-vector kernel; the weights stream through once, so K is not split.
    bl.rm = matvec ? mm::kMatVecRows : 4;
    bl.rn = 1;
  } else if (type == DType::Q4_0) {
    bl.rm = 2;
    bl.rn = 4;
  } else if (traits(type).block_size == kSuperBlock) {
    // K-quant tiles run their rows one after another: the widest tile shares each row's unpacked
    // quants and scales among the most b columns.
    bl.rm = mm::kMaxRM;
    bl.rn = wide ? mm::kWideRN : mm::kMaxRN;
  } else {
    // Float weights: the table's 4 x 8 tile where it has one (AVX-512), else 4 x 3.
    const bool float_wide = wide && !quant;
    bl.rm = 4;
    bl.rn = float_wide ? mm::kWideRN : kFloatTileRN;
  }
  const double b_bytes_per_elem = quant ? 1.25 : type == DType::BF16 ? 2.0 : 4.0;
  if (s.n <= bl.rn) {
    bl.kc = s.k;  // b is read once per weight row anyway: nothing to keep in L1
  } else {
    const auto kc = static_cast<int64_t>(static_cast<double>(kL1Panel) / (bl.rn * b_bytes_per_elem));
    bl.kc = std::max<int64_t>(mm::kRangeAlign, kc / mm::kRangeAlign * mm::kRangeAlign);
    if (bl.kc >= s.k) bl.kc = s.k;
  }
  const auto mc =
      static_cast<int64_t>(static_cast<double>(kL2Panel) / (static_cast<double>(bl.kc) * a_bytes_per_elem));
  bl.mc = std::clamp<int64_t>(mc / bl.rm * bl.rm, bl.rm, 256);
  if (s.n == 1 && a_direct) {
    // Matrix-vector: each weight is read once, so there is no panel to keep in L2. The rows go in
    // equal chunks (whole passes), a few per thread, so the threads finish together however the pool
    // hands them out (an FFN matrix of 2816 rows in 256-row chunks left one thread 6 and the other 5).
    const int64_t parts = kMatVecChunksPerThread * std::max(threads, 1);
    const int64_t rows = (s.m + parts - 1) / parts;
    bl.mc = std::max<int64_t>(bl.rm, (rows + bl.rm - 1) / bl.rm * bl.rm);
  }
  bl.nc = std::min<int64_t>(s.n, 64);
  return bl;
}

char* align64(char* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<char*>((u + 63) & ~uintptr_t{63});
}

// Where the prepared b rows are: row (n, i2, i3) at base + n*nb1 + i2*nb2 + i3*nb3.
struct PreparedB {
  const char* base;
  size_t nb1, nb2, nb3;
};

// Reads b's row (n, i2, i3) as f32 into out, or returns a direct pointer when it already is.
const float* b_row_f32(const Tensor& b, int64_t n, int64_t i2, int64_t i3, float* out,
                       const mm::KernelTable& kt) {
  const char* row = b.at(0, n, i2, i3);
  if (b.type == DType::F32 && b.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(row);
  if (b.type == DType::F16 && b.nb[0] == sizeof(uint16_t)) {
    kt.f16_to_f32_row(reinterpret_cast<const uint16_t*>(row), out, b.ne[0]);
    return out;
  }
  for (int64_t k = 0; k < b.ne[0]; ++k) out[k] = load_f32(b.type, row + k * b.nb[0]);
  return out;
}

// out = in rounded to f16 (in == out allowed), through convert.h's vectorized rows.
void round_row_to_f16(const float* in, float* out, int64_t k) {
  constexpr int64_t kChunk = 256;
  uint16_t halves[kChunk];
  for (int64_t i = 0; i < k; i += kChunk) {
    const int64_t n = std::min(kChunk, k - i);
    fp32_to_fp16_row(in + i, halves, n);
    fp16_to_fp32_row(halves, out + i, n);
  }
}

// Bytes of one prepared b row of k elements (a multiple of 64).
size_t prepared_row_bytes(mm::Activation act, int64_t k) {
  switch (act) {
    case mm::Activation::Q8K:
      return mm::q8k_row_bytes(k);
    case mm::Activation::Q8:
      return mm::q8_row_bytes(k);
    case mm::Activation::BF16:
      return mm::bf16_row_bytes(k);
    case mm::Activation::F32:
    case mm::Activation::F16:
      break;
  }
  return (static_cast<size_t>(k) * sizeof(float) + 63) / 64 * 64;
}

// True when b's rows serve as prepared rows as they are (f32 rows for f32 activations).
bool b_is_prepared(const Tensor& b, mm::Activation act) {
  return act == mm::Activation::F32 && b.type == DType::F32 && b.nb[0] == sizeof(float);
}

// Prepares b's s.n x s.b2 x s.b3 rows into `memory` (64-byte aligned, s.n * s.b2 * s.b3 prepared
// rows; nullptr: the node's scratch memory), or points at b itself when its rows serve as they are.
PreparedB prepare_b(const ComputeContext& ctx, const Tensor& b, const Shape& s, mm::Activation act,
                    const mm::KernelTable& kt, char* memory = nullptr) {
  const bool quant = act == mm::Activation::Q8 || act == mm::Activation::Q8K;
  if (b_is_prepared(b, act)) return {static_cast<const char*>(b.data), b.nb[1], b.nb[2], b.nb[3]};
  const size_t row = prepared_row_bytes(act, s.k);
  const int64_t rows = s.n * s.b2 * s.b3;
  char* base = memory != nullptr ? memory : align64(ctx.scratch_memory(static_cast<size_t>(rows) * row + 64));
  ctx.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> tmp(static_cast<size_t>(s.k));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r % s.n, i2 = (r / s.n) % s.b2, i3 = r / (s.n * s.b2);
      char* out = base + static_cast<size_t>(r) * row;
      if (act == mm::Activation::Q8K) {
        kt.quantize_q8k_row(b_row_f32(b, n, i2, i3, tmp.data(), kt), out, s.k);
        if (kt.pair_q8k_row != nullptr) kt.pair_q8k_row(out, s.k);
      } else if (quant) {
        kt.quantize_q8_row(b_row_f32(b, n, i2, i3, tmp.data(), kt), out, s.k);
      } else if (act == mm::Activation::BF16) {
        fp32_to_bf16_row(b_row_f32(b, n, i2, i3, tmp.data(), kt), reinterpret_cast<uint16_t*>(out), s.k);
      } else {
        auto* o = reinterpret_cast<float*>(out);
        const float* x = b_row_f32(b, n, i2, i3, o, kt);
        if (act == mm::Activation::F16 && b.type != DType::F16)
          round_row_to_f16(x, o, s.k);
        else if (x != o)
          std::memcpy(o, x, static_cast<size_t>(s.k) * sizeof(float));
      }
    }
  });
  return {base, row, row * static_cast<size_t>(s.n), row * static_cast<size_t>(s.n * s.b2)};
}

// The fast path's kernels and cache blocking for one weight tensor and product shape, and the work
// of one item: a chunk of weight rows of one matrix against a chunk of prepared b columns.
class TileDriver {
 public:
  // Per-thread work memory (grown on demand, kept across items).
  struct Work {
    std::vector<float> acc;
    std::vector<char> a_conv;
  };

  TileDriver(const Tensor& a, const Shape& s, const mm::KernelTable& kt, int threads)
      : a_(a), s_(s), kt_(kt) {
    const bool quant = is_quantized(a.type);
    // Float weights whose elements are strided are gathered into rows per block of rows: BF16 ones
    // as they are (their kernels define BF16's results), the others converted to f32.
    a_direct_ = quant || a.rows_contiguous();
    gather_bf16_ = !a_direct_ && a.type == DType::BF16;
    kind_ = a_direct_ || gather_bf16_ ? kind_of(a.type) : mm::WeightKind::F32;
    conv_elem_ = gather_bf16_ ? sizeof(uint16_t) : sizeof(float);
    const double a_bytes_per_elem = a_direct_ ? static_cast<double>(traits(a.type).block_bytes) /
                                                    static_cast<double>(traits(a.type).block_size)
                                              : static_cast<double>(conv_elem_);
    const int k = static_cast<int>(kind_);
    wide_ = kt.wide[k];
    matvec_ = s.n == 1 && kt.matvec[k][0] != nullptr ? kt.matvec[k] : nullptr;
    // Interleaved weights: whole groups through the interleaved kernels, the rows after the last
    // group (in ggml's blocks) through the others.
    if (in_interleaved_layout(a) && !is_interleaved(a))
      raise(ErrorCode::Unsupported, "CPU: MUL_MAT of {}, a view of interleaved weights", a.describe());
    group_rows_ = is_interleaved(a) ? interleaved_rows_per_matrix(a) : 0;
    interleaved_ = group_rows_ > 0 ? kt.interleaved[k] : nullptr;
    if (group_rows_ > 0 && interleaved_[0] == nullptr)
      raise(ErrorCode::Unsupported, "CPU: no {} kernels for interleaved {} weights", kt.isa, name(a.type));
    static_assert(kInterleaveRows == mm::kMatVecRows);
    pairs_ = group_rows_ > 0 && kt.interleaved_pair[k][0] != nullptr ? kt.interleaved_pair[k] : nullptr;
    bl_ = choose_blocking(s, a.type, a_bytes_per_elem, wide_ != nullptr, matvec_ != nullptr,
                          interleaved_ != nullptr, pairs_ != nullptr, a_direct_, threads);
    m_chunks_ = (s.m + bl_.mc - 1) / bl_.mc;
    n_chunks_ = (s.n + bl_.nc - 1) / bl_.nc;
    groups_m_ = (bl_.mc + bl_.rm - 1) / bl_.rm;
    groups_n_ = (bl_.nc + bl_.rn - 1) / bl_.rn;
    tile_state_ = static_cast<size_t>(bl_.rm * bl_.rn * mm::kAccLanes);
  }

  // From the weights' type, not the kernel's kind: strided F16 weights converted to f32 rows still
  // multiply b rounded to f16.
  mm::Activation activation() const noexcept { return mm::activation_of(kind_of(a_.type)); }
  // Items of one weight matrix: row chunks fastest, so one thread's consecutive items share their
  // b columns.
  int64_t items() const noexcept { return m_chunks_ * n_chunks_; }

  // Item `it` of weight matrix (i2, i3) against the s.n prepared b rows at b_rows (b_stride bytes
  // apart); element (m, n) goes to d[n * dst_stride + m].
  void run(int64_t it, int64_t i2, int64_t i3, const char* b_rows, size_t b_stride, float* d,
           size_t dst_stride, Work& w) const {
    const Shape& s = s_;
    const Blocking& bl = bl_;
    const int64_t mi = it % m_chunks_, ni = it / m_chunks_;
    const int64_t m_begin = mi * bl.mc, mm_count = std::min(bl.mc, s.m - m_begin);
    const int64_t n_begin = ni * bl.nc, nn_count = std::min(bl.nc, s.n - n_begin);
    if (bl.kc < s.k && w.acc.size() < static_cast<size_t>(groups_m_ * groups_n_) * tile_state_)
      w.acc.resize(static_cast<size_t>(groups_m_ * groups_n_) * tile_state_);
    const char* a_rows = a_.at(0, m_begin, i2, i3);
    size_t a_stride = a_.nb[1];
    if (!a_direct_) {
      a_stride = static_cast<size_t>(s.k) * conv_elem_;
      if (w.a_conv.size() < static_cast<size_t>(bl.mc) * a_stride)
        w.a_conv.resize(static_cast<size_t>(bl.mc) * a_stride);
      for (int64_t m = 0; m < mm_count; ++m) {
        char* out = w.a_conv.data() + static_cast<size_t>(m) * a_stride;
        if (gather_bf16_) {
          for (int64_t k = 0; k < s.k; ++k) std::memcpy(out + 2 * k, a_.at(k, m_begin + m, i2, i3), 2);
        } else {
          load_row_f32(a_, m_begin + m, i2, i3, reinterpret_cast<float*>(out));
        }
      }
      a_rows = w.a_conv.data();
    }
    b_rows += static_cast<size_t>(n_begin) * b_stride;
    d += static_cast<size_t>(n_begin) * dst_stride + static_cast<size_t>(m_begin);

    for (int64_t k0 = 0; k0 < s.k; k0 += bl.kc) {
      const int64_t k1 = std::min(s.k, k0 + bl.kc);
      for (int64_t n0 = 0; n0 < nn_count; n0 += bl.rn) {
        const int rn = static_cast<int>(std::min<int64_t>(bl.rn, nn_count - n0));
        for (int64_t m0 = 0; m0 < mm_count; m0 += bl.rm) {
          const int rm = static_cast<int>(std::min<int64_t>(bl.rm, mm_count - m0));
          mm::TileArgs t;
          t.a = a_rows + m0 * a_stride;
          t.a_stride = a_stride;
          t.b = b_rows + n0 * b_stride;
          t.b_stride = b_stride;
          t.k = s.k;
          t.k0 = k0;
          t.k1 = k1;
          t.acc =
              bl.kc < s.k ? w.acc.data() + ((n0 / bl.rn) * groups_m_ + m0 / bl.rm) * tile_state_ : nullptr;
          t.first = k0 == 0;
          t.last = k1 == s.k;
          t.dst = d + n0 * dst_stride + m0;
          t.dst_stride = dst_stride;
          if (interleaved_ != nullptr) {
            // Whole groups (one, or two where the table pairs them), then the rows after the last.
            const int grouped = static_cast<int>(std::clamp<int64_t>(group_rows_ - (m_begin + m0), 0, rm));
            if (grouped == 2 * kInterleaveRows) {
              pairs_[rn - 1](t);
            } else if (grouped == kInterleaveRows) {
              for (int c0 = 0; c0 < rn; c0 += mm::kMaxRN) {  // kMaxRN columns at a time
                mm::TileArgs part = t;
                part.b = t.b + c0 * b_stride;
                part.dst = t.dst + c0 * dst_stride;
                part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>(c0 * mm::kAccLanes);
                interleaved_[std::min(rn - c0, mm::kMaxRN) - 1](part);
              }
            }
            // The rows after the last group: kMaxRM at a time (or all at once by matrix-vector).
            const int step = matvec_ != nullptr ? rm - grouped : mm::kMaxRM;
            for (int r0 = grouped; r0 < rm; r0 += step) {
              mm::TileArgs part = t;
              part.a = t.a + r0 * a_stride;
              part.dst = t.dst + r0;
              part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>(r0 * rn * mm::kAccLanes);
              run_ggml_blocks(part, std::min(step, rm - r0), rn);
            }
            continue;
          }
          run_ggml_blocks(t, rm, rn);
        }
      }
    }
  }

 private:
  // One tile of rm weight rows in ggml's blocks x rn columns.
  void run_ggml_blocks(const mm::TileArgs& t, int rm, int rn) const {
    if (matvec_ != nullptr) return matvec_[rm - 1](t);
    if (wide_ != nullptr && rm == mm::kMaxRM && rn == mm::kWideRN) return wide_(t);
    // Narrower than the wide tiles: columns kMaxRN at a time (each keeps its own acc part).
    for (int c0 = 0; c0 < rn; c0 += mm::kMaxRN) {
      const int cols = std::min(rn - c0, mm::kMaxRN);
      mm::TileArgs part = t;
      part.b = t.b + c0 * t.b_stride;
      part.dst = t.dst + c0 * t.dst_stride;
      part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>(rm * c0 * mm::kAccLanes);
      kt_.tile[static_cast<int>(kind_)][rm - 1][cols - 1](part);
    }
  }

  const Tensor& a_;
  Shape s_;
  const mm::KernelTable& kt_;
  bool a_direct_ = true, gather_bf16_ = false;
  mm::WeightKind kind_ = mm::WeightKind::F32;
  size_t conv_elem_ = sizeof(float);
  mm::TileFn wide_ = nullptr;
  const mm::TileFn* matvec_ = nullptr;
  int64_t group_rows_ = 0;
  const mm::TileFn* interleaved_ = nullptr;
  const mm::TileFn* pairs_ = nullptr;
  Blocking bl_{};
  int64_t m_chunks_ = 0, n_chunks_ = 0, groups_m_ = 0, groups_n_ = 0;
  size_t tile_state_ = 0;
};

void run_fast(const ComputeContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b,
              const Shape& s) {
  const mm::KernelTable& kt = mm::active_kernels();
  const TileDriver driver(a, s, kt, ctx.n_threads);
  const PreparedB pb = prepare_b(ctx, b, s, driver.activation(), kt);
  const int64_t per_matrix = driver.items();
  const size_t dst_stride = dst.nb[1] / sizeof(float);
  ctx.parallel_for(per_matrix * s.b2 * s.b3, [&](int64_t it0, int64_t it1) {
    TileDriver::Work w;
    for (int64_t it = it0; it < it1; ++it) {
      const int64_t batch = it / per_matrix;
      const int64_t i2 = batch % s.b2, i3 = batch / s.b2;
      driver.run(it % per_matrix, i2 / s.r2, i3 / s.r3, pb.base + i2 * pb.nb2 + i3 * pb.nb3, pb.nb1,
                 dst_at(dst, 0, 0, i2, i3), dst_stride, w);
    }
  });
}

// ---------------------------------------------------------------- MUL_MAT_ID

struct IdShape {
  int64_t k, m, n_as, n_used, n_tokens, b1;
};

IdShape check_id(const Tensor& dst, const Tensor& as, const Tensor& b, const Tensor& ids) {
  const bool as_ok = op_source_types(Op::MulMatId, 0).contains(as.type);
  if (!as_ok || (b.type != DType::F32 && b.type != DType::F16) || ids.type != DType::I32 ||
      dst.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: MUL_MAT_ID of {} weights by {} ({} ids) into {} is not supported",
          name(as.type), name(b.type), name(ids.type), name(dst.type));
  if (as.ne[0] != b.ne[0] || as.ne[3] != 1 || b.ne[3] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1 ||
      ids.ne[1] != b.ne[2] || b.ne[1] <= 0 || ids.ne[0] % b.ne[1] != 0 || dst.ne[0] != as.ne[1] ||
      dst.ne[1] != ids.ne[0] || dst.ne[2] != b.ne[2] || dst.ne[3] != 1)
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT_ID shapes do not fit: as {}, b {}, ids {}, dst {}",
          as.describe(), b.describe(), ids.describe(), dst.describe());
  if (is_quantized(as.type) && !as.rows_contiguous())
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT_ID quantized weights {} need whole rows", as.describe());
  if (dst.nb[0] != sizeof(float))
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT_ID result {} must be contiguous in dim 0",
          dst.describe());
  const IdShape s{as.ne[0], as.ne[1], as.ne[2], ids.ne[0], ids.ne[1], b.ne[1]};
  // Every id is checked before any weight is read.
  for (int64_t t = 0; t < s.n_tokens; ++t)
    for (int64_t e = 0; e < s.n_used; ++e) {
      int32_t x;
      std::memcpy(&x, ids.at(e, t), sizeof x);
      if (x < 0 || x >= s.n_as)
        raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT_ID id {} at [{}, {}] is outside [0, {}) of {}", x, e,
              t, s.n_as, as.describe());
    }
  return s;
}

int32_t id_at(const Tensor& ids, int64_t e, int64_t t) {
  int32_t x;
  std::memcpy(&x, ids.at(e, t), sizeof x);
  return x;
}

void run_reference_id(const ComputeContext& ctx, const Tensor& dst, const Tensor& as, const Tensor& b,
                      const Tensor& ids, const IdShape& s) {
  // b's rows, each prepared once for the weight type.
  const int64_t rows = s.b1 * s.n_tokens, nblocks = s.k / kQuantBlock;
  auto* brows = reinterpret_cast<float*>(ctx.scratch_memory(static_cast<size_t>(rows * s.k) * sizeof(float)));
  std::vector<double> sum_fix(static_cast<size_t>(rows * nblocks));
  for (int64_t r = 0; r < rows; ++r) {
    load_row_f32(b, r % s.b1, r / s.b1, 0, brows + r * s.k);
    reference_b_row(as.type, brows + r * s.k, s.k, sum_fix.data() + r * nblocks);
  }
  ctx.parallel_for(s.n_used * s.n_tokens, [&](int64_t p0, int64_t p1) {
    std::vector<float> arow(static_cast<size_t>(s.k));
    std::vector<char> native;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t e = p % s.n_used, t = p / s.n_used, x = id_at(ids, e, t);
      const int64_t r = e % s.b1 + t * s.b1;
      for (int64_t m = 0; m < s.m; ++m) {
        reference_a_row(as, m, x, 0, arow.data(), native);
        *dst_at(dst, m, e, t, 0) = static_cast<float>(
            reference_dot(as, arow.data(), m, x, 0, brows + r * s.k, sum_fix.data() + r * nblocks));
      }
    }
  });
}

// Fast: b's rows are prepared once (as MUL_MAT prepares them for the weight type), the (expert
// slot, token) pairs are grouped by expert, each group's prepared rows are gathered into a panel,
// and each expert's matrix multiplies its panel with MUL_MAT's tile driver (so each expert's weights
// are read once per batch, and a single token runs the matrix-vector kernels); the panels' results
// are then scattered to their places. Every output has the bits MUL_MAT gives its column, whatever
// else the batch holds.
void run_fast_id(const ComputeContext& ctx, const Tensor& dst, const Tensor& as, const Tensor& b,
                 const Tensor& ids, const IdShape& s) {
  const mm::KernelTable& kt = mm::active_kernels();
  // The pairs p = e + t * n_used by expert, in token order.
  const int64_t n_pairs = s.n_used * s.n_tokens;
  std::vector<int64_t> first(static_cast<size_t>(s.n_as + 1), 0), order(static_cast<size_t>(n_pairs));
  for (int64_t p = 0; p < n_pairs; ++p)
    ++first[static_cast<size_t>(id_at(ids, p % s.n_used, p / s.n_used)) + 1];
  for (int64_t x = 0; x < s.n_as; ++x) first[static_cast<size_t>(x + 1)] += first[static_cast<size_t>(x)];
  {
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t p = 0; p < n_pairs; ++p)
      order[static_cast<size_t>(next[static_cast<size_t>(id_at(ids, p % s.n_used, p / s.n_used))]++)] = p;
  }
  // One driver per expert in use (its column count decides tiles or matrix-vector).
  std::vector<int64_t> used;
  std::vector<TileDriver> drivers;
  std::vector<int64_t> item_end;  // cumulative items over the drivers
  for (int64_t x = 0; x < s.n_as; ++x) {
    const int64_t n = first[static_cast<size_t>(x + 1)] - first[static_cast<size_t>(x)];
    if (n == 0) continue;
    used.push_back(x);
    drivers.emplace_back(as, Shape{s.k, s.m, n, 1, 1, 1, 1}, kt, ctx.n_threads);
    item_end.push_back((item_end.empty() ? 0 : item_end.back()) + drivers.back().items());
  }
  if (drivers.empty()) return;
  const mm::Activation act = drivers.front().activation();

  // Scratch: b prepared (unless its rows serve as they are), the panels, the panels' results.
  const size_t row = prepared_row_bytes(act, s.k);
  const bool direct = b_is_prepared(b, act);
  const size_t prepared_bytes = direct ? 0 : static_cast<size_t>(s.b1 * s.n_tokens) * row;
  const size_t panel_bytes = static_cast<size_t>(n_pairs) * row;
  const size_t out_bytes = static_cast<size_t>(n_pairs * s.m) * sizeof(float);
  char* base = align64(ctx.scratch_memory(prepared_bytes + panel_bytes + out_bytes + 64));
  const PreparedB pb =
      prepare_b(ctx, b, Shape{s.k, s.m, s.b1, s.n_tokens, 1, 1, 1}, act, kt, direct ? nullptr : base);
  char* panels = base + prepared_bytes;
  auto* out = reinterpret_cast<float*>(panels + panel_bytes);
  const size_t copy_bytes = direct ? static_cast<size_t>(s.k) * sizeof(float) : row;
  auto b_row = [&](int64_t p) { return pb.base + (p % s.n_used % s.b1) * pb.nb1 + p / s.n_used * pb.nb2; };
  auto dst_column = [&](int64_t p) { return dst_at(dst, 0, p % s.n_used, p / s.n_used, 0); };
  // An expert with a single pair (every expert of a generation step) reads its b row where it is and
  // writes its column in place; the others' pairs go through the panels.
  std::vector<int64_t> paneled;
  for (const int64_t x : used)
    if (first[static_cast<size_t>(x + 1)] - first[static_cast<size_t>(x)] > 1)
      for (int64_t j = first[static_cast<size_t>(x)]; j < first[static_cast<size_t>(x + 1)]; ++j)
        paneled.push_back(j);
  const auto n_paneled = static_cast<int64_t>(paneled.size());
  if (n_paneled > 0)
    ctx.parallel_for(n_paneled, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t j = paneled[static_cast<size_t>(i)];
        std::memcpy(panels + static_cast<size_t>(j) * row, b_row(order[static_cast<size_t>(j)]), copy_bytes);
      }
    });

  ctx.parallel_for(item_end.back(), [&](int64_t it0, int64_t it1) {
    TileDriver::Work w;
    for (int64_t it = it0; it < it1; ++it) {
      const auto i =
          static_cast<size_t>(std::upper_bound(item_end.begin(), item_end.end(), it) - item_end.begin());
      const int64_t x = used[i], j0 = first[static_cast<size_t>(x)];
      const int64_t item = it - (i == 0 ? 0 : item_end[i - 1]);
      if (first[static_cast<size_t>(x + 1)] - j0 == 1) {
        const int64_t p = order[static_cast<size_t>(j0)];
        drivers[i].run(item, x, 0, b_row(p), row, dst_column(p), static_cast<size_t>(s.m), w);
      } else {
        drivers[i].run(item, x, 0, panels + static_cast<size_t>(j0) * row, row, out + j0 * s.m,
                       static_cast<size_t>(s.m), w);
      }
    }
  });

  if (n_paneled > 0)
    ctx.parallel_for(n_paneled, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t j = paneled[static_cast<size_t>(i)];
        std::memcpy(dst_column(order[static_cast<size_t>(j)]), out + j * s.m,
                    static_cast<size_t>(s.m) * sizeof(float));
      }
    });
}

}  // namespace

void run_mul_mat(const ComputeContext& ctx, Tensor& dst) {
  const Tensor* a = dst.src[0];
  const Tensor* b = dst.src[1];
  if (a == nullptr || b == nullptr)
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT node {} lacks a source", dst.describe());
  const Shape s = check(dst, *a, *b);
  if (s.k == 0) return fill_zero(dst);
  if (ctx.reference())
    run_reference(ctx, dst, *a, *b, s);
  else
    run_fast(ctx, dst, *a, *b, s);
}

void run_mul_mat_id(const ComputeContext& ctx, Tensor& dst) {
  const Tensor* as = dst.src[0];
  const Tensor* b = dst.src[1];
  const Tensor* ids = dst.src[2];
  if (as == nullptr || b == nullptr || ids == nullptr)
    raise(ErrorCode::InvalidArgument, "CPU: MUL_MAT_ID node {} lacks a source", dst.describe());
  const IdShape s = check_id(dst, *as, *b, *ids);
  if (s.k == 0) return fill_zero(dst);
  if (ctx.reference())
    run_reference_id(ctx, dst, *as, *b, *ids, s);
  else
    run_fast_id(ctx, dst, *as, *b, *ids, s);
}

}  // namespace tessera::cpu
