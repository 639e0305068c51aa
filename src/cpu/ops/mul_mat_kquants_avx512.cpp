// AVX-512 (BW, VL, VNNI) MUL_MAT tiles of the K-quants (Q2_K ... Q6_K), IQ4_XS and the grid
// I-quants against b in Q8_K, for the AVX-512 table (mul_mat_avx512.cpp).
//
// The AVX2 tiles (mul_mat_kquants_avx2.cpp) with two chunk pairs per register: the low 256 bits
// hold chunks 4h, 4h + 1 of a super-block (Pair order), the high 256 bits chunks 4h + 2, 4h + 3,
// so a super-block is two steps of maddubs and one VPDPWSSD (madd and add in one) per b column
// instead of four of maddubs, madd and add. b's quants are stored to match (pair_q8k_row). The two
// halves' int32 lanes are added at the end of the super-block: the exact integer sums of the AVX2
// tiles, then the same float operations in the same order, so the bits are the AVX2 table's. The
// signs of the IQ2/IQ3 grids are not decoded into the quants: b takes them through mask registers
// (sign_masks). For one b column (generation) a matrix-vector kernel runs up to kMatVecRows rows at
// once (not for the grid I-quants).
//
// Compiled twice: as itself for the AVX-512 table, and by mul_mat_kquants_avx512_vbmi.cpp with
// TESSERA_KQUANT_VBMI for CPUs with AVX512-VBMI, whose byte permutes decode a whole IQ3_S,
// IQ3_XXS or IQ2_XXS super-block's grid points at once (vbmi_points) where the other path looks
// each point up alone; that build fills only the formats it decodes differently.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cstring>
#include <type_traits>
#include <utility>

#include "cpu/ops/mul_mat_avx2.h"
#include "cpu/ops/mul_mat_avx512.h"
#include "cpu/ops/mul_mat_kquants_avx2.h"

#ifdef TESSERA_KQUANT_VBMI
#define KQ_TARGET TESSERA_AVX512_VBMI
#define KQ_INLINE TESSERA_AVX512_VBMI_INLINE
#else
#define KQ_TARGET TESSERA_AVX512
#define KQ_INLINE TESSERA_AVX512_INLINE
#endif

namespace tessera::cpu::mm {
namespace {

using namespace kq;
using avx512::hsum_high;
using avx512::hsum_low;
using avx512::join;

// kq::pair_of on both halves at once.
KQ_INLINE void pair_of(__m512i u0, __m512i u1, __m512i swap, __m512i& first, __m512i& second) {
  constexpr __mmask32 kOddWords = 0xaaaaaaaau;
  first = _mm512_mask_blend_epi16(kOddWords, u0, u1);
  second = _mm512_shuffle_epi8(_mm512_mask_blend_epi16(kOddWords, u1, u0), swap);
}

// Chunks 4h, 4h + 1 (u0) and 4h + 2, 4h + 3 (u1) as kq::chunk_pair gives them for chunk pairs 2h
// and 2h + 1, in the two halves. Q4_K and Q6_K (what the usual mixes hold) unpack both halves at
// once; the others unpack each and join them.
template <class Block>
KQ_INLINE void chunk_pairs(const Block& b, int h, __m512i& u0, __m512i& u1) {
  __m256i a0, a1, b0, b1;
  chunk_pair(b, 2 * h, a0, a1);
  chunk_pair(b, 2 * h + 1, b0, b1);
  u0 = join(a0, b0);
  u1 = join(a1, b1);
}

KQ_INLINE void chunk_pairs(const BlockQ4_K& b, int h, __m512i& u0, __m512i& u1) {
  const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  u0 = _mm512_and_si512(v, low4);
  u1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
}

// lo in every 16-bit lane of the low half, hi in the high half.
KQ_INLINE __m512i halves(short lo, short hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

KQ_INLINE void chunk_pairs(const BlockQ6_K& b, int h, __m512i& u0, __m512i& u1) {
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

// IQ4_XS: chunk c is qs[16c..16c + 15], its elements 0-15 in the low nibbles, 16-31 in the high.
KQ_INLINE void chunk_pairs(const BlockIQ4_XS& b, int h, __m512i& u0, __m512i& u1) {
  const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);  // chunks 4h..4h + 3, one per 128-bit lane
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i grid = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
  const __m512i lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, low4));
  const __m512i hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
  u0 = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi);
  u1 = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15), hi);
}

