// AVX2 kernels of BF16 weights: mul_mat_bf16.cpp's order of operations by two FMAs per chunk.
// A 32-bit word of bf16 data holds a pair: its high half (the odd element) is an f32 once the low
// half is masked off, its low half (the even one) once shifted up, so each 16-element chunk is one
// load of a and of b, and two FMAs per row and column: the odd products first, then the even ones.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstring>
#include <utility>

#include "cpu/interleave.h"
#include "cpu/ops/mul_mat_avx2.h"
#include "tessera/convert.h"

namespace tessera::cpu::mm {
namespace {

using avx2::fma1;
using avx2::hsum;
using avx2::load_acc;
using avx2::store_acc;

// Prefetch distances of the matrix-vector passes: the float kernels' (mul_mat_avx2.cpp).
constexpr int kPrefetchPasses = 2;
constexpr size_t kInterleavedAhead = 512;

// Where elements i..i + 7 (i % 8 == 0) of weight row m are: in ggml's rows, or (Grouped) in the
// interleaved layout (cpu/interleave.h), a pointing at the group.
template <bool Grouped>
inline const char* elems_at(const TileArgs& t, int m, int64_t i) {
  if constexpr (Grouped) return t.a + half_offset_in_group(m, i);
  return t.a + m * t.a_stride + 2 * i;
}

// Elements i..i + 15 of weight row m (in the interleaved layout, two pieces of 8).
template <bool Grouped>
TESSERA_AVX2 inline __m256i chunk(const TileArgs& t, int m, int64_t i) {
  if constexpr (Grouped)
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(elems_at<true>(t, m, i)))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(elems_at<true>(t, m, i + 8))), 1);
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(elems_at<false>(t, m, i)));
}

TESSERA_AVX2 inline __m256 odd(__m256i w) {
  return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}
TESSERA_AVX2 inline __m256 even(__m256i w) { return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)); }

TESSERA_AVX2 inline __m256i b_chunk(const TileArgs& t, int n, int64_t i) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.b + n * t.b_stride + 2 * i));
}

inline float element(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_fp32(h);
}

// RM rows x RN columns over [k0, k1), state acc[(m * RN + n) * kAccLanes]; with one column it is
// also the matrix-vector kernel (it prefetches the rows ahead).
template <int RM, int RN, bool Grouped>
TESSERA_AVX2 void tile_bf16(const TileArgs& t) {
  __m256 acc[RM][RN];
  load_acc<RM, RN>(t, acc);
  const int64_t whole = t.k & ~int64_t{15};
  const int64_t kv = std::min(t.k1, whole);
  const size_t ahead = Grouped ? kInterleavedAhead : kPrefetchPasses * kMatVecRows * t.a_stride;
  for (int64_t i = t.k0; i < kv; i += 16) {
    if constexpr (RN == 1) {
      if constexpr (Grouped) {  // the group's 256 bytes of this chunk: one stream
        const char* next = elems_at<true>(t, 0, i) + ahead;
        for (int line = 0; line < 4; ++line) _mm_prefetch(next + 64 * line, _MM_HINT_T0);
      } else if (i % 32 == 0) {
#pragma GCC unroll 8
        for (int m = 0; m < RM; ++m) _mm_prefetch(elems_at<false>(t, m, i) + ahead, _MM_HINT_T0);
      }
    }
    {
      __m256 bv[RN];
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) bv[n] = odd(b_chunk(t, n, i));
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) {
        const __m256 av = odd(chunk<Grouped>(t, m, i));
#pragma GCC unroll 4
        for (int n = 0; n < RN; ++n) acc[m][n] = _mm256_fmadd_ps(av, bv[n], acc[m][n]);
      }
    }
    {
      __m256 bv[RN];
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) bv[n] = even(b_chunk(t, n, i));
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) {
        const __m256 av = even(chunk<Grouped>(t, m, i));
#pragma GCC unroll 4
        for (int n = 0; n < RN; ++n) acc[m][n] = _mm256_fmadd_ps(av, bv[n], acc[m][n]);
      }
    }
  }
  if (!t.last) {
    store_acc<RM, RN>(t, acc);
    return;
  }
#pragma GCC unroll 8
  for (int m = 0; m < RM; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      const char* brow = t.b + n * t.b_stride;
      float s = hsum(acc[m][n]);
      for (int64_t i = whole; i < t.k; ++i)
        s = fma1(element(elems_at<Grouped>(t, m, i & ~int64_t{7}) + 2 * (i & 7)), element(brow + 2 * i), s);
      t.dst[n * t.dst_stride + m] = s;
    }
}

// A group of interleaved rows: one column over the whole K in one pass, else two halves of 4 rows x
// up to 3 columns (what 16 registers hold), acc = 8 x RN dots.
template <int RN>
TESSERA_AVX2 void tile_interleaved_bf16(const TileArgs& t) {
  if (RN == 1 && t.first && t.last && t.k0 == 0 && t.k1 == t.k) return tile_bf16<kInterleaveRows, 1, true>(t);
  constexpr int kCols = RN <= 3 ? RN : RN / 2;
  constexpr int kHalf = kInterleaveRows / 2;
  for (int h = 0; h < 2; ++h)
    for (int c0 = 0; c0 < RN; c0 += kCols) {
      TileArgs part = t;
      part.a = t.a + half_offset_in_group(kHalf * h, 0);
      part.b = t.b + c0 * t.b_stride;
      part.dst = t.dst + c0 * t.dst_stride + kHalf * h;
      part.acc = t.acc == nullptr ? nullptr : t.acc + static_cast<size_t>((h * RN + c0) * kHalf * kAccLanes);
      tile_bf16<kHalf, kCols, true>(part);
    }
}

constexpr int kBF16 = static_cast<int>(WeightKind::BF16);

}  // namespace

void fill_bf16_avx2(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() { t.tile[kBF16][RM - 1][RN - 1] = tile_bf16<RM, RN, false>; });
  for_each_index<kMatVecRows>([&]<int I>() { t.matvec[kBF16][I] = tile_bf16<I + 1, 1, false>; });
  for_each_index<kMaxRN>([&]<int I>() { t.interleaved[kBF16][I] = tile_interleaved_bf16<I + 1>; });
  t.wide[kBF16] = nullptr;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
void fill_bf16_avx2(KernelTable&) {}
}  // namespace tessera::cpu::mm

#endif
