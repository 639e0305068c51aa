// AVX2 + FMA + F16C MUL_MAT tile kernels, compiled per function (target attributes) and chosen at
// run time, so the library still runs on x86-64 CPUs without them.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/interleave.h"
#include "cpu/ops/mul_mat_avx2.h"
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::cpu::mm {
namespace {

using avx2::fma1;
using avx2::hsum;
using avx2::load1;
using avx2::load_acc;
using avx2::store_acc;

// Eight weights at p, as f32.
template <WeightKind Kind>
TESSERA_AVX2 inline __m256 load8(const char* p) {
  if constexpr (Kind == WeightKind::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    static_assert(Kind == WeightKind::F16);  // BF16 weights have kernels of their own (mul_mat_bf16_avx2.cpp)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

// Where elements i..i + 7 (i % 8 == 0) of weight row m are: in ggml's rows, or (Grouped) in the
// interleaved layout of F16 rows (cpu/interleave.h), a pointing at the group.
template <WeightKind Kind, bool Grouped>
inline const char* elems_at(const char* a, size_t a_stride, int m, int64_t i) {
  if constexpr (Grouped) {
    static_assert(Kind != WeightKind::F32);
    return a + half_offset_in_group(m, i);
  } else {
    return a + m * a_stride + (Kind == WeightKind::F32 ? 4 : 2) * i;
  }
}

template <WeightKind Kind, int RM, int RN, bool Grouped = false>
TESSERA_AVX2 void tile_float(const TileArgs& t) {
  __m256 acc[RM][RN];
  load_acc<RM, RN>(t, acc);
  const int64_t kv = t.k1 & ~int64_t{7};  // k0 is a multiple of 8; the tail is done on the last range
  for (int64_t i = t.k0; i < kv; i += 8) {
    __m256 bv[RN];
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
      bv[n] = _mm256_loadu_ps(reinterpret_cast<const float*>(t.b + n * t.b_stride) + i);
#pragma GCC unroll 4
    for (int m = 0; m < RM; ++m) {
      const __m256 av = load8<Kind>(elems_at<Kind, Grouped>(t.a, t.a_stride, m, i));
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) acc[m][n] = _mm256_fmadd_ps(av, bv[n], acc[m][n]);
    }
  }
  if (!t.last) {
    store_acc<RM, RN>(t, acc);
    return;
  }
#pragma GCC unroll 4
  for (int m = 0; m < RM; ++m) {
    const char* arow = t.a + m * t.a_stride;
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      const auto* brow = reinterpret_cast<const float*>(t.b + n * t.b_stride);
      float s = hsum(acc[m][n]);
      if constexpr (!Grouped)  // grouped rows are whole pieces: no tail
        for (int64_t i = kv; i < t.k1; ++i) s = fma1(load1<Kind>(arow, i), brow[i], s);
      t.dst[n * t.dst_stride + m] = s;
    }
  }
}

// What a 32-element weight block contributes beyond d_a * d_b * sum(u * q_b), u the quants the
// kernel multiplies: Q4_0/Q5_0 store q + 8 / q + 16 (settled through b's c = 8 * sum(q_b) * d_b),
// Q4_1/Q5_1 add m (times b's Q8_1 sum s); Q8_0 and IQ4_NL are signed (a's sign moves onto b).
enum class Offset { None, Minus8, Minus16, PlusMin };
template <class Block>
constexpr Offset kOffset = std::is_same_v<Block, BlockQ4_0>   ? Offset::Minus8
                           : std::is_same_v<Block, BlockQ5_0> ? Offset::Minus16
                           : (std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>)
                               ? Offset::PlusMin
                               : Offset::None;
template <class Block>
constexpr bool kSigned = std::is_same_v<Block, BlockQ8_0> || std::is_same_v<Block, BlockIQ4_NL> ||
                         std::is_same_v<Block, BlockMXFP4>;

// The 32 nibbles of a block in element order (low nibbles, then high ones): the 16 bytes loaded
// into both halves, the upper half shifted by 4 (a broadcast load and one shift, no lane insert).
TESSERA_AVX2 inline __m256i nibbles(const uint8_t* qs, __m256i low4) {
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_setr_epi64x(0, 0, 4, 4)), low4);
}

