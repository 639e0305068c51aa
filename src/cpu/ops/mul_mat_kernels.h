#pragma once
// MUL_MAT tile kernels for the fast CPU path (mul_mat.cpp drives them).
//
// A tile kernel computes an RM x RN block of dot products: RM weight rows (a) against RN prepared
// b rows, over a K range [k0, k1). Each dot keeps one 8-lane f32 accumulator that is carried between
// K ranges in `acc` and reduced in a fixed order on the last range, so every kernel shape (and every
// K split) gives the same bits for the same element: results never depend on tiling or threads.
//
// Prepared b rows: f32 for F32 weights; for F16 weights, f32 rows of b's values rounded to f16
// (ggml's semantics: its CPU multiplies F16 weights by b converted to f16, so every product is exact);
// for BF16 weights, b rounded to bf16 (ggml's semantics; K halves, padded to 64 bytes), which makes
// every product exact and leaves one order of additions for all tables (mul_mat_bf16.cpp). For the 32-element
// quantized types, b is quantized to Q8_0 once per row into the "q8 row" layout: K int8 quants, then K/32 f32
// scales d (each an fp16-rounded value, so the numbers are exactly those of quantize_row_q8_0), then K/32 f32
// values c = 8 * sum(q) * d (what Q4_0's offset of 8 costs a block, so Q4_0 kernels can multiply the unsigned
// nibbles directly), then K/32 f32 values s = fp16(sum(q) * amax / 127) (ggml's Q8_1 sum, which the minimum
// of Q4_1/Q5_1 multiplies), then K/32 int32 sums sum(q) (what the interleaved Q4_0 kernels take Q4_0's offset
// of 8 back with, exactly). For the K-quants and the 256-element I-quants, b is quantized to Q8_K into the
// "q8k row" layout: K int8 quants, K/256 f32 scales, K/16 int16 sums of 16 quants; a table whose tiles want
// the quants regrouped (pair_q8k_row) has them regrouped right after quantizing.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/blocks.h"
#include "tessera/dtype.h"

