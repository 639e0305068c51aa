#pragma once
// Pieces shared by the AVX2 MUL_MAT tile kernels (mul_mat_avx2.cpp, mul_mat_kquants_avx2.cpp); x86
// only, compiled per function with the target attribute below.
#include <immintrin.h>

#include "cpu/ops/mul_mat_kernels.h"

#define TESSERA_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tessera::cpu::mm::avx2 {

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