// 0x10 in byte j where bit j of the 32-bit qh is set (the fifth bit of Q5_0/Q5_1).
TESSERA_AVX2 inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                           2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// The quants the kernel multiplies: unsigned for the offset types, signed for Q8_0 and IQ4_NL.
template <class Block>
TESSERA_AVX2 inline __m256i block_quants(const Block& blk, __m256i low4) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs));
  } else if constexpr (std::is_same_v<Block, BlockIQ4_NL>) {
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
    return _mm256_shuffle_epi8(grid, nibbles(blk.qs, low4));
  } else if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    const __m256i grid =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
    return _mm256_shuffle_epi8(grid, nibbles(blk.qs, low4));
  } else if constexpr (std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>) {
    return _mm256_or_si256(nibbles(blk.qs, low4), fifth_bits(blk.qh));
  } else {
    return nibbles(blk.qs, low4);
  }
}

// The scales d of eight consecutive blocks of 16q + 2 bytes (Q4_0, IQ4_NL: 18, Q8_0: 34): block
// i's d is word i of the 16 bytes at 16q * i, so seven word blends of overlapping loads gather them
// (eight inserts would cost twice the vector uops).
template <class Block>
TESSERA_AVX2 inline __m128i d_words8(const Block* blk) {
  static_assert(sizeof(Block) % 16 == 2 && offsetof(Block, d) == 0);
  constexpr size_t kStep = sizeof(Block) - 2;
  const char* p = reinterpret_cast<const char*>(blk);
  auto at = [p](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * kStep)); };
  const __m128i h01 = _mm_blend_epi16(at(0), at(1), 0x02), h23 = _mm_blend_epi16(at(2), at(3), 0x08);
  const __m128i h45 = _mm_blend_epi16(at(4), at(5), 0x20), h67 = _mm_blend_epi16(at(6), at(7), 0x80);
  return _mm_blend_epi16(_mm_blend_epi16(h01, h23, 0x0c), _mm_blend_epi16(h45, h67, 0xc0), 0xf0);
}

// fp16 fields of blocks [j, j + count) of a weight row as f32 (lanes past count are 0): the
// scales d, or the minimums m.
template <class Block, bool kMin = false>
TESSERA_AVX2 inline __m256 block_halves(const Block* row, int64_t j, int count) {
  auto field = [&](int64_t i) -> uint16_t {
    if constexpr (kMin)
      return row[i].m;
    else
      return row[i].d;
  };
  __m128i h = _mm_setzero_si128();
  if constexpr (!kMin && sizeof(Block) % 16 == 2) {
    if (count == 8) return _mm256_cvtph_ps(d_words8(row + j));
  }
  if (count == 8) {  // inserts, not a store and a wider reload (which would stall store forwarding)
    h = _mm_insert_epi16(h, field(j), 0);
    h = _mm_insert_epi16(h, field(j + 1), 1);
    h = _mm_insert_epi16(h, field(j + 2), 2);
    h = _mm_insert_epi16(h, field(j + 3), 3);
    h = _mm_insert_epi16(h, field(j + 4), 4);
    h = _mm_insert_epi16(h, field(j + 5), 5);
    h = _mm_insert_epi16(h, field(j + 6), 6);
    h = _mm_insert_epi16(h, field(j + 7), 7);
  } else {
    alignas(16) uint16_t part[8] = {};
    for (int i = 0; i < count; ++i) part[i] = field(j + i);
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
  }
  return _mm256_cvtph_ps(h);
}

// The scales of blocks [j, j + count) (lanes past count are 0): the fp16 d of most types, MXFP4's
// halved E8M0 exponents (2^(e - 128) as f32 bits: e - 1 in the exponent field, denormals for e < 2).
template <class Block>
TESSERA_AVX2 inline __m256 block_scales(const Block* row, int64_t j, int count) {
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    alignas(32) float part[8] = {};
    for (int i = 0; i < count; ++i) part[i] = e8m0_half(row[j + i].e);
    return _mm256_load_ps(part);
  } else {
    return block_halves(row, j, count);
  }
}

// f32 values [j, j + count) (lanes past count are 0).
TESSERA_AVX2 inline __m256 load_part(const float* p, int count, __m256i lanes) {
  return count == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes);
}