// The grid I-quants with sign bits: their unsigned points, chunks 4h, 4h + 1 (u0) and 4h + 2, 4h + 3 (u1)
// as chunk_pairs places them.
template <class Block>
requires kSignBits<Block> KQ_INLINE void chunk_pairs(const Block& b, int h, __m512i& u0, __m512i& u1) {
  u0 = join(grid_points(b, 4 * h), grid_points(b, 4 * h + 2));
  u1 = join(grid_points(b, 4 * h + 1), grid_points(b, 4 * h + 3));
}

// Every byte's bit 7 set where the byte's other seven bits have odd parity (iq::kSigns' bytes from
// their 7-bit indices).
KQ_INLINE __m256i even_parity_bytes(__m256i x) {
  __m256i p = _mm256_xor_si256(x, _mm256_srli_epi16(x, 4));  // bit 0 of each byte: its parity
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 2));
  p = _mm256_xor_si256(p, _mm256_srli_epi16(p, 1));
  return _mm256_ternarylogic_epi32(x, _mm256_slli_epi16(p, 7), _mm256_set1_epi8(static_cast<char>(0x80)),
                                   0xf8);  // x | (p7 & 0x80)
}

// Four 7-bit sign indices per 32-bit word (bits 7l..7l + 6) spread to a byte each.
KQ_INLINE __m256i spread_sevens(__m256i v) {
  const __m256i b0 = _mm256_and_si256(v, _mm256_set1_epi32(0x7f));
  const __m256i b1 = _mm256_ternarylogic_epi32(b0, _mm256_slli_epi32(v, 1), _mm256_set1_epi32(0x7f00), 0xf8);
  const __m256i b2 =
      _mm256_ternarylogic_epi32(b1, _mm256_slli_epi32(v, 2), _mm256_set1_epi32(0x7f0000), 0xf8);
  return _mm256_ternarylogic_epi32(b2, _mm256_slli_epi32(v, 3), _mm256_set1_epi32(0x7f000000), 0xf8);
}

// A super-block's sign bits (kSignBits), chunk c's 32 in word c (bit e negates element e).
KQ_INLINE __m256i sign_words(const BlockIQ2_XXS& b) {
  const __m512i qs = _mm512_loadu_si512(b.qs);  // per chunk: 4 index bytes, then 28 sign bits, 4 scale bits
  return even_parity_bytes(spread_sevens(_mm512_cvtepi64_epi32(_mm512_srli_epi64(qs, 32))));
}
KQ_INLINE __m256i sign_words(const BlockIQ2_XS& b) {  // a 7-bit index above each 9-bit point
  return even_parity_bytes(_mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_loadu_si512(b.qs), 9)));
}
KQ_INLINE __m256i sign_words(const BlockIQ2_S& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32));
}
KQ_INLINE __m256i sign_words(const BlockIQ3_XXS& b) {
  return even_parity_bytes(spread_sevens(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 64))));
}
KQ_INLINE __m256i sign_words(const BlockIQ3_S& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.signs));
}

// A super-block's sign masks for the halves' `first` and `second` (kq::first_bits and second_bits
// of chunks 4h, 4h + 1 in the low 32 bits, of 4h + 2, 4h + 3 in the high ones).
struct SignMasks {
  alignas(32) uint64_t of[4] = {};  // half 0 first, half 0 second, half 1 first, half 1 second
};

