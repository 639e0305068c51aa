// Shared by every program (prepended to each): element types in DType's order, scalar loads and
// stores through f32, the device layout of Q4_0 / Q8_0 (all quants, then all fp16 scales), and
// the other block types in ggml's native blocks, decoded 32 elements (a chunk) at a time.
// OpenCL C 1.2 only: halfs are read and written with vload_half / vstore_half (no fp16 math).

// Exact products and sums, as on the CPU (no fused multiply-add).
#pragma OPENCL FP_CONTRACT OFF

#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_Q4_0 3
#define T_Q8_0 4
#define T_I32 5
#define T_Q4_1 6
#define T_Q5_0 7
#define T_Q5_1 8
#define T_Q2_K 9
#define T_Q3_K 10
#define T_Q4_K 11
#define T_Q5_K 12
#define T_Q6_K 13
#define T_Q8_K 14
#define T_IQ4_NL 15
#define T_IQ4_XS 16
#define T_IQ2_XXS 17
#define T_IQ2_XS 18
#define T_IQ2_S 19
#define T_IQ3_XXS 20
#define T_IQ3_S 21
#define T_IQ1_S 22
#define T_IQ1_M 23
#define T_MXFP4 24

#define QK 32

// Q4_0 and Q8_0 live in the split device layout; every other block type in ggml's blocks.
inline bool is_split(int type) { return type == T_Q4_0 || type == T_Q8_0; }
inline bool is_quant(int type) { return is_split(type) || type >= T_Q4_1; }
// Elements per block: 32, or 256 for the super-block types.
inline long block_elems(int type) {
  return type >= T_Q2_K && type != T_IQ4_NL && type != T_MXFP4 ? 256 : 32;
}
// Bytes per block in ggml's image (the strides nb count these).
inline long block_bytes(int type) {
  switch (type) {
    case T_Q4_0: return 18;
    case T_Q8_0: return 34;
    case T_Q4_1: return 20;
    case T_Q5_0: return 22;
    case T_Q5_1: return 24;
    case T_Q2_K: return 84;
    case T_Q3_K: return 110;
    case T_Q4_K: return 144;
    case T_Q5_K: return 176;
    case T_Q6_K: return 210;
    case T_Q8_K: return 292;
    case T_IQ4_NL: return 18;
    case T_IQ2_XXS: return 66;
    case T_IQ2_XS: return 74;
    case T_IQ2_S: return 82;
    case T_IQ3_XXS: return 98;
    case T_IQ3_S: return 110;
    case T_IQ1_S: return 50;
    case T_IQ1_M: return 56;
    case T_MXFP4: return 17;
    default: return 136;  // T_IQ4_XS
  }
}
// Quant bytes per block in the split layout.
inline long quant_bytes(int type) { return type == T_Q4_0 ? 16 : 32; }

inline ushort f32_to_bf16(float v) {
  const uint u = as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);  // NaN stays NaN
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                   // nearest even
}

// A scalar (non-quantized) element as f32.
inline float load_f32(global const char* p, int type) {
  switch (type) {
    case T_F16:
      return vload_half(0, (global const half*)p);
    case T_BF16:
      return as_float(((uint)*(global const ushort*)p) << 16);
    case T_I32:
      return (float)*(global const int*)p;
    default:
      return *(global const float*)p;
  }
}

inline void store_f32(global char* p, int type, float v) {
  switch (type) {
    case T_F16:
      vstore_half_rte(v, 0, (global half*)p);
      break;
    case T_BF16:
      *(global ushort*)p = f32_to_bf16(v);
      break;
    case T_I32:
      *(global int*)p = convert_int_rtz(v);
      break;
    default:
      *(global float*)p = v;
      break;
  }
}

// Element j (0..31) of block blk of a device-layout tensor: quants q, scales d.
inline float load_q(global const char* q, global const char* d, long blk, int j, int type) {
  const float scale = vload_half((size_t)blk, (global const half*)d);
  if (type == T_Q8_0) return (float)q[blk * 32 + j] * scale;
  const uchar b = ((global const uchar*)q)[blk * 16 + (j >> 1)];
  const int s = (j & 1) ? (b >> 4) : (b & 15);  // signed int4, stored as (q - 8) xor 8
  return (float)((s ^ 8) - 8) * scale;
}

