// Q4_0 / Q8_0 rows: scalar reference versions and AVX2 versions with the same bits.
#include "tessera/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/simd.h"
#include "tessera/convert.h"

#if TESSERA_HAVE_X86
#include <immintrin.h>
#endif

namespace tessera {

namespace ref {

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    // The element of largest magnitude, with its sign; the first one wins ties.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = static_cast<int8_t>(x[j] * id + 8.5f);
      const int q1 = static_cast<int8_t>(x[j + 16] * id + 8.5f);
      const uint8_t lo = static_cast<uint8_t>(q0 < 15 ? q0 : 15);
      const uint8_t hi = static_cast<uint8_t>(q1 < 15 ? q1 : 15);
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQuantBlock; ++j) dst[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[b * kQuantBlock + j] = static_cast<float>((src[b].qs[j] & 0x0f) - 8) * d;
      dst[b * kQuantBlock + j + 16] = static_cast<float>((src[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int j = 0; j < kQuantBlock; ++j) dst[b * kQuantBlock + j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

}  // namespace ref

#if TESSERA_HAVE_X86
namespace {

TESSERA_TARGET_AVX2 inline float hmax(__m256 v) noexcept {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// max(|x|, acc) over the 32 elements: exact, so its order cannot matter. A NaN element leaves acc
// unchanged (maxps returns its second operand), as the scalar loops ignore NaNs.
TESSERA_TARGET_AVX2 inline float block_amax(const __m256 v[4]) noexcept {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 acc = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) acc = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), acc);
  return hmax(acc);
}

// roundf (halves away from zero): trunc, then step by one where the exact remainder is >= 0.5.
TESSERA_TARGET_AVX2 inline __m256 round_half_away(__m256 x) noexcept {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(x, t));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(x, sign), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
}

TESSERA_TARGET_AVX2 void quantize_q4_0_avx2(const float* src, BlockQ4_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    const float amax = block_amax(v);
    // The scalar loop keeps the first element reaching the largest magnitude (and +0 if none).
    float max = 0.0f;
    if (amax > 0.0f) {
      const __m256 sign = _mm256_set1_ps(-0.0f);
      const __m256 target = _mm256_set1_ps(amax);
      uint32_t hits = 0;
      for (int k = 0; k < 4; ++k)
        hits |= static_cast<uint32_t>(
                    _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v[k]), target, _CMP_EQ_OQ)))
                << (8 * k);
      max = x[__builtin_ctz(hits)];
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    // Separate multiply and add (no FMA in this target), then truncate and clamp as the scalar does.
    const __m256 vid = _mm256_set1_ps(id);
    const __m256 half = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15);
    __m256i q[4];
    for (int k = 0; k < 4; ++k)
      q[k] = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[k], vid), half)), fifteen);
    // Elements 0..15 in the low nibbles, 16..31 in the high ones.
    const __m256i lo = _mm256_packs_epi32(q[0], q[1]);  // 16-bit, lanes interleaved
    const __m256i hi = _mm256_packs_epi32(q[2], q[3]);
    const __m256i both = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(both, both),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst[b].qs), _mm256_castsi256_si128(bytes));
  }
}

TESSERA_TARGET_AVX2 void quantize_q8_0_avx2(const float* src, BlockQ8_0* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const float* x = src + b * kQuantBlock;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(x + 8 * k);
    const float amax = block_amax(v);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvttps_epi32(round_half_away(_mm256_mul_ps(v[k], vid)));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

TESSERA_TARGET_AVX2 void dequantize_q4_0_avx2(const BlockQ4_0* src, float* dst, int64_t n) noexcept {
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(src[b].d));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[b].qs));
    const __m128i lo = _mm_and_si128(qs, nibble);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), nibble);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    float* y = dst + b * kQuantBlock;
    for (int k = 0; k < 4; ++k) {
      const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[k]), eight);
      _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
    }
  }
}

TESSERA_TARGET_AVX2 void dequantize_q8_0_avx2(const BlockQ8_0* src, float* dst, int64_t n) noexcept {
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(src[b].d));
    float* y = dst + b * kQuantBlock;
    for (int k = 0; k < 4; ++k) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src[b].qs + 8 * k));
      _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), d));
    }
  }
}

}  // namespace
#endif

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return quantize_q4_0_avx2(src, dst, n);
#endif
  ref::quantize_row_q4_0(src, dst, n);
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return quantize_q8_0_avx2(src, dst, n);
#endif
  ref::quantize_row_q8_0(src, dst, n);
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return dequantize_q4_0_avx2(src, dst, n);
#endif
  ref::dequantize_row_q4_0(src, dst, n);
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) noexcept {
#if TESSERA_HAVE_X86
  if (cpu_has_avx2_f16c()) return dequantize_q8_0_avx2(src, dst, n);
#endif
  ref::dequantize_row_q8_0(src, dst, n);
}