// Blocks go in groups of eight: the eight a-by-b scale products of a pair are made in one multiply
// and read back by broadcast loads, which keeps the per-block work on the integer units.
// For Q4_0 (unsigned nibbles u = q + 8): a.b = d_a d_b sum(u q_b) - d_a c_b.
template <class Block, int RM, int RN>
TESSERA_AVX2 void tile_quant(const TileArgs& t) {
  constexpr Offset kOff = kOffset<Block>;
  __m256 acc[RM][RN];
  load_acc<RM, RN>(t, acc);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const int64_t j0 = t.k0 / 32, j1 = t.k1 / 32, nblocks = t.k / 32;
  const Block* arow[RM];
#pragma GCC unroll 4
  for (int m = 0; m < RM; ++m) arow[m] = reinterpret_cast<const Block*>(t.a + m * t.a_stride);
  const float* bd[RN];
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n) bd[n] = reinterpret_cast<const float*>(t.b + n * t.b_stride + t.k);
  alignas(32) float scale[RM][RN][8];
  for (int64_t g = j0; g < j1; g += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, j1 - g));
    const __m256i lanes =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 4
    for (int m = 0; m < RM; ++m) {
      // Four tiles ahead (the same blocks of later rows): the weights stream from memory once, and
      // per-tile streams are too short for the hardware prefetcher (m250 Q4_0 tg 46 -> 70 tok/s).
      const char* ahead = reinterpret_cast<const char*>(arow[m] + g) + 4 * RM * t.a_stride;
      for (size_t off = 0; off < 8 * sizeof(Block); off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
      const __m256 da = block_scales(arow[m], g, count);
      __m256 ma = _mm256_setzero_ps();
      if constexpr (kOff == Offset::PlusMin) ma = block_halves<Block, true>(arow[m], g, count);
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) {
        const __m256 db = load_part(bd[n] + g, count, lanes);
        _mm256_store_ps(scale[m][n], _mm256_mul_ps(da, db));
        if constexpr (kOff == Offset::Minus8) {
          acc[m][n] = _mm256_fnmadd_ps(da, load_part(bd[n] + nblocks + g, count, lanes), acc[m][n]);
        } else if constexpr (kOff == Offset::Minus16) {
          const __m256 c = load_part(bd[n] + nblocks + g, count, lanes);
          acc[m][n] = _mm256_fnmadd_ps(da, _mm256_add_ps(c, c), acc[m][n]);
        } else if constexpr (kOff == Offset::PlusMin) {
          acc[m][n] = _mm256_fmadd_ps(ma, load_part(bd[n] + 2 * nblocks + g, count, lanes), acc[m][n]);
        }
      }
    }
    for (int i = 0; i < count; ++i) {
      const int64_t j = g + i;
      __m256i bq[RN];
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n)
        bq[n] = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.b + n * t.b_stride + 32 * j));
#pragma GCC unroll 4
      for (int m = 0; m < RM; ++m) {
        const __m256i q = block_quants(arow[m][j], low4);
        // maddubs wants the unsigned operand: a signed block moves its sign onto b
        const __m256i qa = kSigned<Block> ? _mm256_sign_epi8(q, q) : q;
#pragma GCC unroll 4
        for (int n = 0; n < RN; ++n) {
          const __m256i qb = kSigned<Block> ? _mm256_sign_epi8(bq[n], q) : bq[n];
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, qb), ones);
          acc[m][n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&scale[m][n][i]), acc[m][n]);
        }
      }
    }
  }
  if (!t.last) {
    store_acc<RM, RN>(t, acc);
    return;
  }
#pragma GCC unroll 4
  for (int m = 0; m < RM; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) t.dst[n * t.dst_stride + m] = hsum(acc[m][n]);
}

// ---------------------------------------------------------------- matrix-vector (n == 1)
//
// Generation multiplies every weight matrix by one column: the weights stream from memory once and
// b stays in L1, so these kernels take up to kMatVecRows rows per pass (one b load serves them all)
// and prefetch the rows ahead themselves (the hardware prefetcher alone loses track of 8 row
// streams per core: F16 from memory on 2 threads 8.5 -> 14-15 GB/s). Each row's float operations are those of
// the RN = 1 tile, in the same order: the same bits.

// The weights are prefetched two passes (of kMatVecRows rows) ahead: the distance of the tiles'
// four 4-row tiles, measured on Zen 3 (m250 Q4_0 tg 46 -> 70 tok/s).
constexpr int kPrefetchPasses = 2;

// An interleaved group's blocks are one stream; fetching 512 bytes ahead (3.5 Q4_0 blocks of 8 rows) beat
// none (m250 feed-forward shapes from memory, one thread: 8.3 -> 10.4 GB/s) and longer distances.
constexpr size_t kInterleavedAhead = 512;

