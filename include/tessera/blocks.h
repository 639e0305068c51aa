#pragma once
// The quantized block formats, byte for byte as ggml stores them in GGUF files (block_q4_0 ...).
// Scales d / dmin are IEEE fp16 bit patterns except Q8_K's, which is a float.
#include <cstdint>

namespace tessera {

inline constexpr int64_t kQuantBlock = 32;   // elements per block of the 32-element types
inline constexpr int64_t kSuperBlock = 256;  // elements per super-block of the K-quants and IQ4_XS

// x = d * (q - 8), q a nibble: element j is the low nibble of qs[j], element j+16 the high one.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// x = d * q + m, nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
// x = d * (q - 16), q five bits: the nibble as Q4_0, bit 4 of element j is bit j of qh (little endian).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
// x = d * q + m, five-bit q as Q5_0.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};

// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q two bits.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d, dmin;
};
// 16 groups of 16 with 6-bit signed scales (packed in 12 bytes, offset by 32); q three bits: two in
// qs, the third (inverted: a clear bit subtracts 4) in hmask.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// 8 groups of 32 with 6-bit scales and mins packed in 12 bytes: x = d * sc * q - dmin * m.
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// 16 groups of 16 with int8 scales: x = d * scales[g] * (q - 32), q six bits (four in ql, two in qh).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// The activation type of the K-quant dot products: x = d * q, with the sum of each group of 16.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
// x = d * kIq4Values[q], nibbles as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
// 8 groups of 32 with 6-bit scales (low nibbles in scales_l, high two bits in scales_h, offset by
// 32): x = d * (scale - 32) * kIq4Values[q], nibbles per group as Q4_0.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

// The I-quants of grid codebooks (src/core/iq_grids.h): a super-block is eight chunks of 32
// elements, each chunk four or eight grid points (groups of 8 or 4 elements) plus signs and a
// scale s per chunk or half-chunk that enters as (2 s + 1).
//
// Chunk c: qs[4c], qs[4c+1] hold the four 8-bit grid indices (kIq2xxsGrid), qs[4c+2], qs[4c+3] four
// 7-bit sign indices and the 4-bit scale in the top bits: x = d * (2 s + 1) / 8 * grid * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[32];
};
// Each qs: a 9-bit grid index (kIq2xsGrid) and a 7-bit sign index; scales[c]: the two half-chunks'
// 4-bit scales (low nibble first): x = d * (2 s + 1) / 8 * grid * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[32];
  uint8_t scales[8];
};
// 10-bit grid indices (kIq2sGrid): low 8 bits in qs[0..31], top 2 in qh; explicit sign bytes in
// qs[32..63]; scales as IQ2_XS.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t scales[8];
};
// qs[0..63]: 8-bit indices of 4-element grid points (kIq3xxsGrid); qs[64..95]: per chunk a 32-bit
// word of four 7-bit sign indices and the 4-bit scale: x = d * (2 s + 1) / 4 * grid * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[96];
};
// 9-bit indices of 4-element grid points (kIq3sGrid): low 8 bits in qs, the ninth in qh; explicit
// sign bytes; 4-bit chunk scales (low nibble first): x = d * (2 s + 1) * grid * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
// 11-bit indices of 8-element points of {-1, 0, 1} (kIq1sGrid): low 8 bits in qs, per chunk qh[c]
// holds the four top-3-bit parts, a 3-bit scale (bits 12-14) and the sign of the chunk's shift
// (bit 15): x = d * (2 s + 1) * (grid +- 1/8).
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
// As IQ1_S with a shift sign per 8 elements (qh: two nibbles of 3 index bits and the sign), 3-bit
// scales per 16 elements, and the fp16 d spread over the top nibbles of the four 16-bit scale words.
struct BlockIQ1_M {
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
// MXFP4 (OCP microscaling): x = 2^(e - 127) * E2M1(q), e an E8M0 exponent byte, q a four-bit
// E2M1 code, nibbles as Q4_0. Stored in ggml's convention: kMxfp4Values are the E2M1 values doubled
// (integers), so x = e8m0_half(e) * kMxfp4Values[q].
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};

static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82 &&
              sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110 && sizeof(BlockIQ1_S) == 50 &&
              sizeof(BlockIQ1_M) == 56);

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// The E2M1 values of MXFP4 doubled: codes 0-7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6; 8-15 the same negated.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale 2^(e - 127), i.e. 2^(e - 128), exactly (e 0 and 1 give f32 denormals); e = 255
// (the format's NaN) reads as 2^127, as ggml does.
inline float e8m0_half(uint8_t e) noexcept {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Q4_K / Q5_K: the 6-bit scale and min of group j (0..7) from the 12 packed bytes.
inline void k_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) noexcept {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: the 16 signed scales (already minus 32) from the 12 packed bytes: low nibbles in bytes
// 0-7 (groups 8-15 in the high nibbles), the top two bits in bytes 8-11.
inline void q3_k_scales(const uint8_t* packed, int8_t out[16]) noexcept {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace tessera
