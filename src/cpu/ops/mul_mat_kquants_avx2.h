#pragma once
// The pieces of the AVX2 K-quant tiles (mul_mat_kquants_avx2.cpp) that the AVX-512 ones
// (mul_mat_kquants_avx512.cpp) share: block scales, chunk unpacking, and the Pair order of b's
// quants. x86 only, compiled per function with TESSERA_AVX2.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "core/iq_grids.h"
#include "cpu/ops/mul_mat_avx2.h"
#include "tessera/blocks.h"
#include "tessera/convert.h"

namespace tessera::cpu::mm::kq {

// fp16 to f32 in one instruction (the same bits as fp16_to_fp32, which is not inlined).
TESSERA_AVX2_INLINE float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

template <class Block>
constexpr bool kGroups16 = std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K> ||
                           std::is_same_v<Block, BlockQ6_K> || std::is_same_v<Block, BlockIQ2_XS> ||
                           std::is_same_v<Block, BlockIQ2_S> || std::is_same_v<Block, BlockIQ1_M>;
// The grid I-quants (core/iq_grids.h).
template <class Block>
constexpr bool kGridIQ = std::is_same_v<Block, BlockIQ2_XXS> || std::is_same_v<Block, BlockIQ2_XS> ||
                         std::is_same_v<Block, BlockIQ2_S> || std::is_same_v<Block, BlockIQ3_XXS> ||
                         std::is_same_v<Block, BlockIQ3_S> || std::is_same_v<Block, BlockIQ1_S> ||
                         std::is_same_v<Block, BlockIQ1_M>;
// Formats whose unpacked quants are signed (never -128), which maddubs takes as |a| with a's sign
// moved onto b.
template <class Block>
constexpr bool kSignedQ = std::is_same_v<Block, BlockIQ4_XS> || kGridIQ<Block>;
// How b's group sums enter: not at all, times dmin (the minimums), or exactly in the integer sum
// (the offsets of Q3_K and Q6_K, times d).
enum class Sums { None, Min, Offset };
template <class Block>
constexpr Sums kSums = kSignedQ<Block>                                                          ? Sums::None
                       : (std::is_same_v<Block, BlockQ3_K> || std::is_same_v<Block, BlockQ6_K>) ? Sums::Offset
                                                                                                : Sums::Min;

// A super-block's scales, ready for the chunk loop.
struct Scales {
  __m256i lo;    // int16 scales 0..7 in both 128-bit halves (32-element groups: all 8)
  __m256i hi;    // 16-element groups: scales 8..15 in both halves
  __m256i sums;  // the 16 int16 coefficients of b's 16 group sums
  float d, dmin;
};

TESSERA_AVX2_INLINE __m128i bytes_of(uint64_t lo, uint64_t hi) {
  return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
}

TESSERA_AVX2_INLINE void split16(__m256i s16, Scales& s) {
  s.lo = _mm256_permute4x64_epi64(s16, 0x44);
  s.hi = _mm256_permute4x64_epi64(s16, 0xee);
}

TESSERA_AVX2_INLINE Scales scales_of(const BlockQ2_K& b) {
  Scales s;
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  split16(_mm256_cvtepu8_epi16(_mm_and_si128(raw, low4)), s);
  s.sums = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4));
  s.d = half_to_float(b.d);
  s.dmin = half_to_float(b.dmin);
  return s;
}

TESSERA_AVX2_INLINE Scales scales_of(const BlockQ3_K& b) {
  // Low nibbles: scales 0..7 in bytes 0..7, 8..15 in their high nibbles. Top two bits: scale j's
  // in byte 8 + j % 4 at bit 2 * (j / 4).
  uint64_t low;
  uint32_t top;
  std::memcpy(&low, b.scales, 8);
  std::memcpy(&top, b.scales + 8, 4);
  constexpr uint64_t k4 = 0x0f0f0f0f0f0f0f0full;
  constexpr uint32_t k2 = 0x03030303u;
  const uint64_t top_lo = (top & k2) | (static_cast<uint64_t>((top >> 2) & k2) << 32);
  const uint64_t top_hi = ((top >> 4) & k2) | (static_cast<uint64_t>((top >> 6) & k2) << 32);
  const __m128i packed = bytes_of((low & k4) | (top_lo << 4), ((low >> 4) & k4) | (top_hi << 4));
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(packed, _mm_set1_epi8(32)));
  Scales s;
  split16(s16, s);
  s.sums = _mm256_slli_epi16(s16, 2);  // u = q + 4
  s.d = half_to_float(b.d);
  s.dmin = 0.0f;
  return s;
}

