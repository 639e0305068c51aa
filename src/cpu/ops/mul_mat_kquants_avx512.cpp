// AVX-512 (BW, VL, VNNI) MUL_MAT tiles of the K-quants (Q2_K ... Q6_K) and IQ4_XS against b in
// Q8_K, for the AVX-512 table (mul_mat_avx512.cpp).
//
// The AVX2 tiles (mul_mat_kquants_avx2.cpp) with two chunk pairs per register: the low 256 bits
// hold chunks 4h, 4h + 1 of a super-block (Pair order), the high 256 bits chunks 4h + 2, 4h + 3,
// so a super-block is two steps of maddubs and one VPDPWSSD (madd and add in one) per b column
// instead of four of maddubs, madd and add. b's quants are stored to match (pair_q8k_row). The two
// halves' int32 lanes are added at the end of the super-block: the exact integer sums of the AVX2
// tiles, then the same float operations in the same order, so the bits are the AVX2 table's. For
// one b column (generation) a matrix-vector kernel runs up to kMatVecRows rows at once.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/ops/mul_mat_avx2.h"
#include "cpu/ops/mul_mat_avx512.h"
#include "cpu/ops/mul_mat_kquants_avx2.h"

namespace tessera::cpu::mm {
namespace {

using namespace kq;
using avx512::hsum_high;
using avx512::hsum_low;
using avx512::join;

// kq::pair_of on both halves at once.
TESSERA_AVX512 inline void pair_of(__m512i u0, __m512i u1, __m512i swap, __m512i& first, __m512i& second) {
  constexpr __mmask32 kOddWords = 0xaaaaaaaau;
  first = _mm512_mask_blend_epi16(kOddWords, u0, u1);
  second = _mm512_shuffle_epi8(_mm512_mask_blend_epi16(kOddWords, u1, u0), swap);
}

// Chunks 4h, 4h + 1 (u0) and 4h + 2, 4h + 3 (u1) as kq::chunk_pair gives them for chunk pairs 2h
// and 2h + 1, in the two halves. Q4_K and Q6_K (what the usual mixes hold) unpack both halves at
// once; the others unpack each and join them.
template <class Block>
TESSERA_AVX512 inline void chunk_pairs(const Block& b, int h, __m512i& u0, __m512i& u1) {
  __m256i a0, a1, b0, b1;
  chunk_pair(b, 2 * h, a0, a1);
  chunk_pair(b, 2 * h + 1, b0, b1);
  u0 = join(a0, b0);
  u1 = join(a1, b1);
}

TESSERA_AVX512 inline void chunk_pairs(const BlockQ4_K& b, int h, __m512i& u0, __m512i& u1) {
  const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  u0 = _mm512_and_si512(v, low4);
  u1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
}

// lo in every 16-bit lane of the low half, hi in the high half.
TESSERA_AVX512 inline __m512i halves(short lo, short hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

TESSERA_AVX512 inline void chunk_pairs(const BlockQ6_K& b, int h, __m512i& u0, __m512i& u1) {
  // Chunk pair 2h takes the low nibbles of ql and qh's bits 0-3, pair 2h + 1 the high nibbles and
  // bits 4-7 (see kq::chunk_pair): per-half shift counts.
  const __m512i l0 =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h)));
  const __m512i l1 =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32)));
  const __m512i hq =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
  const __m512i low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
  const __m512i nib = halves(0, 4);
  u0 = _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi16(l0, nib), low4),
                       _mm512_and_si512(_mm512_sllv_epi16(hq, halves(4, 0)), top2));
  u1 = _mm512_or_si512(
      _mm512_and_si512(_mm512_srlv_epi16(l1, nib), low4),
      _mm512_and_si512(_mm512_srlv_epi16(_mm512_sllv_epi16(hq, halves(2, 0)), halves(0, 2)), top2));
}

// Half h of a super-block (chunk pairs 2h, 2h + 1): its quants in Pair order and their scales.
template <class Block>
TESSERA_AVX512 inline void unpack_half(const Block& blk, const Scales& s, int h, __m512i swap, __m512i& first,
                                       __m512i& second, __m512i& sc) {
  __m512i u0, u1;
  chunk_pairs(blk, h, u0, u1);
  pair_of(u0, u1, swap, first, second);
  sc = join(pair_scales<Block>(s, 2 * h), pair_scales<Block>(s, 2 * h + 1));
}

// isum plus a half's scaled products with b's two 64-byte pieces q0 (meeting `first`) and q1.
template <class Block>
TESSERA_AVX512 inline __m512i add_products(__m512i isum, __m512i first, __m512i second, __m512i sc,
                                           __m512i q0, __m512i q1) {
  if constexpr (kSignedQ<Block>) {
    // maddubs wants the unsigned operand: |a|, and a's sign onto b (no signed format has -128). Two int16
    // pair sums could overflow, so each piece gets its own multiply-add.
    const __m512i zero = _mm512_setzero_si512();
    q0 = _mm512_mask_sub_epi8(q0, _mm512_movepi8_mask(first), zero, q0);
    q1 = _mm512_mask_sub_epi8(q1, _mm512_movepi8_mask(second), zero, q1);
    return _mm512_dpwssd_epi32(
        _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(_mm512_abs_epi8(first), q0), sc),
        _mm512_maddubs_epi16(_mm512_abs_epi8(second), q1), sc);
  } else {
    // Each int16 lane sums four products u * q of one chunk: at most 4 * 63 * 127 < 2^15.
    const __m512i x = _mm512_add_epi16(_mm512_maddubs_epi16(first, q0), _mm512_maddubs_epi16(second, q1));
    return _mm512_dpwssd_epi32(isum, x, sc);
  }
}