void to_f32_row(DType type, const void* src, float* dst, int64_t n) noexcept {
  switch (type) {
    case DType::F32:
      // In-place callers (a kernel loading a row into its own result) pass dst == src.
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
      fp16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
      break;
    case DType::BF16:
      bf16_to_fp32_row(static_cast<const uint16_t*>(src), dst, n);
      break;
    case DType::Q4_0:
      dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
      break;
    case DType::Q8_0:
      dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
      break;
    case DType::Q4_1:
      ref::dequantize_row_q4_1(static_cast<const BlockQ4_1*>(src), dst, n);
      break;
    case DType::Q5_0:
      ref::dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n);
      break;
    case DType::Q5_1:
      ref::dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n);
      break;
    case DType::Q2_K:
      ref::dequantize_row_q2_k(static_cast<const BlockQ2_K*>(src), dst, n);
      break;
    case DType::Q3_K:
      ref::dequantize_row_q3_k(static_cast<const BlockQ3_K*>(src), dst, n);
      break;
    case DType::Q4_K:
      ref::dequantize_row_q4_k(static_cast<const BlockQ4_K*>(src), dst, n);
      break;
    case DType::Q5_K:
      ref::dequantize_row_q5_k(static_cast<const BlockQ5_K*>(src), dst, n);
      break;
    case DType::Q6_K:
      ref::dequantize_row_q6_k(static_cast<const BlockQ6_K*>(src), dst, n);
      break;
    case DType::Q8_K:
      ref::dequantize_row_q8_k(static_cast<const BlockQ8_K*>(src), dst, n);
      break;
    case DType::IQ4_NL:
      ref::dequantize_row_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n);
      break;
    case DType::IQ4_XS:
      ref::dequantize_row_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, n);
      break;
    case DType::MXFP4:
      ref::dequantize_row_mxfp4(static_cast<const BlockMXFP4*>(src), dst, n);
      break;
    case DType::IQ2_XXS:
      ref::dequantize_row_iq2_xxs(static_cast<const BlockIQ2_XXS*>(src), dst, n);
      break;
    case DType::IQ2_XS:
      ref::dequantize_row_iq2_xs(static_cast<const BlockIQ2_XS*>(src), dst, n);
      break;
    case DType::IQ2_S:
      ref::dequantize_row_iq2_s(static_cast<const BlockIQ2_S*>(src), dst, n);
      break;
    case DType::IQ3_XXS:
      ref::dequantize_row_iq3_xxs(static_cast<const BlockIQ3_XXS*>(src), dst, n);
      break;
    case DType::IQ3_S:
      ref::dequantize_row_iq3_s(static_cast<const BlockIQ3_S*>(src), dst, n);
      break;
    case DType::IQ1_S:
      ref::dequantize_row_iq1_s(static_cast<const BlockIQ1_S*>(src), dst, n);
      break;
    case DType::IQ1_M:
      ref::dequantize_row_iq1_m(static_cast<const BlockIQ1_M*>(src), dst, n);
      break;
    case DType::I32: {
      const auto* s = static_cast<const int32_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      break;
    }
  }
}

void from_f32_row(DType type, const float* src, void* dst, int64_t n) noexcept {
  switch (type) {
    case DType::F32:
      // In-place callers (a kernel loading a row into its own result) pass dst == src.
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case DType::F16:
      fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::BF16:
      fp32_to_bf16_row(src, static_cast<uint16_t*>(dst), n);
      break;
    case DType::Q4_0:
      quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      break;
    case DType::Q8_0:
      quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      break;
    case DType::Q4_1:
      ref::quantize_row_q4_1(src, static_cast<BlockQ4_1*>(dst), n);
      break;
    case DType::Q5_0:
      ref::quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n);
      break;
    case DType::Q5_1:
      ref::quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n);
      break;
    case DType::Q8_K:
      ref::quantize_row_q8_k(src, static_cast<BlockQ8_K*>(dst), n);
      break;
    case DType::Q2_K:
      ref::quantize_row_q2_k(src, static_cast<BlockQ2_K*>(dst), n);
      break;
    case DType::Q3_K:
      ref::quantize_row_q3_k(src, static_cast<BlockQ3_K*>(dst), n);
      break;
    case DType::Q4_K:
      ref::quantize_row_q4_k(src, static_cast<BlockQ4_K*>(dst), n);
      break;
    case DType::Q5_K:
      ref::quantize_row_q5_k(src, static_cast<BlockQ5_K*>(dst), n);
      break;
    case DType::Q6_K:
      ref::quantize_row_q6_k(src, static_cast<BlockQ6_K*>(dst), n);
      break;
    case DType::IQ4_NL:
      ref::quantize_row_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n);
      break;
    case DType::IQ4_XS:
      ref::quantize_row_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst), n);
      break;
    case DType::MXFP4:
      ref::quantize_row_mxfp4(src, static_cast<BlockMXFP4*>(dst), n);
      break;
    case DType::IQ2_S:
      ref::quantize_row_iq2_s(src, static_cast<BlockIQ2_S*>(dst), n, nullptr);
      break;
    case DType::IQ3_XXS:
      ref::quantize_row_iq3_xxs(src, static_cast<BlockIQ3_XXS*>(dst), n, nullptr);
      break;
    case DType::IQ3_S:
      ref::quantize_row_iq3_s(src, static_cast<BlockIQ3_S*>(dst), n, nullptr);
      break;
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ1_S:
    case DType::IQ1_M:
      // ggml has no row conversion into these (they need an importance matrix): the op table and
      // the callers keep conversions away.
      std::memset(dst, 0, row_bytes(type, n));
      break;
    case DType::I32: {
      auto* d = static_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(src[i]);
      break;
    }
  }
}

