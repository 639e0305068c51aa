// AVX2 MUL_MAT tile kernels of the K-quants (Q2_K ... Q6_K), IQ4_XS and the grid I-quants (IQ2_XXS
// ... IQ1_M) against b in Q8_K, and the AVX2 Q8_K quantizer (bit for bit ref::quantize_row_q8_k).
// Chosen at run time with the other AVX2 kernels (mul_mat_avx2.cpp).
//
// A super-block is eight chunks of 32 elements. Each chunk's quants become 32 unsigned bytes u (or
// signed values for IQ4_XS and the grid I-quants, decoded by core/iq_grids.h), maddubs multiplies them with
// b's quants into int16 pair sums, and madd weights those with the group scales into eight int32 lanes (lane
// l: elements 4l..4l + 3 of every chunk); one float multiply-add per super-block applies d_a * d_b. Two
// chunks share each madd (see Pair; b's quants are stored in that order). Offsets folded into u (Q3_K's 4,
// Q6_K's 32) are taken back exactly in integers through b's group sums; the minimums of Q2_K/Q4_K/Q5_K
// through them in float. A tile runs its weight rows one after another, each against all its b columns.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/ops/mul_mat_avx2.h"
#include "cpu/ops/mul_mat_kquants_avx2.h"
#include "tessera/blocks.h"
#include "tessera/convert.h"

namespace tessera::cpu::mm {
namespace {

using avx2::hsum;
using namespace kq;

// One weight row's super-blocks [j0, j1) against RN b rows, into acc[n] (8 lanes per dot).
template <class Block, int RN>
TESSERA_AVX2 inline void row_kquant(const Block* row, size_t ahead_bytes, const Q8KRow (&brow)[RN],
                                    int64_t j0, int64_t j1, __m256 (&acc)[RN]) {
  const __m256i swap = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.swap));
  for (int64_t j = j0; j < j1; ++j) {
    const Block& blk = row[j];
    // Short per-tile streams defeat the hardware prefetcher: fetch the rows four tiles ahead.
    const char* ahead = reinterpret_cast<const char*>(&blk) + ahead_bytes;
    for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
    const Scales s = scales_of(blk);
    __m256i isum[RN];
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) isum[n] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      __m256i u0, u1;
      chunk_pair(blk, i, u0, u1);
      const Pair p = pair_of(u0, u1, swap);
      const __m256i sc = pair_scales<Block>(s, i);
      if constexpr (kSignedQ<Block>) {
        // maddubs wants the unsigned operand: a's sign moves onto b. Two int16 pair sums of
        // IQ4_XS could overflow, so each half gets its own madd.
        const __m256i a0 = _mm256_sign_epi8(p.first, p.first), a1 = _mm256_sign_epi8(p.second, p.second);
#pragma GCC unroll 8
        for (int n = 0; n < RN; ++n) {
          const int8_t* q = brow[n].qs + 256 * j + 64 * i;
          const __m256i q0 = _mm256_sign_epi8(load32(reinterpret_cast<const uint8_t*>(q)), p.first);
          const __m256i q1 = _mm256_sign_epi8(load32(reinterpret_cast<const uint8_t*>(q + 32)), p.second);
          isum[n] = _mm256_add_epi32(isum[n],
                                     _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(a0, q0), sc),
                                                      _mm256_madd_epi16(_mm256_maddubs_epi16(a1, q1), sc)));
        }
      } else {
        // Each int16 lane sums four products u * q of one chunk: at most 4 * 63 * 127 < 2^15.
#pragma GCC unroll 8
        for (int n = 0; n < RN; ++n) {
          const int8_t* q = brow[n].qs + 256 * j + 64 * i;
          const __m256i x = _mm256_add_epi16(
              _mm256_maddubs_epi16(p.first, load32(reinterpret_cast<const uint8_t*>(q))),
              _mm256_maddubs_epi16(p.second, load32(reinterpret_cast<const uint8_t*>(q + 32))));
          isum[n] = _mm256_add_epi32(isum[n], _mm256_madd_epi16(x, sc));
        }
      }
    }
    const __m256 d = _mm256_set1_ps(s.d);
    const __m256 dmin = _mm256_set1_ps(s.dmin);
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      const __m256 db = _mm256_broadcast_ss(brow[n].d + j);
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(brow[n].bsums + 16 * j));
      if constexpr (kSums<Block> == Sums::Offset)
        isum[n] = _mm256_sub_epi32(isum[n], _mm256_madd_epi16(s.sums, bsums));
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[n]), _mm256_mul_ps(d, db), acc[n]);
      if constexpr (kSums<Block> == Sums::Min)
        acc[n] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s.sums, bsums)),
                                  _mm256_mul_ps(dmin, db), acc[n]);
    }
  }
}