template <class Block>
KQ_INLINE SignMasks sign_masks(const Block& b) {
  SignMasks m;
  if constexpr (kSignBits<Block>) {
    // Each 64-bit word holds chunks 2i (low) and 2i + 1 (high).
    const __m256i w = sign_words(b);
    const __m256i low = _mm256_set1_epi64x(0x33333333), high = _mm256_set1_epi64x(0xcccccccc);
    const __m256i first =
        _mm256_ternarylogic_epi64(_mm256_and_si256(w, low), _mm256_srli_epi64(w, 32), high, 0xf8);
    const __m256i second = _mm256_ternarylogic_epi64(_mm256_and_si256(_mm256_srli_epi64(w, 2), low),
                                                     _mm256_srli_epi64(w, 30), high, 0xf8);
    // Per 128-bit lane (half): pair 2h's 32 bits, then pair 2h + 1's, as one 64-bit mask.
    const __m256i f = _mm256_shuffle_epi32(first, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256i sc = _mm256_shuffle_epi32(second, _MM_SHUFFLE(2, 0, 2, 0));
    _mm256_store_si256(reinterpret_cast<__m256i*>(m.of), _mm256_unpacklo_epi64(f, sc));
  }
  return m;
}

#ifdef TESSERA_KQUANT_VBMI
template <class Block>
constexpr bool kVbmiPoints = std::is_same_v<Block, BlockIQ3_S> || std::is_same_v<Block, BlockIQ3_XXS> ||
                             std::is_same_v<Block, BlockIQ2_XXS>;

// IQ3_S's grid for byte permutes: plane p holds point i's bytes 2p and 2p + 1 as the low and high
// nibbles of its byte i (every grid byte is below 16).
struct Iq3sPlanes {
  alignas(64) uint8_t of[2][512] = {};
  constexpr Iq3sPlanes() {
    for (int i = 0; i < 512; ++i)
      for (int p = 0; p < 2; ++p) {
        const uint32_t g = iq::kIq3sGrid[i] >> (16 * p);
        if ((g & 0xf0f0u) != 0) throw "an IQ3_S grid byte does not fit a nibble";
        of[p][i] = static_cast<uint8_t>((g & 0xfu) | ((g >> 4) & 0xf0u));
      }
  }
};
inline constexpr Iq3sPlanes kIq3sPlanes;

// The position of a grid byte among its format's few values (a compile-time error if absent).
template <size_t N>
constexpr int code_of(const uint8_t (&values)[N], uint8_t byte) {
  for (size_t c = 0; c < N; ++c)
    if (values[c] == byte) return static_cast<int>(c);
  throw "a grid byte outside its format's values";
}

// IQ3_XXS's grid likewise, by codes: its bytes take eight values, so plane p holds the 3-bit codes
// of a point's bytes 2p and 2p + 1 as nibbles, and `value` maps a code back (a byte shuffle).
struct Iq3xxsPlanes {
  static constexpr uint8_t kValues[8] = {4, 12, 20, 28, 36, 44, 52, 62};
  alignas(64) uint8_t of[2][256] = {};
  alignas(16) uint8_t value[16] = {};
  constexpr Iq3xxsPlanes() {
    for (int i = 0; i < 256; ++i)
      for (int j = 0; j < 4; ++j) {
        const auto byte = static_cast<uint8_t>(iq::kIq3xxsGrid[i] >> (8 * j));
        of[j / 2][i] = static_cast<uint8_t>(of[j / 2][i] | (code_of(kValues, byte) << (4 * (j % 2))));
      }
    for (int c = 0; c < 8; ++c) value[c] = kValues[c];
  }
};
inline constexpr Iq3xxsPlanes kIq3xxsPlanes;

// Byte i of a 512-entry plane at index (q's byte i, with bit 8 from bit i of `ninth`): four
// 128-entry permutes, chosen between by index bits 7 and 8.
KQ_INLINE __m512i plane_lookup(const uint8_t* plane, __m512i q, __mmask64 seventh, __mmask64 ninth) {
  __m512i part[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    part[i] = _mm512_permutex2var_epi8(_mm512_load_si512(plane + 128 * i), q,
                                       _mm512_load_si512(plane + 128 * i + 64));
  return _mm512_mask_blend_epi8(ninth, _mm512_mask_blend_epi8(seventh, part[0], part[1]),
                                _mm512_mask_blend_epi8(seventh, part[2], part[3]));
}

// 16-bit words of four nibbles (a point's bytes) to the four bytes: words 0-3 of each 128-bit lane
// in `first`, words 4-7 in `second`.
KQ_INLINE void nibble_words(__m512i w, __m512i& first, __m512i& second) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i even = _mm512_and_si512(w, low4);                       // bytes 0 and 2 of each point
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);  // bytes 1 and 3
  first = _mm512_unpacklo_epi8(even, odd);
  second = _mm512_unpackhi_epi8(even, odd);
}

// A super-block's 64 points, what chunk_pairs gives: u[2h] and u[2h + 1] are half h's u0 and u1.
struct VbmiPoints {
  __m512i u[4];
};
// The 64 four-byte points of an IQ3 super-block (chunk c's point i the 8c + i-th) from their two
// planes of nibbles, p01 (bytes 0 and 1) and p23.
KQ_INLINE VbmiPoints four_byte_points(__m512i p01, __m512i p23) {
  // Per 128-bit lane k: points 16k..16k + 3 (a), + 4..7 (b), + 8..11 (c), + 12..15 (d), so chunk
  // 2k is lane k of a and b, chunk 2k + 1 lane k of c and d.
  __m512i a, bb, c, d;
  nibble_words(_mm512_unpacklo_epi8(p01, p23), a, bb);
  nibble_words(_mm512_unpackhi_epi8(p01, p23), c, d);
  VbmiPoints v;
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // chunks 4h and 4h + 2 (u0), 4h + 1 and 4h + 3 (u1)
    const __m512i lanes = _mm512_setr_epi64(4 * h, 4 * h + 1, 4 * h + 8, 4 * h + 9, 4 * h + 2, 4 * h + 3,
                                            4 * h + 10, 4 * h + 11);
    v.u[2 * h] = _mm512_permutex2var_epi64(a, lanes, bb);
    v.u[2 * h + 1] = _mm512_permutex2var_epi64(c, lanes, d);
  }
  return v;
}