bool grid_iquant_needs_importance(DType type) noexcept {
  return type == DType::IQ2_XXS || type == DType::IQ2_XS || type == DType::IQ1_S;
}

void quantize_weights(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  if (importance == nullptr && grid_iquant_needs_importance(type))
    raise(ErrorCode::InvalidArgument, "{} needs an importance matrix (imatrix) to be written", name(type));
  if (importance != nullptr && ref::quantize_row_weighted(type, src, dst, n, importance)) return;
  switch (type) {
    case DType::IQ4_NL:
      return ref::quantize_row_iq4_nl_searched(src, static_cast<BlockIQ4_NL*>(dst), n);
    case DType::IQ2_XXS:
      return ref::quantize_row_iq2_xxs(src, static_cast<BlockIQ2_XXS*>(dst), n, importance);
    case DType::IQ2_XS:
      return ref::quantize_row_iq2_xs(src, static_cast<BlockIQ2_XS*>(dst), n, importance);
    case DType::IQ2_S:
      return ref::quantize_row_iq2_s(src, static_cast<BlockIQ2_S*>(dst), n, importance);
    case DType::IQ3_XXS:
      return ref::quantize_row_iq3_xxs(src, static_cast<BlockIQ3_XXS*>(dst), n, importance);
    case DType::IQ3_S:
      return ref::quantize_row_iq3_s(src, static_cast<BlockIQ3_S*>(dst), n, importance);
    case DType::IQ1_S:
      return ref::quantize_row_iq1_s(src, static_cast<BlockIQ1_S*>(dst), n, importance);
    case DType::IQ1_M:
      return ref::quantize_row_iq1_m(src, static_cast<BlockIQ1_M*>(dst), n, importance);
    default:
      return from_f32_row(type, src, dst, n);
  }
}

}  // namespace tessera

namespace tessera {
namespace {

uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The largest |d * sc * v| a grid I-quant block reaches per unit of its fp16 d.
float grid_reach(DType type) noexcept {
  switch (type) {
    case DType::IQ3_XXS:
      return 62.0f * 31 / 4;
    case DType::IQ3_S:
      return 15.0f * 31;
    case DType::IQ1_S:
    case DType::IQ1_M:
      return 9.0f * 15 / 8;
    default:  // IQ2_*: grid values up to 43, scales up to 31, times 1/8
      return 43.0f * 31 / 8;
  }
}

}  // namespace

void random_blocks(DType type, uint64_t seed, float amax, void* dst, int64_t n) noexcept {
  uint64_t state = seed;
  if (!is_grid_iquant(type)) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = amax * (static_cast<float>(splitmix64(state) >> 40) / 8388608.0f - 1.0f);
    from_f32_row(type, x.data(), dst, n);
    return;
  }
  const size_t bytes = row_bytes(type, n), block = traits(type).block_bytes;
  auto* p = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t r = splitmix64(state);
    std::memcpy(p + i, &r, std::min<size_t>(8, bytes - i));
  }
  for (size_t b = 0; b < bytes; b += block) {
    // A block scale in [0.5, 1] * amax / reach, of either sign.
    const uint64_t r = splitmix64(state);
    const float u = static_cast<float>(r >> 40) / 16777216.0f;
    const float d = (0.5f + 0.5f * u) * amax / grid_reach(type) * ((r & 1) != 0 ? -1.0f : 1.0f);
    const uint16_t h = fp32_to_fp16(d);
    if (type == DType::IQ1_M) {  // d's nibbles at the top of the four scale words
      uint16_t sc[4];
      std::memcpy(sc, p + b + 48, 8);
      for (int w = 0; w < 4; ++w)
        sc[w] = static_cast<uint16_t>((sc[w] & 0x0fff) | (((h >> (4 * w)) & 0xf) << 12));
      std::memcpy(p + b + 48, sc, 8);
    } else {
      std::memcpy(p + b, &h, 2);
    }
  }
}

}  // namespace tessera
