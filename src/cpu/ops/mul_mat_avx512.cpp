// AVX-512 (F, BW, VL, DQ, VNNI) MUL_MAT kernels, chosen at run time where the CPU has them: the AVX2
// table with the interleaved-weight kernels and the K-quant tiles (mul_mat_kquants_avx512.cpp)
// redone in 512-bit registers.
//
// Each kernel computes what the AVX2 one computes, in the same order, so the table gives the same
// bits as the AVX2 one (and, for the interleaved Q4_0 / Q8_0 rows, as the scalar one):
// - Q4_0 / Q8_0 rows interleaved by 8: one 64-byte load holds two quant words of each of the 8 rows
//   (cpu/interleave.h), b's matching words go to the two halves by one permute, and VPDPBUSD adds
//   the four-byte products straight into 32-bit lanes. The block's integer sums are exact whatever
//   the grouping, and the float work per block (one convert, multiply and multiply-add for 8 rows)
//   is the AVX2 kernel's.
// - F16 interleaved rows against one column: one 32-byte load is piece j of two rows, widened
//   to 16 floats; each half is the AVX2 kernel's 8-lane accumulator of its row, reduced the same way.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/interleave.h"
#include "cpu/ops/mul_mat_avx2.h"
#include "cpu/ops/mul_mat_avx512.h"
#include "tessera/quant.h"

namespace tessera::cpu::mm {
namespace {

using avx512::fold;
using avx512::hsum_high;
using avx512::hsum_low;

// Prefetch distance in an interleaved group's stream: 2 KiB beat the AVX2 kernels' 512 bytes on
// Zen 5 (m250 F16 tg64 about 70 -> 80 tok/s; it streams 47 GB/s on 2 threads).
constexpr size_t kAhead = 2048;

// The 32 quants of one b block as eight 32-bit words w0..w7; pair p is words 2p and 2p + 1
// broadcast to the low and the high 8 lanes, what a load of rows' words 2p, 2p + 1 multiplies.
TESSERA_AVX512 inline __m512i word_pair(__m512i words, int p) {
  const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(2 * p),
                                       _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  return _mm512_permutexvar_epi32(idx, words);
}

template <class Block, int RN>
TESSERA_AVX512 void tile_interleaved(const TileArgs& t) {
  constexpr bool kQ4 = std::is_same_v<Block, BlockQ4_0>;
  constexpr size_t kGroupBlock = kMatVecRows * sizeof(Block);  // one block of 8 rows
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
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
    for (size_t off = 0; off < kGroupBlock; off += 64) _mm_prefetch(blk + kAhead + off, _MM_HINT_T0);
    const __m256 da = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const char* q = blk + 2 * kMatVecRows;
    // The unsigned operand of VPDPBUSD, by pairs of words: Q4_0's nibbles u = q + 8 (the low ones
    // are words 0..3, the high ones 4..7 of b), Q8_0's quants + 128 (their sign bit flipped).
    constexpr int kPairs = 4;
    __m512i ua[kPairs];
    if constexpr (kQ4) {
      const __m512i raw01 = _mm512_loadu_si512(q), raw23 = _mm512_loadu_si512(q + 64);
      ua[0] = _mm512_and_si512(raw01, low4);
      ua[1] = _mm512_and_si512(raw23, low4);
      ua[2] = _mm512_and_si512(_mm512_srli_epi16(raw01, 4), low4);
      ua[3] = _mm512_and_si512(_mm512_srli_epi16(raw23, 4), low4);
    } else {
#pragma GCC unroll 4
      for (int p = 0; p < kPairs; ++p) ua[p] = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * p), flip);
    }
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      const __m512i words =
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(br[n].qs + 32 * j)));
      __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int p = 0; p < kPairs; ++p) s = _mm512_dpbusd_epi32(s, ua[p], word_pair(words, p));
      // Take the offset back: 8 (Q4_0) or 128 (Q8_0) times b's block sum, exactly.
      const __m256i isum = _mm256_sub_epi32(fold(s), _mm256_set1_epi32((kQ4 ? 8 : 128) * br[n].sums[j]));
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(da, _mm256_broadcast_ss(br[n].d + j)),
                               acc[n]);
    }
  }
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n)
    _mm256_storeu_ps(t.last ? t.dst + n * t.dst_stride : t.acc + n * kAccLanes, acc[n]);
}

