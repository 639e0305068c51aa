#pragma once
// Pieces shared by the AVX2 MUL_MAT tile kernels (mul_mat_avx2.cpp, mul_mat_kquants_avx2.cpp); x86
// only, compiled per function with the target attribute below.
#include <immintrin.h>

#include <cstring>

#include "cpu/ops/mul_mat_kernels.h"
#include "tessera/convert.h"

#define TESSERA_AVX2 __attribute__((target("avx2,fma,f16c")))
// For the pieces of a kernel's inner loop: a call there would spill every vector register.
#define TESSERA_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace tessera::cpu::mm::avx2 {

// One fused multiply-add (the tails of the float tiles, after the 8-lane part).
TESSERA_AVX2 inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// Element i of a float weight row, as f32.
template <WeightKind Kind>
TESSERA_AVX2 inline float load1(const char* row, int64_t i) {
  if constexpr (Kind == WeightKind::F32) {
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    static_assert(Kind == WeightKind::F16);  // BF16 weights have kernels of their own
    return _cvtsh_ss(h);
  }
}

TESSERA_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int RM, int RN>
TESSERA_AVX2 inline void load_acc(const TileArgs& t, __m256 (&acc)[RM][RN]) {
#pragma GCC unroll 4
  for (int m = 0; m < RM; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n)
      acc[m][n] = t.first ? _mm256_setzero_ps() : _mm256_loadu_ps(t.acc + (m * RN + n) * kAccLanes);
}

template <int RM, int RN>
TESSERA_AVX2 inline void store_acc(const TileArgs& t, __m256 (&acc)[RM][RN]) {
#pragma GCC unroll 4
  for (int m = 0; m < RM; ++m)
#pragma GCC unroll 4
    for (int n = 0; n < RN; ++n) _mm256_storeu_ps(t.acc + (m * RN + n) * kAccLanes, acc[m][n]);
}

}  // namespace tessera::cpu::mm::avx2
