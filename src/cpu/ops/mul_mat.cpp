// MUL_MAT on the CPU: dst[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3].
//
// Reference: each weight row converted to f32, dotted with b's row in double (for quantized weights b
// goes through Q8_0 or Q8_K first, for BF16 weights it is rounded to bf16, as ggml's CPU does). Fast:
// b is prepared once (Q8_0 or Q8_K blocks for quantized weights, bf16 rows for BF16 weights, f32
// rows otherwise) and tile kernels (mul_mat_kernels.h)
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

void run_reference(const ComputeContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b,
                   const Shape& s) {
  auto* brows = reinterpret_cast<float*>(ctx.scratch_memory(static_cast<size_t>(s.n * s.k) * sizeof(float)));
  const bool mins = has_min(a.type);
  const bool interleaved = is_interleaved(a);
  const int64_t nblocks = s.k / kQuantBlock;
  // Per b block of Q4_1/Q5_1: what the Q8_1 sum adds beyond the sum of the block's Q8_0 values.
  std::vector<double> sum_fix(mins ? static_cast<size_t>(s.n * nblocks) : 0);
  for (int64_t i3 = 0; i3 < s.b3; ++i3) {
    for (int64_t i2 = 0; i2 < s.b2; ++i2) {
      for (int64_t n = 0; n < s.n; ++n) {
        float* row = brows + n * s.k;
        load_row_f32(b, n, i2, i3, row);
        if (a.type == DType::BF16)
          for (int64_t k = 0; k < s.k; ++k) row[k] = bf16_to_fp32(fp32_to_bf16(row[k]));
        // ggml's semantics for quantized weights: b is quantized to Q8_0 blocks (Q8_K for the
        // 256-element types) first, then the block products are summed (here exactly, in double,
        // from the dequantized values).
        if (traits(a.type).block_size == kSuperBlock) {
          std::vector<BlockQ8_K> q(static_cast<size_t>(s.k / kSuperBlock));
          ref::quantize_row_q8_k(row, q.data(), s.k);
          ref::dequantize_row_q8_k(q.data(), row, s.k);
        } else if (is_quantized(a.type)) {
          std::vector<BlockQ8_0> q(static_cast<size_t>(nblocks));
          ref::quantize_row_q8_0(row, q.data(), s.k);
          for (int64_t j = 0; mins && j < nblocks; ++j) {
            float amax = 0.0f;
            int sum = 0;
            for (int i = 0; i < kQuantBlock; ++i) {
              amax = std::fmax(amax, std::fabs(row[j * kQuantBlock + i]));
              sum += q[static_cast<size_t>(j)].qs[i];
            }
            const double d = fp16_to_fp32(q[static_cast<size_t>(j)].d);
            const float q8_1_sum = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * (amax / 127.0f)));
            sum_fix[static_cast<size_t>(n * nblocks + j)] = q8_1_sum - d * sum;
          }
          ref::dequantize_row_q8_0(q.data(), row, s.k);
        }
      }
      ctx.parallel_for(s.m, [&](int64_t m0, int64_t m1) {
        std::vector<float> arow(static_cast<size_t>(s.k));
        std::vector<char> native(interleaved ? a.row_size() : 0);
        for (int64_t m = m0; m < m1; ++m) {
          if (interleaved) {  // (2-D weights: i2 = i3 = 0)
            from_interleaved(a, a.data, static_cast<size_t>(m) * a.nb[1], native.size(), native.data());
            to_f32_row(a.type, native.data(), arow.data(), s.k);
          } else {
            load_row_f32(a, m, i2 / s.r2, i3 / s.r3, arow.data());
          }
          for (int64_t n = 0; n < s.n; ++n) {
            const float* brow = brows + n * s.k;
            double sum = 0.0;
            for (int64_t k = 0; k < s.k; ++k)
              sum += static_cast<double>(arow[k]) * static_cast<double>(brow[k]);
            for (int64_t j = 0; mins && j < nblocks; ++j)
              sum += block_min(a, m, i2 / s.r2, i3 / s.r3, j) * sum_fix[static_cast<size_t>(n * nblocks + j)];
            *dst_at(dst, m, n, i2, i3) = static_cast<float>(sum);
          }
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

PreparedB prepare_b(const ComputeContext& ctx, const Tensor& b, const Shape& s, mm::Activation act,
                    const mm::KernelTable& kt) {
  const bool quant = act == mm::Activation::Q8 || act == mm::Activation::Q8K;
  if (act == mm::Activation::F32 && b.type == DType::F32 && b.nb[0] == sizeof(float))
    return {static_cast<const char*>(b.data), b.nb[1], b.nb[2], b.nb[3]};
  const size_t row = act == mm::Activation::Q8K    ? mm::q8k_row_bytes(s.k)
                     : quant                       ? mm::q8_row_bytes(s.k)
                     : act == mm::Activation::BF16 ? mm::bf16_row_bytes(s.k)
                                                   : (static_cast<size_t>(s.k) * sizeof(float) + 63) / 64 * 64;
  const int64_t rows = s.n * s.b2 * s.b3;
  char* base = align64(ctx.scratch_memory(static_cast<size_t>(rows) * row + 64));
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
        if (x != o) std::memcpy(o, x, static_cast<size_t>(s.k) * sizeof(float));
      }
    }
  });
  return {base, row, row * static_cast<size_t>(s.n), row * static_cast<size_t>(s.n * s.b2)};
}