// Two groups of interleaved Q4_0 / Q8_0 rows (16 rows: group g at t.a, g + 1 eight rows on) x RN
// columns: each register holds one quant word of all 16 rows (group g in the low half), so b's
// word goes to every lane by the broadcast operand of VPDPBUSD, no permute per column, and each
// lane ends the block with its row's whole integer sum. acc = RN x 16 lanes (lane l: row l); the
// float operations of each row are the one-group kernel's, so the bits are too.
template <class Block, int RN>
TESSERA_AVX512 void tile_interleaved_pair(const TileArgs& t) {
  constexpr bool kQ4 = std::is_same_v<Block, BlockQ4_0>;
  constexpr size_t kGroupBlock = kMatVecRows * sizeof(Block);
  constexpr int kWords = 8;  // 32-bit words of quants per row and block (Q4_0: 4 low, then 4 high)
  const char* second = t.a + kInterleaveRows * t.a_stride;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i lows = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
  const __m512i highs = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  const int64_t j0 = t.k0 / 32, j1 = t.k1 / 32;
  Q8Row br[RN];
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) br[n] = q8_row(t.b + n * t.b_stride, t.k);
  __m512 acc[RN];
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) acc[n] = t.first ? _mm512_setzero_ps() : _mm512_loadu_ps(t.acc + 16 * n);
  for (int64_t j = j0; j < j1; ++j) {
    const char* ba = t.a + j * kGroupBlock;
    const char* bb = second + j * kGroupBlock;
    for (size_t off = 0; off < kGroupBlock; off += 64) {
      _mm_prefetch(ba + kAhead + off, _MM_HINT_T0);
      _mm_prefetch(bb + kAhead + off, _MM_HINT_T0);
    }
    const __m512 da = _mm512_cvtph_ps(
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ba))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(bb)), 1));
    const char* qa = ba + 2 * kMatVecRows;
    const char* qb = bb + 2 * kMatVecRows;
    // u[w]: word w of the 16 rows (Q4_0: words 0..3 the low nibbles, 4..7 the high ones, against b's
    // words 0..7; Q8_0: the quants + 128).
    __m512i u[kWords];
    if constexpr (kQ4) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i ra = _mm512_loadu_si512(qa + 64 * h), rb = _mm512_loadu_si512(qb + 64 * h);
        const __m512i w0 = _mm512_permutex2var_epi64(ra, lows, rb),
                      w1 = _mm512_permutex2var_epi64(ra, highs, rb);
        u[2 * h] = _mm512_and_si512(w0, low4);
        u[2 * h + 1] = _mm512_and_si512(w1, low4);
        u[2 * h + 4] = _mm512_and_si512(_mm512_srli_epi16(w0, 4), low4);
        u[2 * h + 5] = _mm512_and_si512(_mm512_srli_epi16(w1, 4), low4);
      }
    } else {
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        const __m512i ra = _mm512_loadu_si512(qa + 64 * h), rb = _mm512_loadu_si512(qb + 64 * h);
        u[2 * h] = _mm512_xor_si512(_mm512_permutex2var_epi64(ra, lows, rb), flip);
        u[2 * h + 1] = _mm512_xor_si512(_mm512_permutex2var_epi64(ra, highs, rb), flip);
      }
    }
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      const int8_t* b = br[n].qs + 32 * j;
      __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int w = 0; w < kWords; ++w) {
        int32_t word;
        std::memcpy(&word, b + 4 * w, 4);
        s = _mm512_dpbusd_epi32(s, u[w], _mm512_set1_epi32(word));
      }
      s = _mm512_sub_epi32(s, _mm512_set1_epi32((kQ4 ? 8 : 128) * br[n].sums[j]));
      acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(da, _mm512_set1_ps(br[n].d[j])), acc[n]);
    }
  }
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) _mm512_storeu_ps(t.last ? t.dst + n * t.dst_stride : t.acc + 16 * n, acc[n]);
}

// Elements i..i + 7 of each of the RN b columns, in both halves of a register.
template <int RN>
TESSERA_AVX512 inline void columns8(const TileArgs& t, int64_t i, __m512 (&bv)[RN]) {
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n)
    bv[n] = _mm512_broadcast_f32x8(_mm256_loadu_ps(reinterpret_cast<const float*>(t.b + n * t.b_stride) + i));
}