// One weight row's super-blocks [j0, j1) against RN b rows, into acc[n / 2] (8 lanes per dot,
// column n in half n % 2).
template <class Block, int RN>
TESSERA_AVX512 inline void row_kquant(const Block* row, size_t ahead_bytes, const Q8KRow (&brow)[RN],
                                      int64_t j0, int64_t j1, __m512 (&acc)[(RN + 1) / 2]) {
  const __m512i swap =
      _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.swap)));
  for (int64_t j = j0; j < j1; ++j) {
    const Block& blk = row[j];
    const char* ahead = reinterpret_cast<const char*>(&blk) + ahead_bytes;
    for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
    const Scales s = scales_of(blk);
    __m512i isum[RN];
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) isum[n] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i first, second, sc;
      unpack_half(blk, s, h, swap, first, second, sc);
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) {
        const int8_t* q = brow[n].qs + 256 * j + 128 * h;
        isum[n] = add_products<Block>(isum[n], first, second, sc, _mm512_loadu_si512(q),
                                      _mm512_loadu_si512(q + 64));
      }
    }
    // From here on the AVX2 tile's operations, lane for lane, on two columns per register (the
    // last of an odd count pairs with itself).
    const __m512 d = _mm512_set1_ps(s.d);
    const __m512 dmin = _mm512_set1_ps(s.dmin);
    const __m512i sums = _mm512_broadcast_i64x4(s.sums);
    const __m512i low_halves = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
    const __m512i high_halves = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
#pragma GCC unroll 4
    for (int p = 0; p < (RN + 1) / 2; ++p) {
      const int n = 2 * p, n1 = n + 1 < RN ? n + 1 : n;
      __m512i is = _mm512_add_epi32(_mm512_permutex2var_epi64(isum[n], low_halves, isum[n1]),
                                    _mm512_permutex2var_epi64(isum[n], high_halves, isum[n1]));
      const __m512 db =
          _mm512_mask_broadcastss_ps(_mm512_set1_ps(brow[n].d[j]), 0xff00, _mm_load_ss(brow[n1].d + j));
      const __m512i bsums = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(brow[n].bsums + 16 * j))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(brow[n1].bsums + 16 * j)), 1);
      if constexpr (kSums<Block> == Sums::Offset) is = _mm512_sub_epi32(is, _mm512_madd_epi16(sums, bsums));
      acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(d, db), acc[p]);
      if constexpr (kSums<Block> == Sums::Min)
        acc[p] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(sums, bsums)), _mm512_mul_ps(dmin, db),
                                  acc[p]);
    }
  }
}

// Rows one after another, as the AVX2 tiles; each register holds the 8-lane sums of two columns.
template <class Block, int RM, int RN>
TESSERA_AVX512 void tile_kquant(const TileArgs& t) {
  constexpr int kPairs = (RN + 1) / 2;
  const int64_t j0 = t.k0 / 256, j1 = t.k1 / 256;
  Q8KRow brow[RN];
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) brow[n] = q8k_row(t.b + n * t.b_stride, t.k);
  const __mmask16 last_pair = RN % 2 == 0 ? 0xffff : 0x00ff;  // an odd count's last column alone
  for (int m = 0; m < RM; ++m) {
    float* acc_m = t.acc == nullptr ? nullptr : t.acc + m * RN * kAccLanes;
    __m512 acc[kPairs];
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p)
      acc[p] = t.first
                   ? _mm512_setzero_ps()
                   : _mm512_maskz_loadu_ps(p + 1 < kPairs ? 0xffff : last_pair, acc_m + 2 * p * kAccLanes);
    row_kquant<Block, RN>(reinterpret_cast<const Block*>(t.a + m * t.a_stride), 4 * RM * t.a_stride, brow, j0,
                          j1, acc);
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const int n = 2 * p;
      if (!t.last) {
        _mm512_mask_storeu_ps(acc_m + n * kAccLanes, p + 1 < kPairs ? 0xffff : last_pair, acc[p]);
        continue;
      }
      t.dst[n * t.dst_stride + m] = hsum_low(acc[p]);
      if (n + 1 < RN) t.dst[(n + 1) * t.dst_stride + m] = hsum_high(acc[p]);
    }
  }
}

