// MUL_MAT on OpenCL (kernels/mul_mat.cl): dst[m, n, i2, i3] = sum_k a[k, m, i2/r2, i3/r3] * b[k, n, i2, i3].
//
// Weights F32, F16, BF16, Q8_0, Q4_0 (device layout, read in place), Q4_1, Q5_0, Q5_1, Q2_K..Q6_K,
// IQ4_NL, IQ4_XS, MXFP4 (ggml's blocks, read in place); b F32 or F16 with any strides (permuted views
// included); weights stretched over dims 2-3. Quantized weights multiply b rounded as llama.cpp's
// CPU rounds it (through Q8_0 for the 32-element types, through Q8_K for the super-block types),
// so results match the CPU's and llama.cpp's to float rounding. Two paths, chosen by the number
// of columns N of b:
//  - N < the GEMM threshold: matrix-vector kernels, a work-group per weight row and group of four
//    columns. Q4_0 / Q8_0 weights are dotted with b as Q8_0 blocks in integer arithmetic; the
//    other block types are decoded 32 elements at a time and dotted with the rounded b in f32.
//  - otherwise: CLBlast SGEMM per batch. F32 weights with contiguous rows are used in place; other
//    weights are converted to f32 tile by tile (rows of one weight batch) into pool scratch, and
//    a tile serves every batch of b that stretches it. b is rounded as on the other path, so both
//    paths compute the same products.
//
// MUL_MAT_ID (the experts' products of a MoE layer): b rounded as above, then a work-group per
// output (row, slot, token) dots the picked expert's row with it, for every weight type.
#include "opencl/ops/mul_mat.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/check.h"
#include "core/env.h"
#include "opencl/oplib.h"
#include "opencl/ops/group_launch.h"
#include "tessera/quant.h"

#ifdef TESSERA_HAVE_CLBLAST
#include <clblast_c.h>
#endif