// Rows one after another: only one row's RN accumulators are live, and b's RN rows stay in L1.
template <class Block, int RM, int RN>
TESSERA_AVX2 void tile_kquant(const TileArgs& t) {
  const int64_t j0 = t.k0 / 256, j1 = t.k1 / 256;
  Q8KRow brow[RN];
#pragma GCC unroll 8
  for (int n = 0; n < RN; ++n) brow[n] = q8k_row(t.b + n * t.b_stride, t.k);
  for (int m = 0; m < RM; ++m) {
    __m256 acc[RN];
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n)
      acc[n] = t.first ? _mm256_setzero_ps() : _mm256_loadu_ps(t.acc + (m * RN + n) * kAccLanes);
    row_kquant<Block, RN>(reinterpret_cast<const Block*>(t.a + m * t.a_stride), 4 * RM * t.a_stride, brow, j0,
                          j1, acc);
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      if (t.last)
        t.dst[n * t.dst_stride + m] = hsum(acc[n]);
      else
        _mm256_storeu_ps(t.acc + (m * RN + n) * kAccLanes, acc[n]);
    }
  }
}

TESSERA_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

TESSERA_AVX2 inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Same bits as ref::quantize_row_q8_k: the first element of largest magnitude sets the scale
// (-127 / max), quants round to nearest even and clamp at 127.
TESSERA_AVX2 void quantize_q8k_row(const float* src, char* dst, int64_t k) {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* ds = reinterpret_cast<float*>(dst + k);
  auto* bsums = reinterpret_cast<int16_t*>(ds + k / 256);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t j = 0; j < k / 256; ++j) {
    const float* x = src + 256 * j;
    // max(|x|, acc) ignores NaNs as the scalar comparison does
    __m256 amax8 = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i)
      amax8 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), amax8);
    const float amax = hmax(amax8);
    if (amax == 0.0f) {
      std::memset(qs + 256 * j, 0, 256);
      ds[j] = 0.0f;
      std::memset(bsums + 16 * j, 0, 32);
      continue;
    }
    float max = 0.0f;
    const __m256 target = _mm256_set1_ps(amax);
    for (int i = 0; i < 32; ++i) {
      const int hits = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), target, _CMP_EQ_OQ));
      if (hits != 0) {
        max = x[8 * i + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int c = 0; c < 8; ++c) {
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * c + 8 * i));
        q[i] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), top);
      }
      const __m256i bytes =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 256 * j + 32 * c),
                          _mm256_permutevar8x32_epi32(bytes, order));
      bsums[16 * j + 2 * c] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      bsums[16 * j + 2 * c + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
    ds[j] = 1.0f / iscale;
  }
}

// Puts a q8k row's quants in the order of Pair: per 64 bytes (chunks 2i, 2i + 1), first the 32
// bytes that meet Pair::first, then the 32 that meet Pair::second.
TESSERA_AVX2 void pair_q8k_row(char* row, int64_t k) {
  const __m256i swap = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.swap));
  for (int64_t i = 0; i < k; i += 64) {
    auto* p = reinterpret_cast<__m256i*>(row + i);
    const Pair q = pair_of(_mm256_loadu_si256(p), _mm256_loadu_si256(p + 1), swap);
    _mm256_storeu_si256(p, q.first);
    _mm256_storeu_si256(p + 1, q.second);
  }
}

}  // namespace

void fill_kquant_avx2(KernelTable& t) {
  for_each_q8k_kind([&]<class Block>(int k) {
    for_each_tile_shape([&]<int RM, int RN>() { t.tile[k][RM - 1][RN - 1] = tile_kquant<Block, RM, RN>; });
    t.wide[k] = tile_kquant<Block, kMaxRM, kWideRN>;
  });
  t.quantize_q8k_row = quantize_q8k_row;
  t.pair_q8k_row = pair_q8k_row;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
void fill_kquant_avx2(KernelTable&) {}
}  // namespace tessera::cpu::mm

#endif