// Q4_K / Q5_K: the 6-bit scales and minimums of k_scale_min, four at a time in 32-bit words.
template <class Block>
TESSERA_AVX2_INLINE Scales scales_4_5(const Block& b) {
  uint32_t w[3];
  std::memcpy(w, b.scales, 12);
  const uint32_t sc_lo = w[0] & 0x3f3f3f3fu;
  const uint32_t mn_lo = w[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
  Scales s;
  s.lo = _mm256_broadcastsi128_si256(
      _mm_cvtepu8_epi16(bytes_of(sc_lo | (static_cast<uint64_t>(sc_hi) << 32), 0)));
  s.hi = s.lo;
  const __m128i mins = bytes_of(mn_lo | (static_cast<uint64_t>(mn_hi) << 32), 0);
  s.sums = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));  // one minimum per two groups of 16
  s.d = half_to_float(b.d);
  s.dmin = half_to_float(b.dmin);
  return s;
}
TESSERA_AVX2_INLINE Scales scales_of(const BlockQ4_K& b) { return scales_4_5(b); }
TESSERA_AVX2_INLINE Scales scales_of(const BlockQ5_K& b) { return scales_4_5(b); }

TESSERA_AVX2_INLINE Scales scales_of(const BlockQ6_K& b) {
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  Scales s;
  split16(s16, s);
  s.sums = _mm256_slli_epi16(s16, 5);  // u = q + 32
  s.d = half_to_float(b.d);
  s.dmin = 0.0f;
  return s;
}

// Eight 16-bit scales, one per 32-bit word of w, in both 128-bit halves (Scales::lo of 32-element groups).
TESSERA_AVX2_INLINE __m256i eight_scales(__m256i w) {
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(w, w), 0x88);  // packs: per half its four twice
}

// Nibble g of a 32-bit word, for g = 0..7, in word g.
TESSERA_AVX2_INLINE __m256i nibbles(uint32_t v) {
  return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(v)),
                                            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                          _mm256_set1_epi32(0x0f));
}

TESSERA_AVX2_INLINE Scales scales_of(const BlockIQ4_XS& b) {
  // Group g: the low 4 bits from nibble g of scales_l, the high 2 from bits 2g of scales_h, minus 32.
  const __m256i high = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(3));
  const __m256i sc = _mm256_sub_epi32(
      _mm256_or_si256(nibbles(iq::load_u32(b.scales_l)), _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
  Scales s;
  s.lo = eight_scales(sc);
  s.hi = s.lo;
  s.sums = _mm256_setzero_si256();
  s.d = half_to_float(b.d);
  s.dmin = 0.0f;
  return s;
}

// Shuffles that spread pair i's scales over the 16 int16 lanes that madd weights: lane 2l gets the
// scale of chunk 2i's elements in 32-bit lane l, lane 2l + 1 that of chunk 2i + 1's (see Pair).
// 32-element groups: scales 2i and 2i + 1 everywhere. 16-element groups: scales 4i and 4i + 2 in the
// low half, 4i + 1 and 4i + 3 in the high one (of s.lo for i < 2, of s.hi for i >= 2).
struct PickMasks {
  alignas(32) uint8_t one[4][32];
  alignas(32) uint8_t two[2][32];
  alignas(32) uint8_t swap[32];  // swaps the 16-bit halves of every 32-bit lane
  constexpr PickMasks() : one{}, two{}, swap{} {
    for (int p = 0; p < 4; ++p)
      for (int b = 0; b < 32; ++b) one[p][b] = static_cast<uint8_t>(2 * (2 * p + (b / 2) % 2) + b % 2);
    for (int p = 0; p < 2; ++p)
      for (int b = 0; b < 32; ++b)
        two[p][b] = static_cast<uint8_t>(2 * (4 * p + (b >= 16 ? 1 : 0) + 2 * ((b / 2) % 2)) + b % 2);
    for (int b = 0; b < 32; ++b) swap[b] = static_cast<uint8_t>(b ^ 2);
  }
};
inline constexpr PickMasks kPick;

template <class Block>
TESSERA_AVX2_INLINE __m256i pair_scales(const Scales& s, int i) {
  if constexpr (kGroups16<Block>) {
    const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.two[i % 2]));
    return _mm256_shuffle_epi8(i < 2 ? s.lo : s.hi, mask);
  } else {
    return _mm256_shuffle_epi8(s.lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.one[i])));
  }
}