// Sixteen halves (piece j of rows 2p and 2p + 1) as f32.
template <WeightKind Kind>
TESSERA_AVX512 inline __m512 load16(const char* p) {
  static_assert(Kind == WeightKind::F16);  // BF16 weights have kernels of their own
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// One column over the whole K: the AVX2 matrix-vector kernel's per-row operations, two rows per
// register (rows whose pieces are whole have no tail).
template <WeightKind Kind>
TESSERA_AVX512 void matvec_interleaved_half(const TileArgs& t) {
  constexpr int kPairs = kInterleaveRows / 2;
  const auto* b = reinterpret_cast<const float*>(t.b);
  __m512 acc[kPairs];
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t i = 0; i < t.k; i += kHalfPiece) {
    const char* piece = t.a + half_offset_in_group(0, i);
    _mm_prefetch(piece + kAhead, _MM_HINT_T0);
    _mm_prefetch(piece + kAhead + 64, _MM_HINT_T0);
    const __m512 bv = _mm512_broadcast_f32x8(_mm256_loadu_ps(b + i));
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p)
      acc[p] = _mm512_fmadd_ps(load16<Kind>(piece + half_offset_in_group(2 * p, 0)), bv, acc[p]);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) {
    t.dst[2 * p] = hsum_low(acc[p]);
    t.dst[2 * p + 1] = hsum_high(acc[p]);
  }
}

// A group x RN columns over a K range: the AVX2 tile's 8-lane operations per row and column, two
// rows per register (acc = 4 row pairs x RN x 16 floats).
template <WeightKind Kind, int RN>
TESSERA_AVX512 void tile_interleaved_half16(const TileArgs& t) {
  constexpr int kPairs = kInterleaveRows / 2;
  __m512 acc[kPairs][RN];
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
      acc[p][n] = t.first ? _mm512_setzero_ps() : _mm512_loadu_ps(t.acc + (p * RN + n) * 16);
  for (int64_t i = t.k0; i < t.k1; i += kHalfPiece) {
    const char* piece = t.a + half_offset_in_group(0, i);
    __m512 bv[RN];
    columns8(t, i, bv);
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const __m512 av = load16<Kind>(piece + half_offset_in_group(2 * p, 0));
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) acc[p][n] = _mm512_fmadd_ps(av, bv[n], acc[p][n]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      if (!t.last) {
        _mm512_storeu_ps(t.acc + (p * RN + n) * 16, acc[p][n]);
        continue;
      }
      float* d = t.dst + n * t.dst_stride + 2 * p;
      d[0] = hsum_low(acc[p][n]);
      d[1] = hsum_high(acc[p][n]);
    }
}

// F16 groups: one column over the whole K by the matrix-vector kernel, else the tile.
template <WeightKind Kind, int RN>
void tile_interleaved_half(const TileArgs& t) {
  if (RN == 1 && t.first && t.last && t.k0 == 0 && t.k1 == t.k) return matvec_interleaved_half<Kind>(t);
  tile_interleaved_half16<Kind, RN>(t);
}

// ---------------------------------------------------------------- float weights in ggml's rows
//
// The AVX2 float tiles' 8-lane operations per row and column (fma over K in steps of 8, the AVX2
// reduction, then the tail one fma at a time), two rows per register: row 2p in the low half, row
// 2p + 1 in the high one (an odd count's last row pairs with itself). The same bits as the AVX2
// tiles for any tile shape and K split, and a 4 x 8 tile (16 accumulators) where AVX2 has 4 x 3.

// Elements i..i + 7 of rows m (low half) and m1 (high half), as f32.
template <WeightKind Kind>
TESSERA_AVX512 inline __m512 load_rows8(const char* a, size_t a_stride, int m, int m1, int64_t i) {
  constexpr int64_t kElem = Kind == WeightKind::F32 ? 4 : 2;
  const char* p0 = a + m * a_stride + kElem * i;
  const char* p1 = a + m1 * a_stride + kElem * i;
  if constexpr (Kind == WeightKind::F32) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(p0))),
                              _mm256_loadu_ps(reinterpret_cast<const float*>(p1)), 1);
  } else {
    const __m256i h =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)), 1);
    static_assert(Kind == WeightKind::F16);  // BF16 weights have kernels of their own
    return _mm512_cvtph_ps(h);
  }
}

// Row m's result from its 8 lanes: the AVX2 reduction, then the tail after the last multiple of 8.
template <WeightKind Kind>
TESSERA_AVX512 inline float finish_row(float s, const char* arow, const float* brow, int64_t kv, int64_t k1) {
  for (int64_t i = kv; i < k1; ++i) s = avx2::fma1(avx2::load1<Kind>(arow, i), brow[i], s);
  return s;
}