KQ_INLINE VbmiPoints vbmi_points(const BlockIQ3_S& b) {
  const __m512i q = _mm512_loadu_si512(b.qs);
  uint64_t qh;  // bit 8c + i: the ninth index bit of chunk c's point i
  std::memcpy(&qh, b.qh, 8);
  const __mmask64 seventh = _mm512_movepi8_mask(q), ninth = _cvtu64_mask64(qh);
  return four_byte_points(plane_lookup(kIq3sPlanes.of[0], q, seventh, ninth),
                          plane_lookup(kIq3sPlanes.of[1], q, seventh, ninth));
}

// IQ2_XXS's grid for byte permutes: every byte of its 8-byte points is one of three values, so
// plane p holds the 2-bit codes of a point's bytes 4p..4p + 3 (byte j's at bits 2j), `value` maps
// a code (in a byte's low two bits) back; `arrange[2h + s]` gathers half h's u0 (s = 0: chunks 4h,
// 4h + 2) or u1 (s = 1: chunks 4h + 1, 4h + 3), a point per 64-bit word, its plane bytes at bytes
// 0 and 1.
struct Iq2xxsPlanes {
  static constexpr uint8_t kValues[3] = {8, 25, 43};
  alignas(64) uint8_t of[2][256] = {};
  alignas(64) uint8_t value[64] = {};
  alignas(64) uint8_t arrange[4][64] = {};
  constexpr Iq2xxsPlanes() {
    for (int i = 0; i < 256; ++i)
      for (int j = 0; j < 8; ++j) {
        const auto byte = static_cast<uint8_t>(iq::kIq2xxsGrid[i] >> (8 * j));
        of[j / 4][i] = static_cast<uint8_t>(of[j / 4][i] | (code_of(kValues, byte) << (2 * (j % 4))));
      }
    for (int x = 0; x < 64; ++x) value[x] = (x & 3) < 3 ? kValues[x & 3] : 0;
    for (int u = 0; u < 4; ++u)
      for (int i = 0; i < 8; ++i) {  // chunk c's point indices are qs's bytes 8c..8c + 3
        const int chunk = 4 * (u / 2) + u % 2 + (i < 4 ? 0 : 2);
        const int at = 8 * chunk + i % 4;
        arrange[u][8 * i] = static_cast<uint8_t>(at);
        arrange[u][8 * i + 1] = static_cast<uint8_t>(64 + at);  // the second plane
      }
  }
};
inline constexpr Iq2xxsPlanes kIq2xxsPlanes;

// Byte i of a 256-entry plane at index q's byte i: two 128-entry permutes, chosen by bit 7.
KQ_INLINE __m512i plane_lookup(const uint8_t* plane, __m512i q, __mmask64 seventh) {
  return _mm512_mask_blend_epi8(
      seventh, _mm512_permutex2var_epi8(_mm512_load_si512(plane), q, _mm512_load_si512(plane + 64)),
      _mm512_permutex2var_epi8(_mm512_load_si512(plane + 128), q, _mm512_load_si512(plane + 192)));
}

KQ_INLINE VbmiPoints vbmi_points(const BlockIQ3_XXS& b) {
  const __m512i q = _mm512_loadu_si512(b.qs);  // the 64 point indices (the signs and scales follow)
  const __mmask64 seventh = _mm512_movepi8_mask(q);
  VbmiPoints v = four_byte_points(plane_lookup(kIq3xxsPlanes.of[0], q, seventh),
                                  plane_lookup(kIq3xxsPlanes.of[1], q, seventh));
  const __m512i value =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq3xxsPlanes.value)));
#pragma GCC unroll 4
  for (__m512i& u : v.u) u = _mm512_shuffle_epi8(value, u);
  return v;
}