// Moves the bits of every byte left by `by` (right when negative); the callers mask afterwards.
TESSERA_AVX2_INLINE __m256i shift_bits(__m256i v, int by) {
  return by >= 0 ? _mm256_slli_epi16(v, by) : _mm256_srli_epi16(v, -by);
}

TESSERA_AVX2_INLINE __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Chunks 2i and 2i + 1 of a super-block as the bytes u the kernel multiplies.
TESSERA_AVX2_INLINE void chunk_pair(const BlockQ2_K& b, int i, __m256i& u0, __m256i& u1) {
  const __m256i v = load32(b.qs + 32 * (i / 2));
  const int p = 2 * (i % 2);
  const __m256i three = _mm256_set1_epi8(3);
  u0 = _mm256_and_si256(_mm256_srli_epi16(v, 2 * p), three);
  u1 = _mm256_and_si256(_mm256_srli_epi16(v, 2 * p + 2), three);
}

TESSERA_AVX2_INLINE void chunk_pair(const BlockQ3_K& b, int i, __m256i& u0, __m256i& u1) {
  const __m256i v = load32(b.qs + 32 * (i / 2));
  const __m256i h = load32(b.hmask);
  const int p = 2 * (i % 2);
  const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  // The high bit of chunk c is bit c of hmask; set, it adds 4 (u = q + 4).
  u0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * p), three),
                       _mm256_and_si256(shift_bits(h, 2 - 2 * i), four));
  u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * p + 2), three),
                       _mm256_and_si256(shift_bits(h, 1 - 2 * i), four));
}

TESSERA_AVX2_INLINE void chunk_pair(const BlockQ4_K& b, int i, __m256i& u0, __m256i& u1) {
  const __m256i v = load32(b.qs + 32 * i);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  u0 = _mm256_and_si256(v, low4);
  u1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
}

TESSERA_AVX2_INLINE void chunk_pair(const BlockQ5_K& b, int i, __m256i& u0, __m256i& u1) {
  const __m256i v = load32(b.qs + 32 * i);
  const __m256i h = load32(b.qh);
  const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
  // The fifth bit of chunk c is bit c of qh.
  u0 = _mm256_or_si256(_mm256_and_si256(v, low4), _mm256_and_si256(shift_bits(h, 4 - 2 * i), bit4));
  u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                       _mm256_and_si256(shift_bits(h, 3 - 2 * i), bit4));
}

TESSERA_AVX2_INLINE void chunk_pair(const BlockQ6_K& b, int i, __m256i& u0, __m256i& u1) {
  // Chunk 4h + k: nibble k / 2 of ql[64h + 32 (k % 2) + l], bits 2k, 2k + 1 of qh[32h + l].
  const int half = i / 2, k0 = 2 * (i % 2);
  const __m256i l0 = load32(b.ql + 64 * half);
  const __m256i l1 = load32(b.ql + 64 * half + 32);
  const __m256i h = load32(b.qh + 32 * half);
  const __m256i low4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
  const int nib = 4 * (i % 2);
  u0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, nib), low4),
                       _mm256_and_si256(shift_bits(h, 4 - 2 * k0), top2));
  u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, nib), low4),
                       _mm256_and_si256(shift_bits(h, 2 - 2 * k0), top2));
}

// IQ4_XS: signed grid values (group g: low nibbles of qs[16g..], then the high ones).
TESSERA_AVX2_INLINE void chunk_pair(const BlockIQ4_XS& b, int i, __m256i& u0, __m256i& u1) {
  const __m256i raw = load32(b.qs + 32 * i);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i lo = _mm256_and_si256(raw, low4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
  const __m256i grid =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
  u0 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x20));
  u1 = _mm256_shuffle_epi8(grid, _mm256_permute2x128_si256(lo, hi, 0x31));
}