// The last range of a 4-row tile without a tail: the 4 x RN sums reduced together, each by
// avx2::hsum's additions in its order (lanes l and l + 4, then 0 + 2 and 1 + 3, then the two),
// with shuffles across the accumulators instead of 7 operations per sum: attention's K rows are a
// head of 64 elements, where the reductions cost more than the 8 steps of FMAs.
template <int RN>
TESSERA_AVX512 void reduce_4xn(const __m512 (&acc)[2][RN], const TileArgs& t) {
  static_assert(RN % 4 == 0);
  // Lane 4c + r of the result comes from lane 4r + c: quarter c holds column c's 4 rows.
  const __m512i transpose = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
#pragma GCC unroll 2
  for (int n0 = 0; n0 < RN; n0 += 4) {
    __m512 x[4], y[2];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {  // quarter r: row r's lanes l + (l + 4), column n0 + c
      const __m512 z1 = acc[0][n0 + c], z2 = acc[1][n0 + c];
      x[c] = _mm512_add_ps(_mm512_shuffle_f32x4(z1, z2, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(z1, z2, _MM_SHUFFLE(3, 1, 3, 1)));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)  // per quarter: (0 + 2, 1 + 3) of columns 2h and 2h + 1
      y[h] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * h], x[2 * h + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(x[2 * h], x[2 * h + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // Per quarter (row): the four columns' sums; then quarter c holds column c.
    const __m512 sums = _mm512_permutexvar_ps(
        transpose, _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1))));
    _mm_storeu_ps(t.dst + (n0 + 0) * t.dst_stride, _mm512_castps512_ps128(sums));
    _mm_storeu_ps(t.dst + (n0 + 1) * t.dst_stride, _mm512_extractf32x4_ps(sums, 1));
    _mm_storeu_ps(t.dst + (n0 + 2) * t.dst_stride, _mm512_extractf32x4_ps(sums, 2));
    _mm_storeu_ps(t.dst + (n0 + 3) * t.dst_stride, _mm512_extractf32x4_ps(sums, 3));
  }
}

template <WeightKind Kind, int RM, int RN>
TESSERA_AVX512 void tile_float(const TileArgs& t) {
  constexpr int kPairs = (RM + 1) / 2;
  __m512 acc[kPairs][RN];
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) {
    const int m = 2 * p, m1 = m + 1 < RM ? m + 1 : m;
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n)
      acc[p][n] = t.first ? _mm512_setzero_ps()
                          : _mm512_insertf32x8(
                                _mm512_castps256_ps512(_mm256_loadu_ps(t.acc + (m * RN + n) * kAccLanes)),
                                _mm256_loadu_ps(t.acc + (m1 * RN + n) * kAccLanes), 1);
  }
  const int64_t kv = t.k1 & ~int64_t{7};  // k0 is a multiple of 8; the tail is done on the last range
  for (int64_t i = t.k0; i < kv; i += 8) {
    __m512 bv[RN];
    columns8(t, i, bv);
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const __m512 av = load_rows8<Kind>(t.a, t.a_stride, 2 * p, 2 * p + 1 < RM ? 2 * p + 1 : 2 * p, i);
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) acc[p][n] = _mm512_fmadd_ps(av, bv[n], acc[p][n]);
    }
  }
  if constexpr (RM == 4 && RN % 4 == 0) {
    if (t.last && kv == t.k1) return reduce_4xn<RN>(acc, t);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) {
    const int m = 2 * p;
    const bool two = m + 1 < RM;
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      if (!t.last) {
        _mm256_storeu_ps(t.acc + (m * RN + n) * kAccLanes, _mm512_castps512_ps256(acc[p][n]));
        if (two)
          _mm256_storeu_ps(t.acc + ((m + 1) * RN + n) * kAccLanes,
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][n]), 1)));
        continue;
      }
      const auto* brow = reinterpret_cast<const float*>(t.b + n * t.b_stride);
      t.dst[n * t.dst_stride + m] =
          finish_row<Kind>(hsum_low(acc[p][n]), t.a + m * t.a_stride, brow, kv, t.k1);
      if (two)
        t.dst[n * t.dst_stride + m + 1] =
            finish_row<Kind>(hsum_high(acc[p][n]), t.a + (m + 1) * t.a_stride, brow, kv, t.k1);
    }
  }
}