template <class Block, int RM>
TESSERA_AVX2 void matvec_quant(const TileArgs& t) {
  constexpr Offset kOff = kOffset<Block>;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const int64_t nblocks = t.k / 32;
  const Block* arow[RM];
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) arow[m] = reinterpret_cast<const Block*>(t.a + m * t.a_stride);
  const auto* bd = reinterpret_cast<const float*>(t.b + t.k);
  const size_t ahead = kPrefetchPasses * kMatVecRows * t.a_stride;
  __m256 acc[RM];
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) acc[m] = _mm256_setzero_ps();
  alignas(32) float scale[RM][8];
  for (int64_t g = 0; g < nblocks; g += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, nblocks - g));
    const __m256i lanes =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 db = load_part(bd + g, count, lanes);
    __m256 off = _mm256_setzero_ps();  // what the block offsets multiply: c, 2c or s
    if constexpr (kOff == Offset::Minus8) {
      off = load_part(bd + nblocks + g, count, lanes);
    } else if constexpr (kOff == Offset::Minus16) {
      const __m256 c = load_part(bd + nblocks + g, count, lanes);
      off = _mm256_add_ps(c, c);
    } else if constexpr (kOff == Offset::PlusMin) {
      off = load_part(bd + 2 * nblocks + g, count, lanes);
    }
#pragma GCC unroll 8
    for (int m = 0; m < RM; ++m) {
      const char* next = reinterpret_cast<const char*>(arow[m] + g) + ahead;
      for (size_t b = 0; b < 8 * sizeof(Block); b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
      const __m256 da = block_scales(arow[m], g, count);
      _mm256_store_ps(scale[m], _mm256_mul_ps(da, db));
      if constexpr (kOff == Offset::Minus8 || kOff == Offset::Minus16)
        acc[m] = _mm256_fnmadd_ps(da, off, acc[m]);
      else if constexpr (kOff == Offset::PlusMin)
        acc[m] = _mm256_fmadd_ps(block_halves<Block, true>(arow[m], g, count), off, acc[m]);
    }
    for (int i = 0; i < count; ++i) {
      const int64_t j = g + i;
      const __m256i bq = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.b + 32 * j));
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) {
        const __m256i q = block_quants(arow[m][j], low4);
        const __m256i qa = kSigned<Block> ? _mm256_sign_epi8(q, q) : q;
        const __m256i qb = kSigned<Block> ? _mm256_sign_epi8(bq, q) : bq;
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, qb), ones);
        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(&scale[m][i]), acc[m]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) t.dst[m] = hsum(acc[m]);
}

// Float weights: the RN = 1 tile's order (8-lane fma over K, then the tail after the reduction).
template <WeightKind Kind, int RM, bool Grouped = false>
TESSERA_AVX2 void matvec_float(const TileArgs& t) {
  const auto* b = reinterpret_cast<const float*>(t.b);
  __m256 acc[RM];
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) acc[m] = _mm256_setzero_ps();
  const int64_t kv = t.k & ~int64_t{7};
  constexpr int64_t kElem = Kind == WeightKind::F32 ? 4 : 2;
  const size_t ahead = Grouped ? kInterleavedAhead : kPrefetchPasses * kMatVecRows * t.a_stride;
  for (int64_t i = 0; i < kv; i += 8) {
    const __m256 bv = _mm256_loadu_ps(b + i);
    if constexpr (Grouped) {  // the group's 128 bytes for these 8 elements: one stream
      const char* next = t.a + half_offset_in_group(0, i) + ahead;
      _mm_prefetch(next, _MM_HINT_T0);
      _mm_prefetch(next + 64, _MM_HINT_T0);
    } else if ((i * kElem) % 64 == 0) {
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) _mm_prefetch(t.a + m * t.a_stride + i * kElem + ahead, _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int m = 0; m < RM; ++m)
      acc[m] = _mm256_fmadd_ps(load8<Kind>(elems_at<Kind, Grouped>(t.a, t.a_stride, m, i)), bv, acc[m]);
  }
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) {
    const char* row = t.a + m * t.a_stride;
    float s = hsum(acc[m]);
    if constexpr (!Grouped)
      for (int64_t i = kv; i < t.k; ++i) s = fma1(load1<Kind>(row, i), b[i], s);
    t.dst[m] = s;
  }
}

