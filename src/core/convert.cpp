// f32 <-> f16 / bf16: scalar conversions (the reference) and AVX2/F16C rows with the same bits.
#include "tessera/convert.h"

#include <cstring>

#include "core/simd.h"

#if TESSERA_HAVE_X86
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tessera {
namespace {

inline uint32_t float_bits(float f) noexcept {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

bool cpu_has_avx2_f16c() noexcept {
#if TESSERA_HAVE_X86
  static const bool ok = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) return false;
    // F16C from CPUID: clang's __builtin_cpu_supports has no "f16c" (the fuzzers build with clang).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return ok;
#else
  return false;
#endif
}

const char* conversion_isa() noexcept { return cpu_has_avx2_f16c() ? "avx2+f16c" : "scalar"; }

uint16_t fp32_to_fp16(float value) noexcept {
  uint32_t x = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u)  // NaN: quiet it and keep the top payload bits (as F16C does)
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536 (and inf): inf
  if (x >= 0x38800000u) {                                              // normal half
    // Re-bias the exponent and round to nearest even on the 13 dropped bits; a carry may
    // overflow into the exponent (up to inf), which is the correct result.
    x += 0xc8000000u + 0xfffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  // Subnormal or zero: let the FPU round by adding 0.5 (whose ulp is the half subnormal step).
  const float f = bits_float(x) + 0.5f;
  return static_cast<uint16_t>(sign | (float_bits(f) - 0x3f000000u));
}

float fp16_to_fp32(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant << 13));
  }
  if (exp == 31) {
    // A NaN comes back quiet with its payload (as F16C and ggml's arithmetic path do).
    const uint32_t quiet = mant != 0 ? 0x00400000u : 0u;
    return bits_float(sign | 0x7f800000u | quiet | (mant << 13));
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t fp32_to_bf16(float value) noexcept {
  const uint32_t u = float_bits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

namespace ref {

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

}  // namespace ref

#if TESSERA_HAVE_X86
namespace {

// F16C rounds with the immediate's mode (nearest even), overflows to inf, keeps subnormals and
// quiets NaNs keeping the top payload bits: exactly the scalar rules above.
TESSERA_TARGET_AVX2 void fp32_to_fp16_avx2(const float* src, uint16_t* dst, int64_t n) noexcept {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), b);
  }
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

TESSERA_TARGET_AVX2 void fp16_to_fp32_avx2(const uint16_t* src, float* dst, int64_t n) noexcept {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 8));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(b));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

TESSERA_TARGET_AVX2 void fp32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n) noexcept {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i round = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    // Both sides are below 2^31, so the signed compare is the unsigned one.
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), _mm256_and_si256(hi, one)), 16);
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), is_nan);
    // Every lane is in [0, 0xffff], so unsigned saturation packs without changing a value.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

TESSERA_TARGET_AVX2 void bf16_to_fp32_avx2(const uint16_t* src, float* dst, int64_t n) noexcept {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(h, 16));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

}  // namespace
#endif

void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return fp32_to_fp16_avx2(src, dst, n);
#endif
  ref::fp32_to_fp16_row(src, dst, n);
}

void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return fp16_to_fp32_avx2(src, dst, n);
#endif
  ref::fp16_to_fp32_row(src, dst, n);
}

void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return fp32_to_bf16_avx2(src, dst, n);
#endif
  ref::fp32_to_bf16_row(src, dst, n);
}

void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return bf16_to_fp32_avx2(src, dst, n);
#endif
  ref::bf16_to_fp32_row(src, dst, n);
}

}  // namespace tessera