namespace tessera::opencl {
namespace {

std::atomic<uint64_t> g_vec_runs{0};
std::atomic<uint64_t> g_gemm_runs{0};

constexpr int64_t kVecColumns = 4;        // MV_NC in mul_mat.cl
constexpr size_t kVecGroup = 64;          // MV_WG in mul_mat.cl
constexpr size_t kTileBytes = 32u << 20;  // f32 weight tile converted for one GEMM

// Columns of b (N) from which the GEMM path beats the matrix-vector kernels, by weight type: f32
// weights go to SGEMM in place; f16/bf16 weights are converted to f32 first; quantized weights
// are converted too and give up the integer Q8_0 dot products. Measured on PoCL 3.1 (OpenCL0 of
// two pthread devices, 2 AMD EPYC cores shared with other jobs, so +-20% noise), K = M = 4096,
// ms per MUL_MAT, matrix-vector / GEMM:
//   f32:  N=8 90/224, N=16 185/210, N=32 468/700, N=48 654/732, N=64 815/862, N=128 1509/1386
//   f16:  N=16 272/459, N=32 472/1197, N=64 1067/1716, N=96 1147/1146, N=128 1500/1365
//   q8_0: N=64 716/1242, N=128 1424/1758, N=256 2120/2359, N=512 3870/4813
//   q4_0: N=64 656/1493, N=256 2139/2400, N=384 3595/3583, N=512 4196/3964
// CLBlast pads N up to its tile width, so its cost is flat up to N = 32..64, and on PoCL it runs
// at about the matrix-vector kernels' rate per column; the switch sits where the GEMM path starts
// to win. GPUs will want much lower values: TESSERA_OPENCL_GEMM_MIN_N=<n> overrides all three
// (0 or a huge value forces one path).
constexpr int64_t kGemmMinColumnsF32 = 96;
constexpr int64_t kGemmMinColumnsF16 = 128;
constexpr int64_t kGemmMinColumnsQuant = 512;

std::optional<int64_t>& gemm_env_columns() {
  static std::optional<int64_t> columns = env_int("TESSERA_OPENCL_GEMM_MIN_N", 0, INT64_MAX);
  return columns;
}

std::optional<int64_t>& gemm_set_columns() {
  static std::optional<int64_t> columns;
  return columns;
}

int64_t gemm_min_columns(DType weights) {
  if (const auto& v = gemm_set_columns()) return *v;
  if (const auto& v = gemm_env_columns()) return *v;
  if (is_quantized(weights)) return kGemmMinColumnsQuant;
  return weights == DType::F32 ? kGemmMinColumnsF32 : kGemmMinColumnsF16;
}

// Q4_0 and Q8_0 (the split layout) have integer kernels that take b as Q8_0 blocks.
bool has_q8_0_kernel(DType weights) { return weights == DType::Q4_0 || weights == DType::Q8_0; }

// prepare_b's mode for b as f32 rows, as ggml rounds b for the weights: as they are for F32
// weights, to f16 for F16 and to bf16 for BF16 weights, through Q8_K for the super-block types,
// through Q8_0 for the other quantized ones.
cl_int f32_b_mode(DType weights) {
  if (weights == DType::F16) return 4;
  if (weights == DType::BF16) return 5;
  if (!is_quantized(weights)) return 0;
  return traits(weights).block_size == kSuperBlock ? 3 : 2;
}

// The matrix-vector kernel of a native block type (kernels/mul_mat.cl), nullptr for other types.
const char* native_vec_kernel(DType weights) {
  switch (weights) {
    case DType::Q4_1:
      return "mul_mat_vec_q4_1";
    case DType::Q5_0:
      return "mul_mat_vec_q5_0";
    case DType::Q5_1:
      return "mul_mat_vec_q5_1";
    case DType::Q2_K:
      return "mul_mat_vec_q2_k";
    case DType::Q3_K:
      return "mul_mat_vec_q3_k";
    case DType::Q4_K:
      return "mul_mat_vec_q4_k";
    case DType::Q5_K:
      return "mul_mat_vec_q5_k";
    case DType::Q6_K:
      return "mul_mat_vec_q6_k";
    case DType::IQ4_NL:
      return "mul_mat_vec_iq4_nl";
    case DType::IQ4_XS:
      return "mul_mat_vec_iq4_xs";
    case DType::IQ2_XXS:
      return "mul_mat_vec_iq2_xxs";
    case DType::IQ2_XS:
      return "mul_mat_vec_iq2_xs";
    case DType::IQ2_S:
      return "mul_mat_vec_iq2_s";
    case DType::IQ3_XXS:
      return "mul_mat_vec_iq3_xxs";
    case DType::IQ3_S:
      return "mul_mat_vec_iq3_s";
    case DType::IQ1_S:
      return "mul_mat_vec_iq1_s";
    case DType::IQ1_M:
      return "mul_mat_vec_iq1_m";
    case DType::MXFP4:
      return "mul_mat_vec_mxfp4";
    default:
      return nullptr;
  }
}

struct Shape {
  int64_t k, m, n, b2, b3, r2, r3;
};

bool supports_mul_mat(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (a == nullptr || b == nullptr || node.type != DType::F32 || node.nb[0] != sizeof(float)) return false;
  const bool a_ok = a->type == DType::F32 || a->type == DType::F16 || a->type == DType::BF16 ||
                    has_q8_0_kernel(a->type) || native_vec_kernel(a->type) != nullptr;
  if (!a_ok || (b->type != DType::F32 && b->type != DType::F16)) return false;
  if (is_quantized(a->type) && !a->rows_contiguous()) return false;
  return a->ne[0] == b->ne[0] && a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 &&
         b->ne[3] % a->ne[3] == 0 && node.ne[0] == a->ne[1] && node.ne[1] == b->ne[1] &&
         node.ne[2] == b->ne[2] && node.ne[3] == b->ne[3];
}

// Contiguous byte strides of an f32 tensor [k, n, b2, b3].
cl_ulong4 f32_strides(int64_t k, int64_t n, int64_t b2) {
  cl_ulong4 nb;
  nb.s[0] = sizeof(float);
  nb.s[1] = nb.s[0] * static_cast<cl_ulong>(k);
  nb.s[2] = nb.s[1] * static_cast<cl_ulong>(n);
  nb.s[3] = nb.s[2] * static_cast<cl_ulong>(b2);
  return nb;
}

// b as contiguous f32 rows (mode 0), Q8_0 blocks in device layout (mode 1), or f32 rounded through
// Q8_0 (mode 2), Q8_K (3), to f16 (4) or bf16 (5), in `out` (sized by the caller). Returns the byte offset of
// the scales (mode 1).
size_t prepare_b(const device::OpContext& ctx, const Tensor& b, const Shape& s, const device::Scratch& out,
                 cl_int mode) {
  const TensorArg bt = tensor_arg(ctx, b);
  const ClAddress o = address_arg(ctx, out.data(), out.size());
  const int64_t rows = s.n * s.b2 * s.b3;
  const cl_ulong q_off = o.offset;
  const cl_ulong d_off = o.offset + static_cast<cl_ulong>(rows * s.k);
  const std::array<size_t, 3> grid{static_cast<size_t>(s.k / kQuantBlock), static_cast<size_t>(s.n),
                                   static_cast<size_t>(s.b2 * s.b3)};
  if (grid[0] > 0) {
    cl_kernel k = kernel_of(ctx, "mul_mat", "mul_mat_prepare_b");
    set_args(ctx, k, bt.mem, bt.offset, bt.type, bt.ne, bt.nb, o.mem, q_off, d_off, mode);
    launch(ctx, k, grid);
  }
  if (s.k % kQuantBlock != 0) {
    TESSERA_ASSERT(mode == 0 || mode == 4 || mode == 5);
    cl_kernel k = kernel_of(ctx, "mul_mat", "mul_mat_prepare_b_tail");
    set_args(ctx, k, bt.mem, bt.offset, bt.type, bt.ne, bt.nb, o.mem, q_off, mode);
    launch(ctx, k, {static_cast<size_t>(s.k % kQuantBlock), grid[1], grid[2]});
  }
  return static_cast<size_t>(d_off - q_off);
}

// Weight rows [m0, m0 + rows) of weight batches [w0, w0 + nw) as f32 at `out`: rows contiguous, or
// columns contiguous when `transposed` (see mul_mat_weights_f32).
void weights_f32(const device::OpContext& ctx, const TensorArg& at, int64_t m0, int64_t rows, int64_t w0,
                 int64_t nw, const ClAddress& out, bool transposed) {
  const cl_long cm0 = m0, crows = rows, cw0 = w0;
  const cl_int tr = transposed ? 1 : 0;
  cl_kernel k = kernel_of(ctx, "mul_mat", "mul_mat_weights_f32");
  set_args(ctx, k, at.mem, at.offset, at.scale_offset, at.type, at.ne, at.nb, cm0, crows, cw0, out.mem,
           static_cast<cl_ulong>(out.offset), tr);
  launch(ctx, k,
         {static_cast<size_t>(rows), static_cast<size_t>((at.ne.s[0] + kQuantBlock - 1) / kQuantBlock),
          static_cast<size_t>(nw)});
}

// ---------------------------------------------------------------- matrix-vector path

void run_vec(const device::OpContext& ctx, Tensor& node, const Tensor& a, const Tensor& b, const Shape& s) {
  const TensorArg d = tensor_arg(ctx, node);
  const cl_long K = s.k, N = s.n, B2 = s.b2, r2 = s.r2, r3 = s.r3;
  const std::array<size_t, 3> groups{static_cast<size_t>(s.m),
                                     static_cast<size_t>((s.n + kVecColumns - 1) / kVecColumns),
                                     static_cast<size_t>(s.b2 * s.b3)};
  if (has_q8_0_kernel(a.type)) {
    const int64_t rows = s.n * s.b2 * s.b3;
    device::Scratch bq(*ctx.pool, static_cast<size_t>(rows * s.k + rows * (s.k / kQuantBlock) * 2));
    const size_t scales = prepare_b(ctx, b, s, bq, 1);
    const ClAddress o = address_arg(ctx, bq.data(), bq.size());
    const TensorArg at = tensor_arg(ctx, a);
    const cl_ulong bq_off = o.offset, bd_off = o.offset + scales;
    cl_kernel k = kernel_of(ctx, "mul_mat", a.type == DType::Q8_0 ? "mul_mat_vec_q8_0" : "mul_mat_vec_q4_0");
    set_args(ctx, k, at.mem, at.offset, at.scale_offset, at.nb, o.mem, bq_off, bd_off, d.mem, d.offset, d.nb,
             K, N, B2, r2, r3);
    launch_groups(
        ctx, k, groups,
        group_size(ctx, k, std::min(kVecGroup, pow2_at_least(static_cast<size_t>(s.k / kQuantBlock)))));
    return;
  }
  // Float weights: rows contiguous in dim 0 are read in place, others converted first; native
  // block weights (rows contiguous) in place.
  TensorArg at = tensor_arg(ctx, a);
  DType a_type = a.type;
  device::Scratch a_conv;
  if (!is_quantized(a.type) && a.nb[0] != traits(a.type).block_bytes) {
    a_conv = device::Scratch(*ctx.pool, static_cast<size_t>(s.k * s.m * a.ne[2] * a.ne[3]) * sizeof(float));
    const ClAddress o = address_arg(ctx, a_conv.data(), a_conv.size());
    weights_f32(ctx, at, 0, s.m, 0, a.ne[2] * a.ne[3], o, false);
    at.mem = o.mem;
    at.offset = o.offset;
    at.nb = f32_strides(s.k, s.m, a.ne[2]);
    a_type = DType::F32;
  }
  TensorArg bt = tensor_arg(ctx, b);
  device::Scratch b_conv;
  if (f32_b_mode(a.type) != 0 || b.type != DType::F32 || b.nb[0] != sizeof(float)) {
    b_conv = device::Scratch(*ctx.pool, static_cast<size_t>(s.k * s.n * s.b2 * s.b3) * sizeof(float));
    prepare_b(ctx, b, s, b_conv, f32_b_mode(a.type));
    const ClAddress o = address_arg(ctx, b_conv.data(), b_conv.size());
    bt.mem = o.mem;
    bt.offset = o.offset;
    bt.nb = f32_strides(s.k, s.n, s.b2);
  }
  const char* name = is_quantized(a_type)   ? native_vec_kernel(a_type)
                     : a_type == DType::F32 ? "mul_mat_vec_f32"
                     : a_type == DType::F16 ? "mul_mat_vec_f16"
                                            : "mul_mat_vec_bf16";
  cl_kernel k = kernel_of(ctx, "mul_mat", name);
  set_args(ctx, k, at.mem, at.offset, at.nb, bt.mem, bt.offset, bt.nb, d.mem, d.offset, d.nb, K, N, B2, r2,
           r3);
  // An item's share: 16 elements of float weights, a 32-element chunk of block weights.
  const int64_t per_item = is_quantized(a_type) ? kQuantBlock : 16;
  launch_groups(
      ctx, k, groups,
      group_size(
          ctx, k,
          std::min(kVecGroup, pow2_at_least(static_cast<size_t>(std::max<int64_t>(1, s.k / per_item))))));
}

// ---------------------------------------------------------------- GEMM path (CLBlast)

#ifdef TESSERA_HAVE_CLBLAST
// C (m x n, column-major, ldc) = W B: W is m x k, stored as rows (k contiguous, `w_rows`) or as
// columns (m contiguous, as the weight tiles are); B is k x n with k contiguous.
void sgemm(const device::OpContext& ctx, int64_t m, int64_t n, int64_t k, cl_mem w, size_t w_off, size_t ldw,
           bool w_rows, cl_mem b, size_t b_off, size_t ldb, cl_mem c, size_t c_off, size_t ldc) {
  cl_command_queue queue = runtime_of(ctx).queue(*ctx.stream);
  const CLBlastStatusCode st =
      CLBlastSgemm(CLBlastLayoutColMajor, w_rows ? CLBlastTransposeYes : CLBlastTransposeNo,
                   CLBlastTransposeNo, static_cast<size_t>(m), static_cast<size_t>(n), static_cast<size_t>(k),
                   1.0f, w, w_off, ldw, b, b_off, ldb, 0.0f, c, c_off, ldc, &queue, nullptr);
  if (st != CLBlastSuccess)
    raise(ErrorCode::DeviceError, "{}: CLBlastSgemm (m={}, n={}, k={}) failed with status {}",
          runtime_of(ctx).properties(ctx.device).name, m, n, k, static_cast<int>(st));
}

void run_gemm(const device::OpContext& ctx, Tensor& node, const Tensor& a, const Tensor& b, const Shape& s) {
  const TensorArg d = tensor_arg(ctx, node);
  // b: in place when it is f32 with element-aligned rows (and no rounding is due).
  TensorArg bt = tensor_arg(ctx, b);
  device::Scratch b_conv;
  const bool b_direct = f32_b_mode(a.type) == 0 && b.type == DType::F32 && b.nb[0] == sizeof(float) &&
                        b.nb[1] % 4 == 0 && b.nb[2] % 4 == 0 && b.nb[3] % 4 == 0 && bt.offset % 4 == 0;
  if (!b_direct) {
    b_conv = device::Scratch(*ctx.pool, static_cast<size_t>(s.k * s.n * s.b2 * s.b3) * sizeof(float));
    prepare_b(ctx, b, s, b_conv, f32_b_mode(a.type));
    const ClAddress o = address_arg(ctx, b_conv.data(), b_conv.size());
    bt.mem = o.mem;
    bt.offset = o.offset;
    bt.nb = f32_strides(s.k, s.n, s.b2);
  }
  // Weights: in place for f32 rows, else f32 tiles of up to kTileBytes.
  const TensorArg at = tensor_arg(ctx, a);
  const bool a_direct = a.type == DType::F32 && a.nb[0] == sizeof(float) && a.nb[1] % 4 == 0 &&
                        a.nb[2] % 4 == 0 && a.nb[3] % 4 == 0 && at.offset % 4 == 0;
  const int64_t tile_rows =
      a_direct ? s.m
               : std::clamp<int64_t>(
                     static_cast<int64_t>(kTileBytes / (static_cast<size_t>(s.k) * sizeof(float))), 1, s.m);
  device::Scratch tile;
  ClAddress tile_at;
  if (!a_direct) {
    tile = device::Scratch(*ctx.pool, static_cast<size_t>(tile_rows * s.k) * sizeof(float));
    tile_at = address_arg(ctx, tile.data(), tile.size());
  }
  const size_t ldb = bt.nb.s[1] / 4, ldc = d.nb.s[1] / 4;
  for (int64_t w3 = 0; w3 < a.ne[3]; ++w3) {
    for (int64_t w2 = 0; w2 < a.ne[2]; ++w2) {
      for (int64_t m0 = 0; m0 < s.m; m0 += tile_rows) {
        const int64_t mc = std::min(tile_rows, s.m - m0);
        cl_mem a_mem;
        size_t a_off, lda;
        if (a_direct) {
          a_mem = at.mem;
          a_off = (at.offset + static_cast<size_t>(m0) * a.nb[1] + static_cast<size_t>(w2) * a.nb[2] +
                   static_cast<size_t>(w3) * a.nb[3]) /
                  4;
          lda = a.nb[1] / 4;
        } else {
          weights_f32(ctx, at, m0, mc, w2 + a.ne[2] * w3, 1, tile_at, true);
          a_mem = tile_at.mem;
          a_off = tile_at.offset / 4;
          lda = static_cast<size_t>(mc);
        }
        // Every batch of b that this weight batch serves.
        for (int64_t i3 = w3 * s.r3; i3 < (w3 + 1) * s.r3; ++i3) {
          for (int64_t i2 = w2 * s.r2; i2 < (w2 + 1) * s.r2; ++i2) {
            const size_t b_off =
                (bt.offset + static_cast<size_t>(i2) * bt.nb.s[2] + static_cast<size_t>(i3) * bt.nb.s[3]) / 4;
            const size_t c_off = (d.offset + static_cast<size_t>(m0) * d.nb.s[0] +
                                  static_cast<size_t>(i2) * d.nb.s[2] + static_cast<size_t>(i3) * d.nb.s[3]) /
                                 4;
            sgemm(ctx, mc, s.n, s.k, a_mem, a_off, lda, a_direct, bt.mem, b_off, ldb, d.mem, c_off, ldc);
          }
        }
      }
    }
  }
}
#endif

void run_mul_mat(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const Shape s{a.ne[0], a.ne[1], b.ne[1], b.ne[2], b.ne[3], b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]};
  if (node.nelements() == 0) return;
  if (s.k == 0) {
    ctx.runtime->fill_async(*ctx.stream, node.data, 0, node.nbytes());
    return;
  }
#ifdef TESSERA_HAVE_CLBLAST
  if (s.n >= gemm_min_columns(a.type)) {
    g_gemm_runs.fetch_add(1, std::memory_order_relaxed);
    return run_gemm(ctx, node, a, b, s);
  }
#endif
  g_vec_runs.fetch_add(1, std::memory_order_relaxed);
  run_vec(ctx, node, a, b, s);
}

// ---------------------------------------------------------------- MUL_MAT_ID

// The experts a [K, M, E] of any weight type MUL_MAT takes, b [K, B1, T] f32 or f16 (B1 = 1: shared
// by the slots, or one row per slot), ids [n_used, T] i32; dst [M, n_used, T] f32.
bool supports_mul_mat_id(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  const Tensor* ids = node.src[2];
  if (a == nullptr || b == nullptr || ids == nullptr || node.type != DType::F32 || ids->type != DType::I32)
    return false;
  const bool a_ok = a->type == DType::F32 || a->type == DType::F16 || a->type == DType::BF16 ||
                    has_q8_0_kernel(a->type) || native_vec_kernel(a->type) != nullptr;
  if (!a_ok || (b->type != DType::F32 && b->type != DType::F16) || a->ne[3] != 1) return false;
  if (is_quantized(a->type) && !a->rows_contiguous()) return false;
  return a->ne[0] == b->ne[0] && b->ne[3] == 1 && ids->ne[1] == b->ne[2] && ids->ne[1] == node.ne[2] &&
         node.ne[0] == a->ne[1] && node.ne[1] == ids->ne[0] && b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0;
}

void run_mul_mat_id(const device::OpContext& ctx, Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  if (node.nelements() == 0) return;
  const int64_t k = a.ne[0], b1 = b.ne[1], tokens = b.ne[2];
  if (k == 0) {
    ctx.runtime->fill_async(*ctx.stream, node.data, 0, node.nbytes());
    return;
  }
  // b as the weights multiply it (MUL_MAT's rounding), contiguous f32 rows [K, B1, T].
  device::Scratch y(*ctx.pool, static_cast<size_t>(k * b1 * tokens) * sizeof(float));
  prepare_b(ctx, b, Shape{k, a.ne[1], b1, tokens, 1, 1, 1}, y, f32_b_mode(a.type));
  const ClAddress yo = address_arg(ctx, y.data(), y.size());
  const TensorArg at = tensor_arg(ctx, a);
  const TensorArg it = tensor_arg(ctx, ids);
  const TensorArg d = tensor_arg(ctx, node);
  const int64_t experts = a.ne[2], n_used = ids.ne[0];
  const cl_long B1 = b1;
  const cl_ulong y_off = yo.offset;
  const int64_t per_item = is_quantized(a.type) ? kQuantBlock : 1;
  const size_t want =
      std::min(kVecGroup, pow2_at_least(static_cast<size_t>(std::max<int64_t>(1, k / per_item))));
  if (tokens * n_used <= experts) {  // about a token per expert: each output from its expert's row
    cl_kernel kern = kernel_of(ctx, "mul_mat", "mul_mat_id_each");
    set_args(ctx, kern, at.mem, at.offset, at.scale_offset, at.type, at.ne, at.nb, yo.mem, y_off, B1, it.mem,
             it.offset, it.nb, d.mem, d.offset, d.nb);
    launch_groups(ctx, kern,
                  {static_cast<size_t>(a.ne[1]), static_cast<size_t>(n_used), static_cast<size_t>(tokens)},
                  group_size(ctx, kern, want));
    return;
  }
  // Each expert's (slot, token) pairs, then the products expert by expert (mul_mat.cl).
  device::Scratch routes(*ctx.pool, static_cast<size_t>((experts + 1) * n_used * tokens) * sizeof(cl_int));
  device::Scratch counts(*ctx.pool, static_cast<size_t>(experts + 1) * sizeof(cl_int));
  const ClAddress ro = address_arg(ctx, routes.data(), routes.size());
  const ClAddress co = address_arg(ctx, counts.data(), counts.size());
  const cl_long used = n_used, t_count = tokens, e_count = experts;
  const cl_ulong ro_off = ro.offset, co_off = co.offset;
  cl_kernel route = kernel_of(ctx, "mul_mat", "mul_mat_id_routes");
  set_args(ctx, route, it.mem, it.offset, it.nb, used, t_count, e_count, ro.mem, ro_off, co.mem, co_off);
  launch(ctx, route, {static_cast<size_t>(experts + 1), 1, 1});
  cl_kernel kern = kernel_of(ctx, "mul_mat", "mul_mat_id");
  set_args(ctx, kern, at.mem, at.offset, at.scale_offset, at.type, at.ne, at.nb, yo.mem, y_off, B1, used,
           t_count, ro.mem, ro_off, co.mem, co_off, d.mem, d.offset, d.nb);
  launch_groups(ctx, kern, {static_cast<size_t>(a.ne[1]), static_cast<size_t>(experts + 1), 1},
                group_size(ctx, kern, want));
}

}  // namespace

MulMatPathCounts mul_mat_path_counts() noexcept {
  return {g_vec_runs.load(std::memory_order_relaxed), g_gemm_runs.load(std::memory_order_relaxed)};
}

bool mul_mat_has_gemm() noexcept {
#ifdef TESSERA_HAVE_CLBLAST
  return true;
#else
  return false;
#endif
}

void register_mul_mat(device::OpLibrary& lib) {
  (void)gemm_env_columns();  // read the knob (and warn about junk) when the library is made, not mid-run
  lib.set(Op::MulMat, {&supports_mul_mat, &run_mul_mat});
  lib.set(Op::MulMatId, {&supports_mul_mat_id, &run_mul_mat_id});
}

void set_gemm_min_columns(std::optional<int64_t> columns) { gemm_set_columns() = columns; }

}  // namespace tessera::opencl
