// Vectorised exp, SILU and the f16 attention rows (vec_math.h): scalar, and AVX2 + FMA + F16C chosen at
// run time.
#include "cpu/vec_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/simd.h"
#include "tessera/convert.h"

#if TESSERA_HAVE_X86
#include <immintrin.h>
#define TESSERA_VEC_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace tessera::cpu::vec {
namespace {

void exp_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

double exp_sum_scalar(const float* x, float* y, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - shift);
    sum += y[i];
  }
  return sum;
}

template <typename T>
float element(T a) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return fp16_to_fp32(a);
  else
    return a;
}

template <typename T>
void dot_rows_scalar(const T* a, const float* b, int64_t b_stride, int n, int64_t len, float* out) {
  for (int i = 0; i < n; ++i) {
    float sum = 0.0f;
    for (int64_t t = 0; t < len; ++t) sum += element(a[t]) * b[i * b_stride + t];
    out[i] = sum;
  }
}

void scale_add_f16_scalar(float* y, float s, float w, const uint16_t* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * s + w * fp16_to_fp32(a[i]);
}

void scale_add_f32_scalar(float* y, float s, float w, const float* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * s + w * a[i];
}

void silu_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}

float scale_mask_max_scalar(const float* x, float* y, float scale, const float* mask, float slope,
                            int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] * scale;
    if (mask != nullptr) y[i] += slope * mask[i];
    max = std::max(max, y[i]);  // a NaN y[i] compares false and is left out
  }
  return max;
}

void scale_scalar(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

// exp_poly's constants (see exp8).
constexpr float kExpLo = -104.0f, kExpHi = 89.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693147182464599609375f, kLn2Lo = -1.904654323148236e-9f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

#if TESSERA_HAVE_X86

// exp of eight floats: x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite: ln2 in two parts, the FMA
// keeps n * ln2_hi exact), exp(r) by a degree-7 polynomial (Cephes' expf coefficients, a minimax
// fit on that interval), then 2^n in two halves so that results down to the subnormals and up to
// the overflow come out right without a separate path.
TESSERA_VEC_AVX2 inline __m256 exp8(__m256 x) {
  // Below -104 every result rounds to 0, above 89 to +inf. min/max return their second operand
  // when one is NaN, so a NaN x stays NaN.
  x = _mm256_max_ps(_mm256_set1_ps(kExpLo), _mm256_min_ps(_mm256_set1_ps(kExpHi), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);  // float(ln 2)
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);         // ln 2 - float(ln 2)
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n = 2^n1 * 2^n2 with n1 = floor(n / 2): both halves are normal floats for n in [-150, 129].
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// A lane mask: lanes [0, count) set (count in 0..7).
TESSERA_VEC_AVX2 inline __m256i tail_mask(int64_t count) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lanes);
}

TESSERA_VEC_AVX2 void silu_avx2(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_xor_ps(v, sign)))));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    _mm256_maskstore_ps(y + i, m, _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_xor_ps(v, sign)))));
  }
}

TESSERA_VEC_AVX2 void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    // The tail through the same approximation, so every element of a row is computed alike.
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, exp8(_mm256_maskload_ps(x + i, m)));
  }
}

// Adds the eight floats of e to two double accumulators (the sum of a long row stays exact enough).
TESSERA_VEC_AVX2 inline void accumulate(__m256d& lo, __m256d& hi, __m256 e) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

TESSERA_VEC_AVX2 double exp_sum_avx2(const float* x, float* y, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(y + i, e);
    accumulate(lo, hi, e);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    // Lanes past the end hold exp(0 - shift): zero them so that they add nothing.
    __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), s));
    e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(y + i, m, e);
    accumulate(lo, hi, e);
  }
  const __m256d t = _mm256_add_pd(lo, hi);
  const __m128d u = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
  return _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)));
}

TESSERA_VEC_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TESSERA_VEC_AVX2 inline __m256 load_f16(const uint16_t* a) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
}

TESSERA_VEC_AVX2 inline __m256 load8(const uint16_t* a) { return load_f16(a); }
TESSERA_VEC_AVX2 inline __m256 load8(const float* a) { return _mm256_loadu_ps(a); }
TESSERA_VEC_AVX2 inline float load1(uint16_t a) { return _cvtsh_ss(a); }
TESSERA_VEC_AVX2 inline float load1(float a) { return a; }

// N rows of b against one row of a: each chunk of a is loaded (and converted) once for all N.
template <typename T, int N>
TESSERA_VEC_AVX2 void dot_rows_n(const T* a, const float* b, int64_t b_stride, int64_t len, float* out) {
  __m256 acc[N];
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= len; t += 8) {
    const __m256 x = load8(a + t);
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) acc[i] = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + i * b_stride + t), acc[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i) {
    float sum = hsum(acc[i]);
    for (int64_t u = t; u < len; ++u) sum += load1(a[u]) * b[i * b_stride + u];
    out[i] = sum;
  }
}