KQ_INLINE VbmiPoints vbmi_points(const BlockIQ2_XXS& b) {
  const __m512i q = _mm512_loadu_si512(b.qs);  // the other bytes (signs, scales) look up unused codes
  const __mmask64 seventh = _mm512_movepi8_mask(q);
  const __m512i codes0 = plane_lookup(kIq2xxsPlanes.of[0], q, seventh);
  const __m512i codes1 = plane_lookup(kIq2xxsPlanes.of[1], q, seventh);
  const __m512i shifts = _mm512_set1_epi64(0x0e0c0a0806040200);  // byte j takes bits 2j..
  const __m512i value = _mm512_load_si512(kIq2xxsPlanes.value);
  VbmiPoints v;
#pragma GCC unroll 4
  for (int u = 0; u < 4; ++u) {
    const __m512i words =
        _mm512_permutex2var_epi8(codes0, _mm512_load_si512(kIq2xxsPlanes.arrange[u]), codes1);
    v.u[u] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts, words), value);
  }
  return v;
}
#else
template <class Block>
constexpr bool kVbmiPoints = false;
struct VbmiPoints {};
#endif

struct NoPoints {};

// What a super-block's two halves share: its sign masks and, decoded by VBMI, its grid points.
template <class Block>
struct Prepared {
  SignMasks signs;
  [[no_unique_address]] std::conditional_t<kVbmiPoints<Block>, VbmiPoints, NoPoints> points;
};

template <class Block>
KQ_INLINE Prepared<Block> prepare(const Block& b) {
  Prepared<Block> p;
  p.signs = sign_masks(b);
  if constexpr (kVbmiPoints<Block>) p.points = vbmi_points(b);
  return p;
}

// kq::pair_scales of chunk pairs 2h and 2h + 1 in the two 256-bit halves, by one shuffle: the masks
// of the two pairs lie next to each other in kPick.
template <class Block>
KQ_INLINE __m512i half_scales(const Scales& s, int h) {
  if constexpr (kGroups16<Block>)
    return _mm512_shuffle_epi8(_mm512_broadcast_i64x4(h == 0 ? s.lo : s.hi),
                               _mm512_loadu_si512(kPick.two[0]));
  else
    return _mm512_shuffle_epi8(_mm512_broadcast_i64x4(s.lo), _mm512_loadu_si512(kPick.one[2 * h]));
}

// Half h of a super-block (chunk pairs 2h, 2h + 1), ready for maddubs against b: its quants in Pair
// order (unsigned; for the signed formats their magnitudes, with the signs in masks that b takes
// on), and their scales.
struct Half {
  __m512i first, second, sc;
  __mmask64 neg_first = 0, neg_second = 0;  // the signed formats: elements whose b is negated
};

template <class Block>
KQ_INLINE Half unpack_half(const Block& blk, const Scales& s, const Prepared<Block>& prep, int h,
                           __m512i swap) {
  Half half;
  __m512i u0, u1;
  if constexpr (kVbmiPoints<Block>) {
    u0 = prep.points.u[2 * h];
    u1 = prep.points.u[2 * h + 1];
  } else {
    chunk_pairs(blk, h, u0, u1);
  }
  pair_of(u0, u1, swap, half.first, half.second);
  half.sc = half_scales<Block>(s, h);
  if constexpr (kSignBits<Block>) {
    half.neg_first = _cvtu64_mask64(prep.signs.of[2 * h]);
    half.neg_second = _cvtu64_mask64(prep.signs.of[2 * h + 1]);
  } else if constexpr (kSignedQ<Block>) {  // no signed format has -128
    half.neg_first = _mm512_movepi8_mask(half.first);
    half.neg_second = _mm512_movepi8_mask(half.second);
    half.first = _mm512_abs_epi8(half.first);
    half.second = _mm512_abs_epi8(half.second);
  }
  return half;
}

// isum plus a half's scaled products with b's two 64-byte pieces q0 (meeting `first`) and q1.
template <class Block>
KQ_INLINE __m512i add_products(__m512i isum, const Half& half, __m512i q0, __m512i q1) {
  if constexpr (kSignedQ<Block>) {
    // Two int16 pair sums could overflow, so each piece gets its own multiply-add.
    const __m512i zero = _mm512_setzero_si512();
    q0 = _mm512_mask_sub_epi8(q0, half.neg_first, zero, q0);
    q1 = _mm512_mask_sub_epi8(q1, half.neg_second, zero, q1);
    return _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(half.first, q0), half.sc),
                               _mm512_maddubs_epi16(half.second, q1), half.sc);
  } else {
    // Each int16 lane sums four products u * q of one chunk: at most 4 * 63 * 127 < 2^15.
    const __m512i x =
        _mm512_add_epi16(_mm512_maddubs_epi16(half.first, q0), _mm512_maddubs_epi16(half.second, q1));
    return _mm512_dpwssd_epi32(isum, x, half.sc);
  }
}