// One weight row's integer sums for super-block j against b's quants qb (the four 64-byte pieces of
// the super-block, shared by every row of a matrix-vector pass): what row_kquant's isum holds.
template <class Block>
TESSERA_AVX512 inline __m512i super_block_sums(const Block& blk, const Scales& s, const __m512i (&qb)[4],
                                               __m512i swap) {
  __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m512i first, second, sc;
    unpack_half(blk, s, h, swap, first, second, sc);
    isum = add_products<Block>(isum, first, second, sc, qb[2 * h], qb[2 * h + 1]);
  }
  return isum;
}

// Matrix-vector: RM weight rows against one b column, super-block by super-block, so that each load
// of b's quants serves every row, and the float part takes two rows per register (row 2p in the low
// half, 2p + 1 in the high) where the tiles take two columns. Lane for lane the operations of
// row_kquant, so each row has the bits of tile_kquant<Block, 1, 1> (and of the AVX2 tiles).
template <class Block, int RM>
TESSERA_AVX512 void matvec_kquant(const TileArgs& t) {
  constexpr int kPairs = (RM + 1) / 2;
  const Q8KRow brow = q8k_row(t.b, t.k);
  const int64_t j0 = t.k0 / 256, j1 = t.k1 / 256;
  const Block* rows[RM];
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m) rows[m] = reinterpret_cast<const Block*>(t.a + m * t.a_stride);
  // The rows a pass reads are consecutive: read the next pass's as this one goes.
  const size_t ahead = RM * t.a_stride;
  const __m512i swap =
      _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.swap)));
  const __m512i low_halves = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
  const __m512i high_halves = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  __m512 acc[kPairs];
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t j = j0; j < j1; ++j) {
    __m512i qb[4];
    for (int i = 0; i < 4; ++i) qb[i] = _mm512_loadu_si512(brow.qs + 256 * j + 64 * i);
    const __m512 db = _mm512_set1_ps(brow.d[j]);
    const __m512i bsums =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(brow.bsums + 16 * j)));
#pragma GCC unroll 4
    for (int p = 0; p < kPairs; ++p) {
      const int m = 2 * p, m1 = m + 1 < RM ? m + 1 : m;
      const Block& b0 = rows[m][j];
      const Block& b1 = rows[m1][j];
      for (size_t off = 0; off < sizeof(Block); off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(&b0) + ahead + off, _MM_HINT_T0);
        if (m1 != m) _mm_prefetch(reinterpret_cast<const char*>(&b1) + ahead + off, _MM_HINT_T0);
      }
      const Scales s0 = scales_of(b0), s1 = scales_of(b1);
      const __m512i i0 = super_block_sums(b0, s0, qb, swap);
      const __m512i i1 = m1 != m ? super_block_sums(b1, s1, qb, swap) : i0;
      __m512i is = _mm512_add_epi32(_mm512_permutex2var_epi64(i0, low_halves, i1),
                                    _mm512_permutex2var_epi64(i0, high_halves, i1));
      const __m512i sums = join(s0.sums, s1.sums);
      if constexpr (kSums<Block> == Sums::Offset) is = _mm512_sub_epi32(is, _mm512_madd_epi16(sums, bsums));
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(s0.d), _mm256_set1_ps(s1.d), 1);
      acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(d, db), acc[p]);
      if constexpr (kSums<Block> == Sums::Min) {
        const __m512 dmin = _mm512_insertf32x8(_mm512_set1_ps(s0.dmin), _mm256_set1_ps(s1.dmin), 1);
        acc[p] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(sums, bsums)), _mm512_mul_ps(dmin, db),
                                  acc[p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < kPairs; ++p) {
    t.dst[2 * p] = hsum_low(acc[p]);
    if (2 * p + 1 < RM) t.dst[2 * p + 1] = hsum_high(acc[p]);
  }
}

// b's quants for these tiles: the AVX2 tiles' Pair order (per 64 bytes: the 32 that meet
// Pair::first, then the 32 that meet Pair::second), then per 128 bytes (chunk pairs 2h', 2h' + 1)
// the two `first` pieces, then the two `second` pieces, what one 64-byte load per half meets.
void pair_q8k_row(char* row, int64_t k) {
  avx2_kernels()->pair_q8k_row(row, k);
  char piece[32];
  for (int64_t i = 0; i < k; i += 128) {
    std::memcpy(piece, row + i + 32, 32);  // [f0 s0 f1 s1] -> [f0 f1 s0 s1]
    std::memcpy(row + i + 32, row + i + 64, 32);
    std::memcpy(row + i + 64, piece, 32);
  }
}

}  // namespace

void fill_kquant_avx512(KernelTable& t) {
  for_each_q8k_kind([&]<class Block>(int k) {
    for_each_tile_shape([&]<int RM, int RN>() { t.tile[k][RM - 1][RN - 1] = tile_kquant<Block, RM, RN>; });
    for_each_index<kMatVecRows>([&]<int R>() { t.matvec[k][R] = matvec_kquant<Block, R + 1>; });
    t.wide[k] = tile_kquant<Block, kMaxRM, kWideRN>;
  });
  t.pair_q8k_row = pair_q8k_row;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
void fill_kquant_avx512(KernelTable&) {}
}  // namespace tessera::cpu::mm

#endif