template <typename T>
TESSERA_VEC_AVX2 void dot_rows_avx2(const T* a, const float* b, int64_t b_stride, int n, int64_t len,
                                    float* out) {
  switch (n) {
    case 1:
      return dot_rows_n<T, 1>(a, b, b_stride, len, out);
    case 2:
      return dot_rows_n<T, 2>(a, b, b_stride, len, out);
    case 3:
      return dot_rows_n<T, 3>(a, b, b_stride, len, out);
    case 4:
      return dot_rows_n<T, 4>(a, b, b_stride, len, out);
    case 5:
      return dot_rows_n<T, 5>(a, b, b_stride, len, out);
    case 6:
      return dot_rows_n<T, 6>(a, b, b_stride, len, out);
    case 7:
      return dot_rows_n<T, 7>(a, b, b_stride, len, out);
    default:
      return dot_rows_n<T, 8>(a, b, b_stride, len, out);
  }
}

TESSERA_VEC_AVX2 void scale_add_f16_avx2(float* y, float s, float w, const uint16_t* a, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(load_f16(a + i), vw, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs)));
  for (; i < n; ++i) y[i] = y[i] * s + w * _cvtsh_ss(a[i]);
}

TESSERA_VEC_AVX2 void scale_add_f32_avx2(float* y, float s, float w, const float* a, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s), vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_fmadd_ps(_mm256_loadu_ps(a + i), vw, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs)));
  for (; i < n; ++i) y[i] = y[i] * s + w * a[i];
}

// Hides a product from the compiler, so that it cannot contract product + addend into one FMA
// (which rounds once where the reference rounds twice).
TESSERA_VEC_AVX2 inline __m256 rounded(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

// x * scale (+ mask * slope with a mask), each product rounded.
TESSERA_VEC_AVX2 inline __m256 logits8(__m256 x, __m256 scale, const __m256* mask, __m256 slope) {
  const __m256 v = rounded(_mm256_mul_ps(x, scale));
  return mask != nullptr ? _mm256_add_ps(v, rounded(_mm256_mul_ps(*mask, slope))) : v;
}

TESSERA_VEC_AVX2 float scale_mask_max_avx2(const float* x, float* y, float scale, const float* mask,
                                           float slope, int64_t n) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(slope);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 max = neg_inf, mv = neg_inf;
  const __m256* mp = mask != nullptr ? &mv : nullptr;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (mask != nullptr) mv = _mm256_loadu_ps(mask + i);
    const __m256 v = logits8(_mm256_loadu_ps(x + i), vs, mp, vm);
    _mm256_storeu_ps(y + i, v);
    max = _mm256_max_ps(v, max);  // the second operand where v is NaN: NaNs are left out
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    if (mask != nullptr) mv = _mm256_maskload_ps(mask + i, m);
    const __m256 v = logits8(_mm256_maskload_ps(x + i, m), vs, mp, vm);
    _mm256_maskstore_ps(y + i, m, v);
    max = _mm256_max_ps(_mm256_blendv_ps(neg_inf, v, _mm256_castsi256_ps(m)), max);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps(max, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

TESSERA_VEC_AVX2 void scale_avx2(float* y, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs));
  for (; i < n; ++i) y[i] *= s;
}

bool cpu_has_avx2_fma_f16c() noexcept {
  __builtin_cpu_init();
  return cpu_has_avx2_f16c() && __builtin_cpu_supports("fma");
}

#endif

}  // namespace

float exp_poly(float x) noexcept {
  if (std::isnan(x)) return x;
  x = std::max(kExpLo, std::min(kExpHi, x));
  const float n = std::nearbyint(x * kLog2e);  // to nearest, ties to even, as _mm256_round_ps
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kExpPoly[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kExpPoly[i]);
  p = std::fma(p, r * r, r + 1.0f);
  const int ni = static_cast<int>(n), n1 = ni >> 1, n2 = ni - n1;
  const auto s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const auto s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

const MathKernels& scalar_math() noexcept {
  static const MathKernels k{"scalar",
                             exp_scalar,
                             exp_sum_scalar,
                             dot_rows_scalar<uint16_t>,
                             scale_add_f16_scalar,
                             dot_rows_scalar<float>,
                             scale_add_f32_scalar,
                             silu_scalar,
                             scale_mask_max_scalar,
                             scale_scalar};
  return k;
}

const MathKernels* avx2_math() noexcept {
#if TESSERA_HAVE_X86
  static const MathKernels k{"avx2",
                             exp_avx2,
                             exp_sum_avx2,
                             dot_rows_avx2<uint16_t>,
                             scale_add_f16_avx2,
                             dot_rows_avx2<float>,
                             scale_add_f32_avx2,
                             silu_avx2,
                             scale_mask_max_avx2,
                             scale_avx2};
  static const MathKernels* table = cpu_has_avx2_fma_f16c() ? &k : nullptr;
  return table;
#else
  return nullptr;
#endif
}

const MathKernels& math() noexcept {
  static const MathKernels& best = avx2_math() != nullptr ? *avx2_math() : scalar_math();
  return best;
}

}  // namespace tessera::cpu::vec