namespace tessera::cpu::mm {

inline constexpr int kMaxRM = 4;  // largest tile: kMaxRM weight rows x kMaxRN b columns
inline constexpr int kMaxRN = 4;
inline constexpr int kWideRN = 8;            // columns of the wide tiles (kMaxRM rows) some tables have
inline constexpr int kMatVecRows = 8;        // most weight rows of a matrix-vector kernel (one b column)
inline constexpr int kAccLanes = 8;          // floats of state per dot product
inline constexpr int64_t kRangeAlign = 256;  // K ranges split at multiples of this (8 quant blocks)

struct TileArgs {
  const char* a = nullptr;  // first weight row (at element 0)
  size_t a_stride = 0;      // bytes between weight rows
  const char* b = nullptr;  // first prepared b row (at element 0)
  size_t b_stride = 0;      // bytes between prepared b rows
  int64_t k = 0;            // full row length
  int64_t k0 = 0, k1 = 0;   // range to add now; multiples of kRangeAlign unless k1 == k
  float* acc = nullptr;     // RM * RN * kAccLanes floats, [m][n][lane]
  bool first = true;        // start from zero (else continue acc)
  bool last = true;         // finish: reduce and write dst
  float* dst = nullptr;     // element (m, n) goes to dst[n * dst_stride + m]
  size_t dst_stride = 0;    // in floats
};

using TileFn = void (*)(const TileArgs&);

// Weight kinds with a tile kernel (non-quantized weights that are not F32 contiguous are either
// read as F16/BF16 rows or converted to F32 by the driver).
enum class WeightKind : int {
  F32,
  F16,
  BF16,
  Q4_0,
  Q8_0,
  Q4_1,
  Q5_0,
  Q5_1,
  IQ4_NL,
  MXFP4,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_XS,
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  IQ3_XXS,
  IQ3_S,
  IQ1_S,
  IQ1_M,
  Count_
};
inline constexpr int kWeightKinds = static_cast<int>(WeightKind::Count_);

struct KernelTable {
  const char* isa = "scalar";
  TileFn tile[kWeightKinds][kMaxRM][kMaxRN] = {};  // [kind][rm - 1][rn - 1]
  // kMaxRM x kWideRN tiles, where sharing each weight row's unpacking among more columns pays
  // (nullptr: none for that kind).
  TileFn wide[kWeightKinds] = {};
  // Matrix-vector kernels (one b column, K whole, no acc): matvec[kind][r - 1] does r weight rows in
  // one pass, each row with exactly the bits of the RN = 1 tile. nullptr: the driver uses the tiles.
  TileFn matvec[kWeightKinds][kMatVecRows] = {};
  // Kernels for weights in the interleaved layout (cpu/interleave.h): one group of kMatVecRows rows
  // x rn b columns over a K range, acc up to kMatVecRows x rn x kAccLanes floats. Q4_0 / Q8_0: acc
  // = rn x kAccLanes (lane l: row l), each row's sum exact integer block sums added in block order,
  // so every rn, K split and table (scalar or SIMD) gives the same bits. F16 / BF16: each row the
  // same operations (and bits) as the table's ggml-layout tiles. nullptr: no interleaved layout.
  TileFn interleaved[kWeightKinds][kMaxRN] = {};
  // Where set: two consecutive groups (2 x kMatVecRows rows, the second group kMatVecRows rows after
  // the first) x rn <= kWideRN columns, acc = rn x 2 kMatVecRows floats, each row with the bits of
  // `interleaved`.
  TileFn interleaved_pair[kWeightKinds][kWideRN] = {};
  // Quantizes k floats (k % 32 == 0) into a q8 row at dst (see above).
  void (*quantize_q8_row)(const float* src, char* dst, int64_t k) = nullptr;
  // Quantizes k floats (k % 256 == 0) into a q8k row at dst (see above).
  void (*quantize_q8k_row)(const float* src, char* dst, int64_t k) = nullptr;
  // Where set, this table's K-quant tiles read the quants of q8k rows regrouped by pairs of
  // 32-element chunks (see mul_mat_kquants_avx2.cpp); it regroups those of a q8k row of k elements.
  void (*pair_q8k_row)(char* row, int64_t k) = nullptr;
  // Converts k halves to floats.
  void (*f16_to_f32_row)(const uint16_t* src, float* dst, int64_t k) = nullptr;
};

// Registration: each kernel file fills its table entries through these, so that a tile shape or a
// quantized kind is listed in one place. f.template operator()<I>() for I = 0 .. N - 1:
template <int N, class F>
void for_each_index(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }
  (std::make_integer_sequence<int, N>{});
}
// f.template operator()<RM, RN>() for every tile shape, 1 .. kMaxRM x 1 .. kMaxRN:
template <class F>
void for_each_tile_shape(F&& f) {
  for_each_index<kMaxRM * kMaxRN>([&]<int I>() { f.template operator()<I / kMaxRN + 1, I % kMaxRN + 1>(); });
}
// f.template operator()<Block>(k), k the kind's index in the table, for the quantized kinds whose b
// is a q8 row:
template <class F>
void for_each_q8_kind(F&& f) {
  f.template operator()<BlockQ4_0>(static_cast<int>(WeightKind::Q4_0));
  f.template operator()<BlockQ8_0>(static_cast<int>(WeightKind::Q8_0));
  f.template operator()<BlockQ4_1>(static_cast<int>(WeightKind::Q4_1));
  f.template operator()<BlockQ5_0>(static_cast<int>(WeightKind::Q5_0));
  f.template operator()<BlockQ5_1>(static_cast<int>(WeightKind::Q5_1));
  f.template operator()<BlockIQ4_NL>(static_cast<int>(WeightKind::IQ4_NL));
  f.template operator()<BlockMXFP4>(static_cast<int>(WeightKind::MXFP4));
}
// and for those whose b is a q8k row (the K-quants, IQ4_XS and the grid I-quants):
template <class F>
void for_each_q8k_kind(F&& f) {
  f.template operator()<BlockQ2_K>(static_cast<int>(WeightKind::Q2_K));
  f.template operator()<BlockQ3_K>(static_cast<int>(WeightKind::Q3_K));
  f.template operator()<BlockQ4_K>(static_cast<int>(WeightKind::Q4_K));
  f.template operator()<BlockQ5_K>(static_cast<int>(WeightKind::Q5_K));
  f.template operator()<BlockQ6_K>(static_cast<int>(WeightKind::Q6_K));
  f.template operator()<BlockIQ4_XS>(static_cast<int>(WeightKind::IQ4_XS));
  f.template operator()<BlockIQ2_XXS>(static_cast<int>(WeightKind::IQ2_XXS));
  f.template operator()<BlockIQ2_XS>(static_cast<int>(WeightKind::IQ2_XS));
  f.template operator()<BlockIQ2_S>(static_cast<int>(WeightKind::IQ2_S));
  f.template operator()<BlockIQ3_XXS>(static_cast<int>(WeightKind::IQ3_XXS));
  f.template operator()<BlockIQ3_S>(static_cast<int>(WeightKind::IQ3_S));
  f.template operator()<BlockIQ1_S>(static_cast<int>(WeightKind::IQ1_S));
  f.template operator()<BlockIQ1_M>(static_cast<int>(WeightKind::IQ1_M));
}