// The grid I-quants: the scales 2 s + 1 of iq::scales_of, from the block's nibbles in SIMD (8 chunk
// scales in 32-bit words, or 16 group scales in 16-bit ones); IQ1_M's 3-bit fields as iq::scales_of
// gives them.
TESSERA_AVX2_INLINE __m256i chunk_nibbles(const BlockIQ2_XXS& b) {  // the top 4 bits of each chunk's
  const __m256i pick = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);   // second 32-bit word
  const __m256i lo =
      _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), pick);
  const __m256i hi =
      _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 16)), pick);
  return _mm256_srli_epi32(_mm256_blend_epi32(lo, hi, 0xf0), 28);
}
TESSERA_AVX2_INLINE __m256i chunk_nibbles(const BlockIQ3_XXS& b) {
  return _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 64)), 28);
}
TESSERA_AVX2_INLINE __m256i chunk_nibbles(const BlockIQ3_S& b) { return nibbles(iq::load_u32(b.scales)); }
TESSERA_AVX2_INLINE __m256i chunk_nibbles(const BlockIQ1_S& b) {
  const __m256i qh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh)));
  return _mm256_and_si256(_mm256_srli_epi32(qh, 12), _mm256_set1_epi32(7));
}
template <class Block>  // IQ2_XS, IQ2_S: a nibble per 16 elements, the low one first
TESSERA_AVX2_INLINE __m256i group_nibbles(const Block& b) {
  uint64_t bytes;
  std::memcpy(&bytes, b.scales, 8);
  const __m128i x = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(bytes)));
  const __m128i lo = _mm_and_si128(x, _mm_set1_epi16(0x0f)), hi = _mm_srli_epi16(x, 4);
  return _mm256_set_m128i(_mm_unpackhi_epi16(lo, hi), _mm_unpacklo_epi16(lo, hi));
}

template <class Block>
requires kGridIQ<Block> TESSERA_AVX2_INLINE Scales scales_of(const Block& b) {
  Scales s;
  const __m256i one = _mm256_set1_epi16(1);
  if constexpr (std::is_same_v<Block, BlockIQ1_M>) {
    alignas(32) int16_t sc[16];
    iq::scales_of(b, sc);
    split16(_mm256_load_si256(reinterpret_cast<const __m256i*>(sc)), s);
  } else if constexpr (kGroups16<Block>) {
    const __m256i n = group_nibbles(b);
    split16(_mm256_or_si256(_mm256_add_epi16(n, n), one), s);
  } else {  // the eight chunk scales, in both halves
    const __m256i n = chunk_nibbles(b);
    s.lo = eight_scales(_mm256_or_si256(_mm256_add_epi32(n, n), _mm256_set1_epi32(1)));
    s.hi = s.lo;
  }
  s.sums = _mm256_setzero_si256();
  s.d = half_to_float(iq::d_bits(b)) * iq::kDFactor<Block>;
  s.dmin = 0.0f;
  return s;
}

// Chunk c of a grid I-quant as iq::chunk_of decodes it. IQ2 and IQ3 store unsigned grid points
// (grid_points: four 8-byte points as 64-bit words; IQ3's pairs of 4-byte points) and a sign bit
// per element; the AVX-512 tiles apply the signs to b through mask registers, the AVX2 ones decode
// signed chunks. IQ1's points of {-1, 0, 1} become 8 g plus a
// shift of +-1 per 8 elements.
template <class Block>
constexpr bool kSignBits =
    kGridIQ<Block> && !std::is_same_v<Block, BlockIQ1_S> && !std::is_same_v<Block, BlockIQ1_M>;

// Grid points gathered into a register by broadcasts and blends: loads and any-port operations where
// inserting them would queue every step on the one shuffle port.
TESSERA_AVX2_INLINE __m256i all64(uint64_t g) { return _mm256_set1_epi64x(static_cast<int64_t>(g)); }
TESSERA_AVX2_INLINE __m256i all32(uint32_t g) { return _mm256_set1_epi32(static_cast<int>(g)); }
TESSERA_AVX2_INLINE __m256i words(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3) {
  return _mm256_blend_epi32(_mm256_blend_epi32(all64(g0), all64(g1), 0x0c),
                            _mm256_blend_epi32(all64(g2), all64(g3), 0xc0), 0xf0);
}
TESSERA_AVX2_INLINE __m256i dwords(const uint32_t (&g)[8]) {
  const __m256i a = _mm256_blend_epi32(all32(g[0]), all32(g[1]), 0x02);
  const __m256i b = _mm256_blend_epi32(all32(g[2]), all32(g[3]), 0x08);
  const __m256i c = _mm256_blend_epi32(all32(g[4]), all32(g[5]), 0x20);
  const __m256i d = _mm256_blend_epi32(all32(g[6]), all32(g[7]), 0x80);
  return _mm256_blend_epi32(_mm256_blend_epi32(a, b, 0x0c), _mm256_blend_epi32(c, d, 0xc0), 0xf0);
}