void run_fast(const ComputeContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b,
              const Shape& s) {
  const mm::KernelTable& kt = mm::active_kernels();
  const bool quant = is_quantized(a.type);
  // Float weights whose elements are strided are gathered into rows per block of rows: BF16 ones as
  // they are (their kernels define BF16's results), the others converted to f32.
  const bool a_direct = quant || a.rows_contiguous();
  const bool gather_bf16 = !a_direct && a.type == DType::BF16;
  const mm::WeightKind kind = a_direct || gather_bf16 ? kind_of(a.type) : mm::WeightKind::F32;
  const size_t conv_elem = gather_bf16 ? sizeof(uint16_t) : sizeof(float);
  const double a_bytes_per_elem = a_direct ? static_cast<double>(traits(a.type).block_bytes) /
                                                 static_cast<double>(traits(a.type).block_size)
                                           : static_cast<double>(conv_elem);
  const mm::TileFn wide = kt.wide[static_cast<int>(kind)];
  const mm::TileFn* matvec = s.n == 1 && kt.matvec[static_cast<int>(kind)][0] != nullptr
                                 ? kt.matvec[static_cast<int>(kind)]
                                 : nullptr;
  // Interleaved weights: whole groups through the interleaved kernels, the rows after the last
  // group (in ggml's blocks) through the others.
  if (in_interleaved_layout(a) && !is_interleaved(a))
    raise(ErrorCode::Unsupported, "CPU: MUL_MAT of {}, a view of interleaved weights", a.describe());
  const int64_t group_rows = is_interleaved(a) ? interleaved_rows(a) : 0;
  const mm::TileFn* interleaved = group_rows > 0 ? kt.interleaved[static_cast<int>(kind)] : nullptr;
  if (group_rows > 0 && interleaved[0] == nullptr)
    raise(ErrorCode::Unsupported, "CPU: no {} kernels for interleaved {} weights", kt.isa, name(a.type));
  static_assert(kInterleaveRows == mm::kMatVecRows);
  const mm::TileFn* pairs = group_rows > 0 && kt.interleaved_pair[static_cast<int>(kind)][0] != nullptr
                                ? kt.interleaved_pair[static_cast<int>(kind)]
                                : nullptr;
  const Blocking bl = choose_blocking(s, a.type, a_bytes_per_elem, wide != nullptr, matvec != nullptr,
                                      interleaved != nullptr, pairs != nullptr, a_direct, ctx.n_threads);
  const PreparedB pb = prepare_b(ctx, b, s, mm::activation_of(kind), kt);

  const int64_t m_chunks = (s.m + bl.mc - 1) / bl.mc;
  const int64_t n_chunks = (s.n + bl.nc - 1) / bl.nc;
  const int64_t items = m_chunks * n_chunks * s.b2 * s.b3;
  const int64_t groups_m = (bl.mc + bl.rm - 1) / bl.rm;
  const int64_t groups_n = (bl.nc + bl.rn - 1) / bl.rn;
  const size_t tile_state = static_cast<size_t>(bl.rm * bl.rn * mm::kAccLanes);
  const size_t dst_stride = dst.nb[1] / sizeof(float);

  // One tile of rm weight rows in ggml's blocks x rn columns.
  const auto run_ggml_blocks = [&](const mm::TileArgs& t, int rm, int rn) {
    if (matvec != nullptr) return matvec[rm - 1](t);
    if (wide != nullptr && rm == mm::kMaxRM && rn == mm::kWideRN) return wide(t);
    // Narrower than the wide tiles: columns kMaxRN at a time (each keeps its own acc part).
    for (int c0 = 0; c0 < rn; c0 += mm::kMaxRN) {
      const int cols = std::min(rn - c0, mm::kMaxRN);
      mm::TileArgs part = t;
      part.b = t.b + c0 * pb.nb1;
      part.dst = t.dst + c0 * dst_stride;
      part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>(rm * c0 * mm::kAccLanes);
      kt.tile[static_cast<int>(kind)][rm - 1][cols - 1](part);
    }
  };

  // Items run weight-chunk fastest, so one thread's consecutive items share their b columns.
  ctx.parallel_for(items, [&](int64_t it0, int64_t it1) {
    std::vector<float> acc(bl.kc < s.k ? static_cast<size_t>(groups_m * groups_n) * tile_state : 0);
    std::vector<char> a_conv(a_direct ? 0 : static_cast<size_t>(bl.mc * s.k) * conv_elem);
    for (int64_t it = it0; it < it1; ++it) {
      const int64_t mi = it % m_chunks;
      const int64_t ni = (it / m_chunks) % n_chunks;
      const int64_t batch = it / (m_chunks * n_chunks);
      const int64_t i2 = batch % s.b2, i3 = batch / s.b2;
      const int64_t m_begin = mi * bl.mc, mm_count = std::min(bl.mc, s.m - m_begin);
      const int64_t n_begin = ni * bl.nc, nn_count = std::min(bl.nc, s.n - n_begin);

      const char* a_rows = a.at(0, m_begin, i2 / s.r2, i3 / s.r3);
      size_t a_stride = a.nb[1];
      if (!a_direct) {
        a_stride = static_cast<size_t>(s.k) * conv_elem;
        for (int64_t m = 0; m < mm_count; ++m) {
          char* out = a_conv.data() + static_cast<size_t>(m) * a_stride;
          if (gather_bf16) {
            for (int64_t k = 0; k < s.k; ++k)
              std::memcpy(out + 2 * k, a.at(k, m_begin + m, i2 / s.r2, i3 / s.r3), 2);
          } else {
            load_row_f32(a, m_begin + m, i2 / s.r2, i3 / s.r3, reinterpret_cast<float*>(out));
          }
        }
        a_rows = a_conv.data();
      }
      const char* b_rows = pb.base + n_begin * pb.nb1 + i2 * pb.nb2 + i3 * pb.nb3;
      float* d = dst_at(dst, m_begin, n_begin, i2, i3);

      for (int64_t k0 = 0; k0 < s.k; k0 += bl.kc) {
        const int64_t k1 = std::min(s.k, k0 + bl.kc);
        for (int64_t n0 = 0; n0 < nn_count; n0 += bl.rn) {
          const int rn = static_cast<int>(std::min<int64_t>(bl.rn, nn_count - n0));
          for (int64_t m0 = 0; m0 < mm_count; m0 += bl.rm) {
            const int rm = static_cast<int>(std::min<int64_t>(bl.rm, mm_count - m0));
            mm::TileArgs t;
            t.a = a_rows + m0 * a_stride;
            t.a_stride = a_stride;
            t.b = b_rows + n0 * pb.nb1;
            t.b_stride = pb.nb1;
            t.k = s.k;
            t.k0 = k0;
            t.k1 = k1;
            t.acc = acc.empty() ? nullptr : acc.data() + ((n0 / bl.rn) * groups_m + m0 / bl.rm) * tile_state;
            t.first = k0 == 0;
            t.last = k1 == s.k;
            t.dst = d + n0 * dst_stride + m0;
            t.dst_stride = dst_stride;
            if (interleaved != nullptr) {
              // Whole groups (one, or two where the table pairs them), then the rows after the last.
              const int grouped = static_cast<int>(std::clamp<int64_t>(group_rows - (m_begin + m0), 0, rm));
              if (grouped == 2 * kInterleaveRows) {
                pairs[rn - 1](t);
              } else if (grouped == kInterleaveRows) {
                for (int c0 = 0; c0 < rn; c0 += mm::kMaxRN) {  // kMaxRN columns at a time
                  mm::TileArgs part = t;
                  part.b = t.b + c0 * pb.nb1;
                  part.dst = t.dst + c0 * dst_stride;
                  part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>(c0 * mm::kAccLanes);
                  interleaved[std::min(rn - c0, mm::kMaxRN) - 1](part);
                }
              }
              // The rows after the last group: kMaxRM at a time (or all at once by matrix-vector).
              const int step = matvec != nullptr ? rm - grouped : mm::kMaxRM;
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

}  // namespace tessera::cpu