// ---------------------------------------------------------------- interleaved weights
//
// Q4_0 / Q8_0 rows interleaved by 8 (cpu/interleave.h): block j of a group is 8 fp16 scales, then
// 32-bit words, word v of row l holding that row's quant bytes 4v..4v + 3. One load gives four
// quants of each of the 8 rows, against four of b's quants broadcast to every lane, so row l's
// integer block sum builds up in 32-bit lane l, and one convert and multiply-add per block and b
// column serve all 8 rows (for the ggml layout it is one per block and row). Exact integer block
// sums, then acc = fma(sum, d_a * d_b, acc) block after block, as the scalar kernel does: the same
// bits for every column count, K range and CPU.

// Four of b's quants in every 32-bit lane.
TESSERA_AVX2 inline __m256i bcast(const int8_t* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  return _mm256_set1_epi32(w);
}

template <class Block, int RN>
TESSERA_AVX2 void tile_interleaved(const TileArgs& t) {
  constexpr bool kQ4 = std::is_same_v<Block, BlockQ4_0>;
  constexpr size_t kGroupBlock = kMatVecRows * sizeof(Block);  // one block of 8 rows
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const int64_t j0 = t.k0 / 32, j1 = t.k1 / 32;
  Q8Row br[RN];
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n) br[n] = q8_row(t.b + n * t.b_stride, t.k);
  __m256 acc[RN];
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n)
    acc[n] = t.first ? _mm256_setzero_ps() : _mm256_loadu_ps(t.acc + n * kAccLanes);
  for (int64_t j = j0; j < j1; ++j) {
    const char* blk = t.a + j * kGroupBlock;
    for (size_t off = 0; off < kGroupBlock; off += 64)
      _mm_prefetch(blk + kInterleavedAhead + off, _MM_HINT_T0);
    const __m256 da = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const char* q = blk + 2 * kMatVecRows;
    __m256i isum[RN];
    if constexpr (kQ4) {
      // Each int16 lane sums 16 products u * q_b (u <= 15, |q_b| <= 127): at most 30480 < 2^15.
      __m256i s16[RN];
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) s16[n] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * v));
        const __m256i lo = _mm256_and_si256(raw, low4);                        // elements 4v..4v + 3
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);  // 16 + 4v..
#pragma GCC unroll 4
        for (int n = 0; n < RN; ++n) {
          const int8_t* b = br[n].qs + 32 * j + 4 * v;
          s16[n] = _mm256_add_epi16(s16[n], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast(b)),
                                                             _mm256_maddubs_epi16(hi, bcast(b + 16))));
        }
      }
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n)  // u = q + 8: take 8 * sum(q_b) back
        isum[n] = _mm256_sub_epi32(_mm256_madd_epi16(s16[n], ones), _mm256_set1_epi32(8 * br[n].sums[j]));
    } else {
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) isum[n] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * v));
        const __m256i aw = _mm256_sign_epi8(w, w);  // maddubs wants the unsigned operand: a's sign onto b
#pragma GCC unroll 4
        for (int n = 0; n < RN; ++n) {
          const __m256i b = _mm256_sign_epi8(bcast(br[n].qs + 32 * j + 4 * v), w);
          isum[n] = _mm256_add_epi32(isum[n], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, b), ones));
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[n]),
                               _mm256_mul_ps(da, _mm256_broadcast_ss(br[n].d + j)), acc[n]);
  }
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n)
    _mm256_storeu_ps(t.last ? t.dst + n * t.dst_stride : t.acc + n * kAccLanes, acc[n]);
}

// F16 weights in the interleaved layout: the ggml-layout kernels' operations on each row
// (same bits), reading the group as one stream. One column over the whole K is the matrix-vector
// kernel; else two halves of 4 rows x up to 3 columns (what the registers hold), acc = 8 x RN dots.
template <WeightKind Kind, int RN>
TESSERA_AVX2 void tile_interleaved_half(const TileArgs& t) {
  if (RN == 1 && t.first && t.last && t.k0 == 0 && t.k1 == t.k)
    return matvec_float<Kind, kMatVecRows, true>(t);
  constexpr int kCols = RN <= 3 ? RN : RN / 2;
  constexpr int kHalf = kInterleaveRows / 2;
  for (int h = 0; h < 2; ++h)
    for (int c0 = 0; c0 < RN; c0 += kCols) {
      TileArgs part = t;
      part.a = t.a + half_offset_in_group(kHalf * h, 0);
      part.b = t.b + c0 * t.b_stride;
      part.dst = t.dst + c0 * t.dst_stride + kHalf * h;
      part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>((h * RN + c0) * kHalf * kAccLanes);
      tile_float<Kind, kHalf, kCols, true>(part);
    }
}