// IQ2_XXS, IQ2_XS and IQ3_XXS store four 7-bit sign indices per chunk (packed_signs: bits 7l..7l + 6),
// each completed to a byte of even parity (iq::kSigns); IQ2_S and IQ3_S store the sign bytes.
template <class Block>
constexpr bool kSevenBitSigns = std::is_same_v<Block, BlockIQ2_XXS> || std::is_same_v<Block, BlockIQ2_XS> ||
                                std::is_same_v<Block, BlockIQ3_XXS>;

TESSERA_AVX2_INLINE __m256i grid_points(const BlockIQ2_XXS& b, int c) {
  const uint32_t idx = b.qs[4 * c] | (static_cast<uint32_t>(b.qs[4 * c + 1]) << 16);
  const auto& G = iq::kIq2xxsGrid;
  return words(G[idx & 0xff], G[(idx >> 8) & 0xff], G[(idx >> 16) & 0xff], G[idx >> 24]);
}
TESSERA_AVX2_INLINE uint32_t packed_signs(const BlockIQ2_XXS& b, int c) {
  return b.qs[4 * c + 2] | (static_cast<uint32_t>(b.qs[4 * c + 3]) << 16);
}
TESSERA_AVX2_INLINE __m256i grid_points(const BlockIQ2_XS& b, int c) {
  const uint16_t* q = b.qs + 4 * c;
  const auto& G = iq::kIq2xsGrid;
  return words(G[q[0] & 511], G[q[1] & 511], G[q[2] & 511], G[q[3] & 511]);
}
TESSERA_AVX2_INLINE uint32_t packed_signs(const BlockIQ2_XS& b, int c) {
  const uint16_t* q = b.qs + 4 * c;
  return (q[0] >> 9) | ((q[1] >> 9) << 7) | ((q[2] >> 9) << 14) | (static_cast<uint32_t>(q[3] >> 9) << 21);
}
TESSERA_AVX2_INLINE __m256i grid_points(const BlockIQ2_S& b, int c) {
  const uint8_t* q = b.qs + 4 * c;
  const uint32_t qh = b.qh[c];
  const auto& G = iq::kIq2sGrid;
  return words(G[q[0] | ((qh << 8) & 0x300u)], G[q[1] | ((qh << 6) & 0x300u)], G[q[2] | ((qh << 4) & 0x300u)],
               G[q[3] | ((qh << 2) & 0x300u)]);
}
TESSERA_AVX2_INLINE uint32_t sign_bits(const BlockIQ2_S& b, int c) { return iq::load_u32(b.qs + 32 + 4 * c); }
TESSERA_AVX2_INLINE __m256i grid_points(const BlockIQ3_XXS& b, int c) {
  const uint8_t* q = b.qs + 8 * c;
  const auto& G = iq::kIq3xxsGrid;
  const uint32_t g[8] = {G[q[0]], G[q[1]], G[q[2]], G[q[3]], G[q[4]], G[q[5]], G[q[6]], G[q[7]]};
  return dwords(g);
}
TESSERA_AVX2_INLINE uint32_t packed_signs(const BlockIQ3_XXS& b, int c) {
  return iq::load_u32(b.qs + 64 + 4 * c);
}
TESSERA_AVX2_INLINE __m256i grid_points(const BlockIQ3_S& b, int c) {
  const uint8_t* q = b.qs + 8 * c;
  const uint32_t qh = b.qh[c];  // bit i: the ninth bit of point i's index
  const auto& G = iq::kIq3sGrid;
  auto at = [&](int i) { return G[q[i] | ((qh << (8 - i)) & 256u)]; };
  const uint32_t g[8] = {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)};
  return dwords(g);
}
TESSERA_AVX2_INLINE uint32_t sign_bits(const BlockIQ3_S& b, int c) { return iq::load_u32(b.signs + 4 * c); }