// One column over the whole K, RM rows: the AVX2 matrix-vector kernel's per-row operations, two
// rows per register, its prefetch distance (two passes of kMatVecRows rows).
template <WeightKind Kind, int RM>
TESSERA_AVX512 void matvec_float(const TileArgs& t) {
  constexpr int kPairs = (RM + 1) / 2;
  constexpr int64_t kElem = Kind == WeightKind::F32 ? 4 : 2;
  const auto* b = reinterpret_cast<const float*>(t.b);
  const size_t ahead = 2 * kMatVecRows * t.a_stride;
  __m512 acc[kPairs];
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_setzero_ps();
  const int64_t kv = t.k & ~int64_t{7};
  for (int64_t i = 0; i < kv; i += 8) {
    const __m512 bv = _mm512_broadcast_f32x8(_mm256_loadu_ps(b + i));
    if ((i * kElem) % 64 == 0) {
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) _mm_prefetch(t.a + m * t.a_stride + i * kElem + ahead, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p)
      acc[p] = _mm512_fmadd_ps(
          load_rows8<Kind>(t.a, t.a_stride, 2 * p, 2 * p + 1 < RM ? 2 * p + 1 : 2 * p, i), bv, acc[p]);
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) {
    const int m = 2 * p;
    t.dst[m] = finish_row<Kind>(hsum_low(acc[p]), t.a + m * t.a_stride, b, kv, t.k);
    if (m + 1 < RM)
      t.dst[m + 1] = finish_row<Kind>(hsum_high(acc[p]), t.a + (m + 1) * t.a_stride, b, kv, t.k);
  }
}

constexpr int kF32 = static_cast<int>(WeightKind::F32), kF16 = static_cast<int>(WeightKind::F16);
constexpr int kQ4_0 = static_cast<int>(WeightKind::Q4_0), kQ8_0 = static_cast<int>(WeightKind::Q8_0);

// F32 and F16 weights in ggml's rows.
void fill_float(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() {
    t.tile[kF32][RM - 1][RN - 1] = tile_float<WeightKind::F32, RM, RN>;
    t.tile[kF16][RM - 1][RN - 1] = tile_float<WeightKind::F16, RM, RN>;
  });
  for_each_index<kMatVecRows>([&]<int I>() {
    t.matvec[kF32][I] = matvec_float<WeightKind::F32, I + 1>;
    t.matvec[kF16][I] = matvec_float<WeightKind::F16, I + 1>;
  });
  t.wide[kF32] = tile_float<WeightKind::F32, kMaxRM, kWideRN>;
  t.wide[kF16] = tile_float<WeightKind::F16, kMaxRM, kWideRN>;
}

// Q4_0, Q8_0 and F16 weights in the interleaved layout.
void fill_interleaved(KernelTable& t) {
  for_each_index<kMaxRN>([&]<int I>() {
    t.interleaved[kQ4_0][I] = tile_interleaved<BlockQ4_0, I + 1>;
    t.interleaved[kQ8_0][I] = tile_interleaved<BlockQ8_0, I + 1>;
    t.interleaved[kF16][I] = tile_interleaved_half<WeightKind::F16, I + 1>;
  });
  for_each_index<kWideRN>([&]<int I>() {
    t.interleaved_pair[kQ4_0][I] = tile_interleaved_pair<BlockQ4_0, I + 1>;
    t.interleaved_pair[kQ8_0][I] = tile_interleaved_pair<BlockQ8_0, I + 1>;
  });
}

bool cpu_has_avx512_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

bool cpu_has_avx512_vbmi() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vbmi");
}

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

}  // namespace

const KernelTable* avx512_kernels() noexcept {
  static const KernelTable* table = []() -> const KernelTable* {
    if (avx2_kernels() == nullptr || !cpu_has_avx512_vnni()) return nullptr;
    static KernelTable t = *avx2_kernels();
    t.isa = "avx512-vnni";
    fill_interleaved(t);
    fill_float(t);
    fill_kquant_avx512(t);  // the K-quants and IQ4_XS, and their order of b's quants
    if (cpu_has_avx512_vbmi()) fill_kquant_avx512_vbmi(t);  // IQ3_S/IQ3_XXS/IQ2_XXS points by permutes
    if (cpu_has_avx512_bf16()) fill_bf16_avx512(t);         // else the AVX2 table's BF16 kernels (same bits)
    return &t;
  }();
  return table;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
const KernelTable* avx512_kernels() noexcept { return nullptr; }
}  // namespace tessera::cpu::mm

#endif