// How b is prepared for a weight kind.
// (F16: f32 rows rounded to f16, which the F16 and the F32 kernels both take: strided F16 weights are
// converted to f32 rows and still multiply b as ggml's F16 weights do.)
enum class Activation { F32, F16, BF16, Q8, Q8K };
inline constexpr Activation activation_of(WeightKind kind) noexcept {
  return kind >= WeightKind::Q2_K   ? Activation::Q8K
         : kind >= WeightKind::Q4_0 ? Activation::Q8
         : kind == WeightKind::BF16 ? Activation::BF16
         : kind == WeightKind::F16  ? Activation::F16
                                    : Activation::F32;
}

// Bytes of one prepared bf16 row of k elements, padded so rows stay 64-byte aligned.
inline size_t bf16_row_bytes(int64_t k) noexcept { return (static_cast<size_t>(k) * 2 + 63) / 64 * 64; }

// Bytes of one q8 row of k elements (k % 32 == 0), padded so rows stay 64-byte aligned.
inline size_t q8_row_bytes(int64_t k) noexcept {
  const size_t raw = static_cast<size_t>(k) + static_cast<size_t>(k / 32) * 4 * sizeof(float);
  return (raw + 63) / 64 * 64;
}

// Bytes of one q8k row of k elements (k % 256 == 0), padded so rows stay 64-byte aligned.
inline size_t q8k_row_bytes(int64_t k) noexcept {
  const size_t raw = static_cast<size_t>(k) + static_cast<size_t>(k / 256) * sizeof(float) +
                     static_cast<size_t>(k / 16) * sizeof(int16_t);
  return (raw + 63) / 64 * 64;
}

// The pieces of a q8 row of k elements (see the top).
struct Q8Row {
  const int8_t* qs;
  const float* d;
  const int32_t* sums;
};
inline Q8Row q8_row(const char* row, int64_t k) noexcept {
  const auto* d = reinterpret_cast<const float*>(row + k);
  return {reinterpret_cast<const int8_t*>(row), d, reinterpret_cast<const int32_t*>(d + 3 * (k / 32))};
}

// The pieces of a q8k row.
struct Q8KRow {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;
};
inline Q8KRow q8k_row(const char* row, int64_t k) noexcept {
  const auto* qs = reinterpret_cast<const int8_t*>(row);
  const auto* d = reinterpret_cast<const float*>(row + k);
  return {qs, d, reinterpret_cast<const int16_t*>(d + k / 256)};
}

// Eight lanes of a dot product's state summed in avx2::hsum's order: ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)).
inline float hsum_order(const float* l) noexcept {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// The BF16 kernels and their order of operations (mul_mat_bf16*.cpp): every table gives the same bits.
void fill_bf16_scalar(KernelTable& t);
void fill_bf16_avx2(KernelTable& t);    // only called where the CPU has AVX2/FMA/F16C
void fill_bf16_avx512(KernelTable& t);  // only called where the CPU has AVX512_BF16 too

// The K-quant and 256-element I-quant tile kernels, in files of their own (mul_mat_kquants*.cpp).
void fill_kquant_scalar(KernelTable& t);
void fill_kquant_avx2(KernelTable& t);         // only called where the CPU has AVX2/FMA/F16C
void fill_kquant_avx512(KernelTable& t);       // only called where the CPU has the AVX-512 table's ISA
void fill_kquant_avx512_vbmi(KernelTable& t);  // and AVX512-VBMI: the formats it decodes by byte permutes

const KernelTable& scalar_kernels() noexcept;
// The AVX2/FMA/F16C kernels, or nullptr where they are not compiled in or the CPU lacks them.
const KernelTable* avx2_kernels() noexcept;
// The AVX-512 (F/BW/VL/DQ/VNNI) kernels (the AVX2 table with 512-bit interleaved-weight kernels,
// the same bits), or nullptr where they are not compiled in or the CPU lacks them.
const KernelTable* avx512_kernels() noexcept;
// Every table this CPU runs, the best first (the scalar one last).
std::vector<const KernelTable*> available_kernels();
// What the fast path uses: the best table the CPU runs, or the one TESSERA_CPU_ISA names (scalar,
// avx2, avx512-vnni; a name this CPU cannot run warns and is ignored), or a test override.
const KernelTable& active_kernels() noexcept;

// For tests: makes `table` active while alive (nullptr = the default choice again).
class ScopedKernelOverride {
 public:
  explicit ScopedKernelOverride(const KernelTable* table) noexcept;
  ~ScopedKernelOverride();
  ScopedKernelOverride(const ScopedKernelOverride&) = delete;
  ScopedKernelOverride& operator=(const ScopedKernelOverride&) = delete;

 private:
  const KernelTable* previous_;
};

}  // namespace tessera::cpu::mm
