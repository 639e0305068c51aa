#pragma once
// Pieces shared by the AVX-512 MUL_MAT kernels (mul_mat_avx512.cpp, mul_mat_kquants_avx512.cpp);
// x86 only, compiled per function with the target attribute below.

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*(), which its own
// -Wuninitialized then reports at every use.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/ops/mul_mat_avx2.h"

#define TESSERA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define TESSERA_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"), always_inline)) inline
// The same with AVX512-VBMI (byte permutes across a register), for kernels installed only where
// the CPU has it (Ice Lake and later, Zen 4; not Skylake-X or Cascade Lake).
#define TESSERA_AVX512_VBMI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")))
#define TESSERA_AVX512_VBMI_INLINE                                                                 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c"), \
                 always_inline)) inline

namespace tessera::cpu::mm::avx512 {

// lo in the low 256 bits, hi in the high ones.
TESSERA_AVX512 inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The two 8-lane halves added.
TESSERA_AVX512 inline __m256i fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// The 8-lane sums of the low and the high half, each reduced as avx2::hsum reduces.
TESSERA_AVX512 inline float hsum_low(__m512 v) { return avx2::hsum(_mm512_castps512_ps256(v)); }
TESSERA_AVX512 inline float hsum_high(__m512 v) {
  return avx2::hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

}  // namespace tessera::cpu::mm::avx512
