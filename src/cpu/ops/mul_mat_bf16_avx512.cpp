// AVX512_BF16 kernels of BF16 weights: VDPBF16PS is mul_mat_bf16.cpp's order of operations itself
// (lane l of a 256-bit accumulator adds pair l's odd product, then its even one, each rounded
// once), so these give the bits of the other tables (denormals aside, which it flushes), at 32
// products per instruction.
// - Interleaved groups: one 64-byte load is a piece of 8 elements of 4 rows, 4 lanes each, against
//   the piece of b in every 128-bit quarter; a row's 8 lanes are those of its even piece (lanes
//   0-3) and of its odd one (4-7), so a chunk takes 4 loads and 4 instructions per column for 8 rows.
// - ggml's rows (the rows after the last group, views): one 256-bit accumulator per row and column.
#include "cpu/ops/mul_mat_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstring>
#include <utility>

#include "cpu/interleave.h"
#include "cpu/ops/mul_mat_avx512.h"
#include "tessera/convert.h"

#define TESSERA_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c")))

namespace tessera::cpu::mm {
namespace {

using avx2::fma1;
using avx2::hsum;
using avx2::load_acc;
using avx2::store_acc;

// Prefetch distances: the other AVX-512 kernels' 2 KiB in an interleaved group's stream, the AVX2
// float kernels' two passes in ggml's rows.
constexpr size_t kAhead = 2048;
constexpr int kPrefetchPasses = 2;

inline float element(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_fp32(h);
}

// The bits of v as bf16 pairs (a vector cast: no instruction).
TESSERA_AVX512_BF16 inline __m256bh pairs(__m256i v) { return (__m256bh)v; }
TESSERA_AVX512_BF16 inline __m512bh pairs(__m512i v) { return (__m512bh)v; }

TESSERA_AVX512_BF16 inline __m256 dot(__m256 acc, __m256i a, __m256i b) {
  return _mm256_dpbf16_ps(acc, pairs(a), pairs(b));
}
TESSERA_AVX512_BF16 inline __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, pairs(a), pairs(b));
}

// RM rows in ggml's layout x RN columns over [k0, k1), state acc[(m * RN + n) * kAccLanes]; with one
// column it is also the matrix-vector kernel.
template <int RM, int RN>
TESSERA_AVX512_BF16 void tile_rows(const TileArgs& t) {
  __m256 acc[RM][RN];
  load_acc<RM, RN>(t, acc);
  const int64_t whole = t.k & ~int64_t{15};
  const int64_t kv = std::min(t.k1, whole);
  const size_t ahead = kPrefetchPasses * kMatVecRows * t.a_stride;
  for (int64_t i = t.k0; i < kv; i += 16) {
    if (RN == 1 && i % 32 == 0) {
#pragma GCC unroll 8
      for (int m = 0; m < RM; ++m) _mm_prefetch(t.a + m * t.a_stride + 2 * i + ahead, _MM_HINT_T0);
    }
    __m256i bv[RN];
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
      bv[n] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.b + n * t.b_stride + 2 * i));
#pragma GCC unroll 8
    for (int m = 0; m < RM; ++m) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.a + m * t.a_stride + 2 * i));
#pragma GCC unroll 4
      for (int n = 0; n < RN; ++n) acc[m][n] = dot(acc[m][n], av, bv[n]);
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
      const char* arow = t.a + m * t.a_stride;
      const char* brow = t.b + n * t.b_stride;
      float s = hsum(acc[m][n]);
      for (int64_t i = whole; i < t.k; ++i) s = fma1(element(arow + 2 * i), element(brow + 2 * i), s);
      t.dst[n * t.dst_stride + m] = s;
    }
}

// A group of interleaved rows x RN columns over [k0, k1). acc[n][q]: q = 0 / 1 the even pieces of
// rows 0-3 / 4-7, q = 2 / 3 their odd pieces; the state keeps these 4 x 16 floats per column.
template <int RN>
TESSERA_AVX512_BF16 void tile_interleaved(const TileArgs& t) {
  constexpr int kParts = 4;
  __m512 acc[RN][kParts];
#pragma GCC unroll 4
  for (int n = 0; n < RN; ++n)
#pragma GCC unroll 4
    for (int q = 0; q < kParts; ++q)
      acc[n][q] = t.first ? _mm512_setzero_ps() : _mm512_loadu_ps(t.acc + (n * kParts + q) * 16);
  const int64_t whole = t.k & ~int64_t{15};
  const int64_t kv = std::min(t.k1, whole);
  for (int64_t i = t.k0; i < kv; i += 16) {
    const char* p = t.a + half_offset_in_group(0, i);  // the even piece of 8 rows, then the odd one
    if constexpr (RN == 1) {
#pragma GCC unroll 4
      for (int line = 0; line < kParts; ++line) _mm_prefetch(p + kAhead + 64 * line, _MM_HINT_T0);
    }
    __m512i av[kParts];
#pragma GCC unroll 4
    for (int q = 0; q < kParts; ++q) av[q] = _mm512_loadu_si512(p + 64 * q);
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) {
      const char* b = t.b + n * t.b_stride + 2 * i;
      const __m512i be = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
      const __m512i bo = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
      acc[n][0] = dot(acc[n][0], av[0], be);
      acc[n][1] = dot(acc[n][1], av[1], be);
      acc[n][2] = dot(acc[n][2], av[2], bo);
      acc[n][3] = dot(acc[n][3], av[3], bo);
    }
  }
  if (!t.last) {
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
#pragma GCC unroll 4
      for (int q = 0; q < kParts; ++q) _mm512_storeu_ps(t.acc + (n * kParts + q) * 16, acc[n][q]);
    return;
  }
  for (int n = 0; n < RN; ++n) {
    float parts[kParts][16];
    for (int q = 0; q < kParts; ++q) _mm512_storeu_ps(parts[q], acc[n][q]);
    const char* brow = t.b + n * t.b_stride;
    for (int r = 0; r < kInterleaveRows; ++r) {
      const int half = r / 4, at = 4 * (r % 4);
      float lanes[kAccLanes];
      std::memcpy(lanes, parts[half] + at, 4 * sizeof(float));
      std::memcpy(lanes + 4, parts[half + 2] + at, 4 * sizeof(float));
      float s = hsum_order(lanes);
      for (int64_t i = whole; i < t.k; ++i)
        s = fma1(element(t.a + half_offset_in_group(r, i & ~int64_t{7}) + 2 * (i & 7)), element(brow + 2 * i),
                 s);
      t.dst[n * t.dst_stride + r] = s;
    }
  }
}

constexpr int kBF16 = static_cast<int>(WeightKind::BF16);

}  // namespace

void fill_bf16_avx512(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() { t.tile[kBF16][RM - 1][RN - 1] = tile_rows<RM, RN>; });
  for_each_index<kMatVecRows>([&]<int I>() { t.matvec[kBF16][I] = tile_rows<I + 1, 1>; });
  for_each_index<kMaxRN>([&]<int I>() { t.interleaved[kBF16][I] = tile_interleaved<I + 1>; });
  t.wide[kBF16] = nullptr;
}

}  // namespace tessera::cpu::mm

#else  // not x86

namespace tessera::cpu::mm {
void fill_bf16_avx512(KernelTable&) {}
}  // namespace tessera::cpu::mm

#endif