// One weight row's super-blocks [j0, j1) against RN b rows, into acc[n / 2] (8 lanes per dot,
// column n in half n % 2).
template <class Block, int RN>
KQ_INLINE void row_kquant(const Block* row, size_t ahead_bytes, const Q8KRow (&brow)[RN], int64_t j0,
                          int64_t j1, __m512 (&acc)[(RN + 1) / 2]) {
  const __m512i swap =
      _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.swap)));
  for (int64_t j = j0; j < j1; ++j) {
    const Block& blk = row[j];
    const char* ahead = reinterpret_cast<const char*>(&blk) + ahead_bytes;
    for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
    const Scales s = scales_of(blk);
    const Prepared<Block> prep = prepare(blk);
    __m512i isum[RN];
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) isum[n] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const Half half = unpack_half(blk, s, prep, h, swap);
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) {
        const int8_t* q = brow[n].qs + 256 * j + 128 * h;
        isum[n] = add_products<Block>(isum[n], half, _mm512_loadu_si512(q), _mm512_loadu_si512(q + 64));
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
KQ_TARGET void tile_kquant(const TileArgs& t) {
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
KQ_INLINE __m512i super_block_sums(const Block& blk, const Scales& s, const __m512i (&qb)[4], __m512i swap) {
  __m512i isum = _mm512_setzero_si512();
  const Prepared<Block> prep = prepare(blk);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    isum = add_products<Block>(isum, unpack_half(blk, s, prep, h, swap), qb[2 * h], qb[2 * h + 1]);
  }
  return isum;
}

// Matrix-vector: RM weight rows against one b column, super-block by super-block, so that each load
// of b's quants serves every row, and the float part takes two rows per register (row 2p in the low
// half, 2p + 1 in the high) where the tiles take two columns. Lane for lane the operations of
// row_kquant, so each row has the bits of tile_kquant<Block, 1, 1> (and of the AVX2 tiles).
template <class Block, int RM>
KQ_TARGET void matvec_kquant(const TileArgs& t) {
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

#ifndef TESSERA_KQUANT_VBMI
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

#endif

}  // namespace

#ifdef TESSERA_KQUANT_VBMI
void fill_kquant_avx512_vbmi(KernelTable& t) {
  for_each_q8k_kind([&]<class Block>(int k) {
    if constexpr (kVbmiPoints<Block>) {
      for_each_tile_shape([&]<int RM, int RN>() { t.tile[k][RM - 1][RN - 1] = tile_kquant<Block, RM, RN>; });
      t.wide[k] = tile_kquant<Block, kMaxRM, kWideRN>;
      // No scalar lookups left to need the general registers: the matrix-vector kernel pays here.
      for_each_index<kMatVecRows>([&]<int R>() { t.matvec[k][R] = matvec_kquant<Block, R + 1>; });
    }
  });
}
#else
void fill_kquant_avx512(KernelTable& t) {
  for_each_q8k_kind([&]<class Block>(int k) {
    for_each_tile_shape([&]<int RM, int RN>() { t.tile[k][RM - 1][RN - 1] = tile_kquant<Block, RM, RN>; });
    // The grid I-quants' table lookups need the general registers that several rows at once would
    // take: their tiles, a row at a time, are faster for one column too.
    if constexpr (!kGridIQ<Block>)
      for_each_index<kMatVecRows>([&]<int R>() { t.matvec[k][R] = matvec_kquant<Block, R + 1>; });
    t.wide[k] = tile_kquant<Block, kMaxRM, kWideRN>;
  });
  t.pair_q8k_row = pair_q8k_row;
}
#endif

}  // namespace tessera::cpu::mm

#undef KQ_TARGET
#undef KQ_INLINE

#elif defined(TESSERA_KQUANT_VBMI)  // not x86

namespace tessera::cpu::mm {
void fill_kquant_avx512_vbmi(KernelTable&) {}
}  // namespace tessera::cpu::mm

#else

namespace tessera::cpu::mm {
void fill_kquant_avx512(KernelTable&) {}
}  // namespace tessera::cpu::mm

#endif