// Same numbers as the scalar quantize_q8_row (and quantize_row_q8_0): round half away from zero.
TESSERA_AVX2 void quantize_q8_row(const float* src, char* dst, int64_t k) {
  auto* ds = reinterpret_cast<float*>(dst + k);
  float* cs = ds + k / 32;
  float* ss = cs + k / 32;
  auto* sums = reinterpret_cast<int32_t*>(ss + k / 32);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t j = 0; j < k / 32; ++j) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(src + 32 * j + 8 * i);
    const __m256 m01 = _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1]));
    const __m256 m23 = _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]));
    const __m256 m8 = _mm256_max_ps(m01, m23);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    ds[j] = fp16_to_fp32(fp32_to_fp16(d));
    const __m256 vid = _mm256_set1_ps(id);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 x = _mm256_mul_ps(v[i], vid);
      const __m256 r = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(x, r));
      const __m256 step = _mm256_or_ps(_mm256_and_ps(x, sign), one);  // +-1 with x's sign
      const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), step);
      qi[i] = _mm256_cvttps_epi32(_mm256_add_ps(r, up));
    }
    const __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]);
    const __m256i p23 = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * j), q);
    // sum(q): widen pairs against +1 bytes, then pairs of int16 to int32
    const __m256i s8 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    const int sum = _mm_cvtsi128_si32(s4);
    cs[j] = static_cast<float>(8 * sum) * ds[j];
    ss[j] = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * d));
    sums[j] = sum;
  }
}

TESSERA_AVX2 void f16_to_f32_row(const uint16_t* src, float* dst, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < k; ++i) dst[i] = _cvtsh_ss(src[i]);
}

// F32, F16 and the kinds whose b is a q8 row, every tile shape.
void fill_tiles(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() {
    t.tile[static_cast<int>(WeightKind::F32)][RM - 1][RN - 1] = tile_float<WeightKind::F32, RM, RN>;
    t.tile[static_cast<int>(WeightKind::F16)][RM - 1][RN - 1] = tile_float<WeightKind::F16, RM, RN>;
    for_each_q8_kind([&]<class Block>(int k) { t.tile[k][RM - 1][RN - 1] = tile_quant<Block, RM, RN>; });
  });
}

void fill_matvec(KernelTable& t) {
  for_each_index<kMatVecRows>([&]<int I>() {
    t.matvec[static_cast<int>(WeightKind::F32)][I] = matvec_float<WeightKind::F32, I + 1>;
    t.matvec[static_cast<int>(WeightKind::F16)][I] = matvec_float<WeightKind::F16, I + 1>;
    for_each_q8_kind([&]<class Block>(int k) { t.matvec[k][I] = matvec_quant<Block, I + 1>; });
  });
}

void fill_interleaved(KernelTable& t) {
  for_each_index<kMaxRN>([&]<int I>() {
    t.interleaved[static_cast<int>(WeightKind::Q4_0)][I] = tile_interleaved<BlockQ4_0, I + 1>;
    t.interleaved[static_cast<int>(WeightKind::Q8_0)][I] = tile_interleaved<BlockQ8_0, I + 1>;
    t.interleaved[static_cast<int>(WeightKind::F16)][I] = tile_interleaved_half<WeightKind::F16, I + 1>;
  });
}

bool cpu_has_avx2_fma_f16c() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & bit_F16C) != 0;  // clang's __builtin_cpu_supports has no "f16c"
}

}  // namespace

const KernelTable* avx2_kernels() noexcept {
  static const KernelTable* table = []() -> const KernelTable* {
    if (!cpu_has_avx2_fma_f16c()) return nullptr;
    static KernelTable t;
    t.isa = "avx2";
    fill_tiles(t);
    fill_matvec(t);
    fill_interleaved(t);
    t.quantize_q8_row = quantize_q8_row;
    t.f16_to_f32_row = f16_to_f32_row;
    fill_kquant_avx2(t);  // the K-quants and IQ4_XS, and the Q8_K quantizer
    fill_bf16_avx2(t);
    return &t;
  }();
  return table;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
const KernelTable* avx2_kernels() noexcept { return nullptr; }
}  // namespace tessera::cpu::mm

#endif