// 32 sign bits as bytes: 0xff where the bit is set.
TESSERA_AVX2_INLINE __m256i sign_bytes(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                           2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// The 8 sign bytes of each 7-bit index, 0xff for a negated element.
struct SevenBitSignMasks {
  uint64_t of[128] = {};
  constexpr SevenBitSignMasks() {
    for (int i = 0; i < 128; ++i)
      for (int j = 0; j < 8; ++j)
        if ((iq::kSigns.v[i] >> j) & 1) of[i] |= 0xffull << (8 * j);
  }
};
inline constexpr SevenBitSignMasks kSevenBitSignMasks;

template <class Block>
requires kSignBits<Block> TESSERA_AVX2_INLINE __m256i grid_chunk(const Block& b, int c) {
  __m256i neg;
  if constexpr (kSevenBitSigns<Block>) {
    const uint32_t p = packed_signs(b, c);
    const auto& M = kSevenBitSignMasks.of;
    neg = words(M[p & 127], M[(p >> 7) & 127], M[(p >> 14) & 127], M[(p >> 21) & 127]);
  } else {
    neg = sign_bytes(sign_bits(b, c));
  }
  return _mm256_sub_epi8(_mm256_xor_si256(grid_points(b, c), neg), neg);
}

inline constexpr uint64_t kEveryByte = 0x0101010101010101ull;
TESSERA_AVX2_INLINE __m256i shifted_points(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, int h0, int h1,
                                           int h2, int h3) {
  auto fill = [](int h) { return h < 0 ? ~0ull : kEveryByte; };
  return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), words(g0, g1, g2, g3)),
                         words(fill(h0), fill(h1), fill(h2), fill(h3)));
}
TESSERA_AVX2_INLINE __m256i grid_chunk(const BlockIQ1_S& b, int c) {
  const uint8_t* q = b.qs + 4 * c;
  const int qh = b.qh[c];
  const int h = qh & 0x8000 ? -1 : 1;
  const auto& G = iq::kIq1sGrid;
  return shifted_points(G[q[0] | ((qh << 8) & 0x700)], G[q[1] | ((qh << 5) & 0x700)],
                        G[q[2] | ((qh << 2) & 0x700)], G[q[3] | ((qh >> 1) & 0x700)], h, h, h, h);
}
TESSERA_AVX2_INLINE __m256i grid_chunk(const BlockIQ1_M& b, int c) {
  const uint8_t* q = b.qs + 4 * c;
  const int h0 = b.qh[2 * c], h1 = b.qh[2 * c + 1];
  const auto& G = iq::kIq1sGrid;
  return shifted_points(G[q[0] | ((h0 & 7) << 8)], G[q[1] | ((h0 & 0x70) << 4)], G[q[2] | ((h1 & 7) << 8)],
                        G[q[3] | ((h1 & 0x70) << 4)], h0 & 0x08 ? -1 : 1, h0 & 0x80 ? -1 : 1,
                        h1 & 0x08 ? -1 : 1, h1 & 0x80 ? -1 : 1);
}

template <class Block>
requires kGridIQ<Block> TESSERA_AVX2_INLINE void chunk_pair(const Block& b, int i, __m256i& u0, __m256i& u1) {
  u0 = grid_chunk(b, 2 * i);
  u1 = grid_chunk(b, 2 * i + 1);
}

// Chunks c0 = 2i and c1 = 2i + 1 of a super-block (element e at byte e of u0, u1) regrouped so that
// one madd weights both: 32-bit lane l of `first` holds c0's elements 4l, 4l + 1 then c1's 4l + 2,
// 4l + 3; of `second` c0's 4l + 2, 4l + 3 then c1's 4l, 4l + 1. Every 32-bit lane keeps the elements
// 4l..4l + 3 it had and maddubs the same element pairs, so the integer lane sums are unchanged. b's
// quants are stored in this order (pair_q8k_row).
struct Pair {
  __m256i first, second;
};

TESSERA_AVX2_INLINE Pair pair_of(__m256i u0, __m256i u1, __m256i swap) {
  return {_mm256_blend_epi16(u0, u1, 0xaa), _mm256_shuffle_epi8(_mm256_blend_epi16(u1, u0, 0xaa), swap)};
}

// The sign bits (kSignBits) of chunks 2i and 2i + 1 in the element order of Pair::first and
// Pair::second.
TESSERA_AVX2_INLINE uint32_t first_bits(uint32_t m0, uint32_t m1) {
  return (m0 & 0x33333333u) | (m1 & 0xccccccccu);
}
TESSERA_AVX2_INLINE uint32_t second_bits(uint32_t m0, uint32_t m1) {
  return ((m0 >> 2) & 0x33333333u) | ((m1 << 2) & 0xccccccccu);
}

}  // namespace tessera::cpu::mm::kq