// Quantizes 32 floats into block blk of a device-layout tensor (OPS.md's rules).
inline void quantize_block(const float* x, global char* q, global char* d, long blk, int type) {
  if (type == T_Q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = fmax(amax, fabs(x[j]));
    const float scale = amax / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int j = 0; j < QK; ++j) q[blk * 32 + j] = (char)convert_int(round(x[j] * id));
    vstore_half_rte(scale, (size_t)blk, (global half*)d);
    return;
  }
  float amax = 0.0f, max = 0.0f;  // the element of largest magnitude, with its sign, first on ties
  for (int j = 0; j < QK; ++j) {
    if (amax < fabs(x[j])) {
      amax = fabs(x[j]);
      max = x[j];
    }
  }
  const float scale = max / -8.0f;
  const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
  global uchar* out = (global uchar*)q + blk * 16;
  for (int k = 0; k < 16; ++k) {
    const int lo = min(15, (int)(x[2 * k] * id + 8.5f));
    const int hi = min(15, (int)(x[2 * k + 1] * id + 8.5f));
    out[k] = (uchar)((lo | (hi << 4)) ^ 0x88);
  }
  vstore_half_rte(scale, (size_t)blk, (global half*)d);
}

// ---- ggml's native blocks (tessera/blocks.h), read byte by byte: blocks are only 2-byte aligned ----

constant char kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

inline float half_at(global const uchar* p) { return vload_half(0, (global const half*)p); }
inline uint u32_at(global const uchar* p) {
  return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

// Q4_1 / Q5_0 / Q5_1 / IQ4_NL: the 32 elements of a block; nibbles: element j low, j + 16 high.
inline void deq_q4_1(global const uchar* b, float* x) {
  const float d = half_at(b), m = half_at(b + 2);
  for (int j = 0; j < 16; ++j) {
    x[j] = (float)(b[4 + j] & 15) * d + m;
    x[j + 16] = (float)(b[4 + j] >> 4) * d + m;
  }
}

inline void deq_q5_0(global const uchar* b, float* x) {
  const float d = half_at(b);
  const uint h = u32_at(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int q0 = (b[6 + j] & 15) | (int)(((h >> j) & 1) << 4);
    const int q1 = (b[6 + j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
    x[j] = (float)(q0 - 16) * d;
    x[j + 16] = (float)(q1 - 16) * d;
  }
}

inline void deq_q5_1(global const uchar* b, float* x) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint h = u32_at(b + 4);
  for (int j = 0; j < 16; ++j) {
    const int q0 = (b[8 + j] & 15) | (int)(((h >> j) & 1) << 4);
    const int q1 = (b[8 + j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
    x[j] = (float)q0 * d + m;
    x[j + 16] = (float)q1 * d + m;
  }
}

// MXFP4: 2^(e - 128) times the doubled E2M1 value of each code (e the block's first byte; e 0 and
// 1 give denormals), nibbles as Q4_0.
constant char kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline void deq_mxfp4(global const uchar* b, float* x) {
  const uint e = b[0];
  const float d = as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  for (int j = 0; j < 16; ++j) {
    x[j] = (float)kMxfp4Values[b[1 + j] & 15] * d;
    x[j + 16] = (float)kMxfp4Values[b[1 + j] >> 4] * d;
  }
}

inline void deq_iq4_nl(global const uchar* b, float* x) {
  const float d = half_at(b);
  for (int j = 0; j < 16; ++j) {
    x[j] = d * (float)kIq4Values[b[2 + j] & 15];
    x[j + 16] = d * (float)kIq4Values[b[2 + j] >> 4];
  }
}

// Super-blocks: chunk c (0..7) holds elements 32c .. 32c + 31.

// Q2_K: chunk c is pass c % 4 (bits 2(c%4)..) over the 32 bytes of half c / 4; 16 elements a scale.
inline void deq_q2_k(global const uchar* b, int c, float* x) {
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  const int part = c / 4, pass = c % 4;
  global const uchar* q = b + 16 + 32 * part;
  for (int k = 0; k < 2; ++k) {
    const uchar sc = b[8 * part + 2 * pass + k];
    const float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
    for (int l = 0; l < 16; ++l) x[16 * k + l] = dl * (float)((q[16 * k + l] >> (2 * pass)) & 3) - ml;
  }
}

// Q3_K: as Q2_K for the two low bits; a clear bit 4 * (c / 4) + pass of hmask subtracts 4.
inline void deq_q3_k(global const uchar* b, int c, float* x) {
  const float d = half_at(b + 108);
  const int part = c / 4, pass = c % 4;
  global const uchar* q = b + 32 + 32 * part;
  global const uchar* packed = b + 96;
  const uchar mask = (uchar)(1u << (4 * part + pass));
  for (int k = 0; k < 2; ++k) {
    const int g = 8 * part + 2 * pass + k;
    const int low = g < 8 ? (packed[g] & 15) : (packed[g - 8] >> 4);
    const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
    const float dl = d * (float)((low | (high << 4)) - 32);
    for (int l = 0; l < 16; ++l) {
      const int lo = (q[16 * k + l] >> (2 * pass)) & 3;
      const int hi = (b[16 * k + l] & mask) ? 0 : 4;
      x[16 * k + l] = dl * (float)(lo - hi);
    }
  }
}

// Q4_K / Q5_K: the 6-bit scale and min of group g (0..7) from the 12 packed bytes.
inline void k_scale_min(int g, global const uchar* q, float* sc, float* m) {
  if (g < 4) {
    *sc = (float)(q[g] & 63);
    *m = (float)(q[g + 4] & 63);
  } else {
    *sc = (float)((q[g + 4] & 15) | ((q[g - 4] >> 6) << 4));
    *m = (float)((q[g + 4] >> 4) | ((q[g] >> 6) << 4));
  }
}

// Q4_K: chunk c is group c: the low (even c) or high (odd c) nibbles of bytes 32 (c / 2) ...
inline void deq_q4_k(global const uchar* b, int c, float* x) {
  const float d = half_at(b), dmin = half_at(b + 2);
  float sc, m;
  k_scale_min(c, b + 4, &sc, &m);
  const float dl = d * sc, ml = dmin * m;
  global const uchar* q = b + 16 + 32 * (c / 2);
  for (int l = 0; l < 32; ++l) x[l] = dl * (float)((q[l] >> (4 * (c % 2))) & 15) - ml;
}

// Q5_K: as Q4_K, with bit c of qh[l] as the fifth bit.
inline void deq_q5_k(global const uchar* b, int c, float* x) {
  const float d = half_at(b), dmin = half_at(b + 2);
  float sc, m;
  k_scale_min(c, b + 4, &sc, &m);
  const float dl = d * sc, ml = dmin * m;
  global const uchar* qh = b + 16;
  global const uchar* q = b + 48 + 32 * (c / 2);
  for (int l = 0; l < 32; ++l) {
    const int v = ((q[l] >> (4 * (c % 2))) & 15) | (((qh[l] >> c) & 1) << 4);
    x[l] = dl * (float)v - ml;
  }
}

// Q6_K: chunk c is part k = c % 4 of half c / 4: nibble k / 2 of ql[l + 32 (k % 2)], bits 2k of qh[l].
inline void deq_q6_k(global const uchar* b, int c, float* x) {
  const float d = half_at(b + 208);
  const int part = c / 4, k = c % 4;
  global const uchar* ql = b + 64 * part;
  global const uchar* qh = b + 128 + 32 * part;
  global const char* sc = (global const char*)(b + 192) + 8 * part;
  for (int l = 0; l < 32; ++l) {
    const int lo = (ql[l + 32 * (k % 2)] >> (4 * (k / 2))) & 15;
    const int hi = (qh[l] >> (2 * k)) & 3;
    x[l] = d * (float)sc[2 * k + l / 16] * (float)((lo | (hi << 4)) - 32);
  }
}

// Q8_K: a float scale (4-byte aligned: blocks are 292 bytes), 256 int8.
inline void deq_q8_k(global const uchar* b, int c, float* x) {
  const float d = *(global const float*)b;
  global const char* q = (global const char*)(b + 4) + 32 * c;
  for (int l = 0; l < 32; ++l) x[l] = d * (float)q[l];
}

// IQ4_XS: group c's 6-bit scale (low nibble in scales_l, two high bits in scales_h, offset 32).
inline void deq_iq4_xs(global const uchar* b, int c, float* x) {
  const float d = half_at(b);
  const uint scales_h = (uint)b[2] | ((uint)b[3] << 8);
  const int low = (b[4 + c / 2] >> (4 * (c % 2))) & 15;
  const int high = (scales_h >> (2 * c)) & 3;
  const float dl = d * (float)((low | (high << 4)) - 32);
  global const uchar* qs = b + 8 + 16 * c;
  for (int j = 0; j < 16; ++j) {
    x[j] = dl * (float)kIq4Values[qs[j] & 15];
    x[j + 16] = dl * (float)kIq4Values[qs[j] >> 4];
  }
}

// The grid I-quants (src/core/iq_grids.h; codebooks in iq_grids.cl): per 8 elements a grid point,
// signs and a scale; x = dl * v with dl = (d times the format's power of two) * (2 s + 1), v the
// signed grid value (IQ1: 8 * grid +- 1), which rounds as ggml's dequantization does.
inline ushort u16_at(global const uchar* p) { return (ushort)((uint)p[0] | ((uint)p[1] << 8)); }
// ggml's ksigns_iq2xs: seven sign bits and an eighth for even parity.
inline uint iq_signs(uint i) { return i | ((popcount(i) & 1u) << 7); }
inline void iq_put8(ulong g, uint signs, float dl, float* x) {
  for (int j = 0; j < 8; ++j) {
    const int m = (int)((g >> (8 * j)) & 0xff);
    x[j] = dl * (float)(((signs >> j) & 1u) ? -m : m);
  }
}
inline void iq1_put8(ulong g, int shift, float dl, float* x) {
  for (int j = 0; j < 8; ++j) x[j] = dl * (float)(8 * (int)(char)((g >> (8 * j)) & 0xff) + shift);
}

inline void deq_iq2_xxs(global const uchar* b, int c, float* x) {
  global const uchar* q = b + 2 + 8 * c;
  const uint aux = u32_at(q + 4);
  const float dl = half_at(b) * 0.125f * (float)(2 * (aux >> 28) + 1);
  for (int l = 0; l < 4; ++l) iq_put8(kIq2xxsGrid[q[l]], iq_signs((aux >> (7 * l)) & 127u), dl, x + 8 * l);
}

inline void deq_iq2_xs(global const uchar* b, int c, float* x) {
  const float d = half_at(b) * 0.125f;
  const uint s = b[66 + c];
  for (int l = 0; l < 4; ++l) {
    const uint q = u16_at(b + 2 + 8 * c + 2 * l);
    const float dl = d * (float)(2 * ((l < 2 ? s : s >> 4) & 15u) + 1);
    iq_put8(kIq2xsGrid[q & 511u], iq_signs(q >> 9), dl, x + 8 * l);
  }
}

inline void deq_iq2_s(global const uchar* b, int c, float* x) {
  const float d = half_at(b) * 0.125f;
  const uint s = b[74 + c], qh = b[66 + c];
  for (int l = 0; l < 4; ++l) {
    const uint idx = b[2 + 4 * c + l] | ((qh << (8 - 2 * l)) & 0x300u);
    const float dl = d * (float)(2 * ((l < 2 ? s : s >> 4) & 15u) + 1);
    iq_put8(kIq2sGrid[idx], b[34 + 4 * c + l], dl, x + 8 * l);
  }
}

inline void deq_iq3_xxs(global const uchar* b, int c, float* x) {
  global const uchar* q = b + 2 + 8 * c;
  const uint aux = u32_at(b + 66 + 4 * c);
  const float dl = half_at(b) * 0.25f * (float)(2 * (aux >> 28) + 1);
  for (int l = 0; l < 4; ++l) {
    const ulong g = (ulong)kIq3xxsGrid[q[2 * l]] | ((ulong)kIq3xxsGrid[q[2 * l + 1]] << 32);
    iq_put8(g, iq_signs((aux >> (7 * l)) & 127u), dl, x + 8 * l);
  }
}

inline void deq_iq3_s(global const uchar* b, int c, float* x) {
  global const uchar* q = b + 2 + 8 * c;
  const uint qh = b[66 + c];
  const float dl = half_at(b) * (float)(2 * ((b[106 + c / 2] >> (4 * (c % 2))) & 15) + 1);
  for (int l = 0; l < 4; ++l) {
    const uint i1 = q[2 * l] | ((qh << (8 - 2 * l)) & 256u);
    const uint i2 = q[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
    iq_put8((ulong)kIq3sGrid[i1] | ((ulong)kIq3sGrid[i2] << 32), b[74 + 4 * c + l], dl, x + 8 * l);
  }
}

inline void deq_iq1_s(global const uchar* b, int c, float* x) {
  const uint qh = u16_at(b + 34 + 2 * c);
  const float dl = half_at(b) * 0.125f * (float)(2 * ((qh >> 12) & 7u) + 1);
  const int shift = (qh & 0x8000u) ? -1 : 1;
  for (int l = 0; l < 4; ++l) iq1_put8(kIq1sGrid[b[2 + 4 * c + l] | (((qh >> (3 * l)) & 7u) << 8)], shift, dl, x + 8 * l);
}

// IQ1_M: d's fp16 bits in the top nibbles of the four 16-bit scale words.
inline void deq_iq1_m(global const uchar* b, int c, float* x) {
  global const uchar* sc = b + 48;
  const ushort bits = (ushort)((u16_at(sc) >> 12) | ((u16_at(sc + 2) >> 8) & 0x00f0) |
                               ((u16_at(sc + 4) >> 4) & 0x0f00) | (u16_at(sc + 6) & 0xf000));
  const float d = vload_half(0, (const private half*)&bits) * 0.125f;
  const uint w = u16_at(sc + 2 * (c / 2));
  const float dl1 = d * (float)(2 * ((w >> (6 * (c % 2))) & 7u) + 1);
  const float dl2 = d * (float)(2 * ((w >> (6 * (c % 2) + 3)) & 7u) + 1);
  for (int l = 0; l < 4; ++l) {
    const uint h = (uint)b[32 + 2 * c + l / 2] >> (4 * (l % 2));
    iq1_put8(kIq1sGrid[b[4 * c + l] | ((h & 7u) << 8)], (h & 8u) ? -1 : 1, l < 2 ? dl1 : dl2, x + 8 * l);
  }
}

// Chunk c (elements 32c .. 32c + 31) of block blk of any quantized type: for the split types q and
// d are the quants and scales, for native blocks q is the first block and d is unused.
inline void load_chunk(global const char* q, global const char* d, long blk, int c, int type, float* x) {
  global const uchar* b = (global const uchar*)q + blk * block_bytes(type);
  switch (type) {
    case T_Q4_0:
    case T_Q8_0:
      for (int j = 0; j < QK; ++j) x[j] = load_q(q, d, blk, j, type);
      break;
    case T_Q4_1: deq_q4_1(b, x); break;
    case T_Q5_0: deq_q5_0(b, x); break;
    case T_Q5_1: deq_q5_1(b, x); break;
    case T_IQ4_NL: deq_iq4_nl(b, x); break;
    case T_MXFP4: deq_mxfp4(b, x); break;
    case T_Q2_K: deq_q2_k(b, c, x); break;
    case T_Q3_K: deq_q3_k(b, c, x); break;
    case T_Q4_K: deq_q4_k(b, c, x); break;
    case T_Q5_K: deq_q5_k(b, c, x); break;
    case T_Q6_K: deq_q6_k(b, c, x); break;
    case T_Q8_K: deq_q8_k(b, c, x); break;
    case T_IQ2_XXS: deq_iq2_xxs(b, c, x); break;
    case T_IQ2_XS: deq_iq2_xs(b, c, x); break;
    case T_IQ2_S: deq_iq2_s(b, c, x); break;
    case T_IQ3_XXS: deq_iq3_xxs(b, c, x); break;
    case T_IQ3_S: deq_iq3_s(b, c, x); break;
    case T_IQ1_S: deq_iq1_s(b, c, x); break;
    case T_IQ1_M: deq_iq1_m(b, c, x); break;
    default: deq_iq4_xs(b, c, x); break;
  }
}

inline void store_half_at(global uchar* p, float v) { vstore_half_rte(v, 0, (global half*)p); }
inline void store_u32_at(global uchar* p, uint v) {
  for (int i = 0; i < 4; ++i) p[i] = (uchar)(v >> (8 * i));
}

// The grid index nearest to x (ties to the upper one), by bisection as src/core/quant_iq.cpp.
inline int nearest_iq4_index(float x) {
  if (x <= kIq4Values[0]) return 0;
  if (x >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < kIq4Values[mid])
      hi = mid;
    else
      lo = mid;
  }
  return x - kIq4Values[hi - 1] < kIq4Values[hi] - x ? hi - 1 : hi;
}

// IQ4_NL as ggml's row conversion (tessera::ref::quantize_row_iq4_nl): indices of x / d for
// d = max / -127, then the least-squares scale for them under weights x^2; no search.
inline void quantize_iq4_nl(const float* x, global uchar* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < QK; ++j) {
    if (fabs(x[j]) > amax) {
      amax = fabs(x[j]);
      max = x[j];
    }
  }
  uchar L[QK];
  float d = 0.0f;
  if (amax < 1e-15f) {  // all zero: the index of 0
    for (int j = 0; j < QK; ++j) L[j] = 8;
  } else {
    const float id = 1.0f / (max / (float)kIq4Values[0]);
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < QK; ++j) {
      const int l = nearest_iq4_index(id * x[j]);
      L[j] = (uchar)l;
      const float q = kIq4Values[l];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
  }
  store_half_at(b, d);
  for (int j = 0; j < 16; ++j) b[2 + j] = (uchar)(L[j] | (L[j + 16] << 4));
}

// The native types with a device quantizer (ggml's rounding, as src/core/quant_legacy.cpp and
// the row conversion of quant_iq.cpp).
inline bool has_native_quantizer(int type) {
  return type == T_Q4_1 || type == T_Q5_0 || type == T_Q5_1 || type == T_IQ4_NL;
}

// Quantizes 32 floats into the native block at b (Q4_1, Q5_0, Q5_1 or IQ4_NL).
inline void quantize_native(const float* x, global uchar* b, int type) {
  if (type == T_IQ4_NL) {
    quantize_iq4_nl(x, b);
    return;
  }
  int q[QK];
  if (type == T_Q5_0) {
    float amax = 0.0f, max = 0.0f;  // the element of largest magnitude, with its sign, first on ties
    for (int j = 0; j < QK; ++j) {
      if (amax < fabs(x[j])) {
        amax = fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half_at(b, d);
    for (int j = 0; j < QK; ++j) q[j] = min(31, (int)(x[j] * id + 16.5f));
  } else {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < QK; ++j) {  // as std::min / std::max pick (signed zeros included)
      lo = x[j] < lo ? x[j] : lo;
      hi = hi < x[j] ? x[j] : hi;
    }
    const int top = type == T_Q4_1 ? 15 : 31;
    const float d = (hi - lo) / (float)top;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_half_at(b, d);
    store_half_at(b + 2, lo);
    for (int j = 0; j < QK; ++j) q[j] = min(top, (int)((x[j] - lo) * id + 0.5f));
  }
  // Nibbles: element j low, j + 16 high; the fifth bits (Q5_*) packed little endian before them.
  global uchar* qs = b + (type == T_Q4_1 ? 4 : type == T_Q5_0 ? 6 : 8);
  for (int j = 0; j < 16; ++j) qs[j] = (uchar)((q[j] & 15) | ((q[j + 16] & 15) << 4));
  if (type != T_Q4_1) {
    uint h = 0;
    for (int j = 0; j < QK; ++j) h |= (uint)((q[j] >> 4) & 1) << j;
    store_u32_at(b + (type == T_Q5_0 ? 2 : 4), h);
  }
}

// Coordinates of the l-th element in logical (row-major, ne[0] fastest) order.
inline long4 unravel(long l, long4 ne) {
  long4 c;
  c.s0 = l % ne.s0;
  l /= ne.s0;
  c.s1 = l % ne.s1;
  l /= ne.s1;
  c.s2 = l % ne.s2;
  c.s3 = l / ne.s2;
  return c;
}

// Byte offset of element (c) for scalar types; of its block for quantized types (c.s0 a block start
// or any element of it).
inline ulong byte_offset(long4 c, ulong4 nb, int type) {
  const long e0 = is_quant(type) ? c.s0 / block_elems(type) : c.s0;
  return (ulong)e0 * nb.s0 + (ulong)c.s1 * nb.s1 + (ulong)c.s2 * nb.s2 + (ulong)c.s3 * nb.s3;
}

// Coordinates of flat index l (row-major, ne0 fastest) in 32-bit arithmetic when the tensor is small
// enough (64-bit divisions are slow on GPUs); 1-D elementwise kernels use it.
inline long4 coords_of(long l, long4 ne) {
  if (ne.s0 * ne.s1 * ne.s2 * ne.s3 > (long)INT_MAX) return unravel(l, ne);
  uint u = (uint)l;
  const uint n0 = (uint)ne.s0, n1 = (uint)ne.s1, n2 = (uint)ne.s2;
  long4 c;
  c.s0 = u % n0;
  u /= n0;
  c.s1 = u % n1;
  u /= n1;
  c.s2 = u % n2;
  c.s3 = u / n2;
  return c;
}

// ---- work-group reductions (local size a power of two, at most 256; every item gets the result;
// call from uniform control flow: they contain barriers) ----
#define MAX_GROUP 256

inline float group_sum(float v, local float* buf) {
  const int lid = get_local_id(0);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // buf may be reused at once
  return total;
}

inline float group_max(float v, local float* buf) {
  const int lid = get_local_id(0);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] = fmax(buf[lid], buf[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}
