// MUL_MAT: dst[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] * b[k, n, i2, i3].
//
// Matrix-vector kernels (few columns of b): a work-group per (weight row m, group of MV_NC columns,
// batch); each item accumulates a strided share of the row for every column, and the shares are
// added in local memory. A column's sum never depends on the other columns of its group, so a
// row computed alone equals the same row inside a batch. Float weights are dotted with f32 b rows
// (contiguous in dim 0); Q4_0 / Q8_0 weights (device layout) with b quantized to Q8_0 blocks
// first, as ggml's CPU does, in integer arithmetic per block; the other quantized types (native
// blocks) are decoded 32 elements at a time and dotted with f32 b rounded through Q8_0 or Q8_K
// (the activation types of ggml's CPU dot products), in f32.
//
// Helpers for the GEMM path (CLBlast): b converted to contiguous f32 (optionally rounded through
// Q8_0), and weight tiles converted to contiguous f32 rows.

#define MV_WG 64  // largest work-group of the matrix-vector kernels
#define MV_NC 4   // columns of b per work-group

// Adds the MV_NC partial sums of every item; item 0 finds the totals at buf[c * MV_WG].
inline void mv_reduce(const float* acc, local float* buf) {
  const int lid = get_local_id(0);
  for (int c = 0; c < MV_NC; ++c) buf[c * MV_WG + lid] = acc[c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s)
      for (int c = 0; c < MV_NC; ++c) buf[c * MV_WG + lid] += buf[c * MV_WG + lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

inline void mv_store(local const float* buf, global char* d, ulong d_off, ulong4 dnb, long m, long n0, int nc,
                     long i2, long i3) {
  if (get_local_id(0) != 0) return;
  for (int c = 0; c < nc; ++c)
    *(global float*)(d + d_off + m * dnb.s0 + (n0 + c) * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3) = buf[c * MV_WG];
}

inline float dot4(float4 x, float4 y) { return x.s0 * y.s0 + x.s1 * y.s1 + x.s2 * y.s2 + x.s3 * y.s3; }

#define LOAD4_F32(p, i) vload4((i), (global const float*)(p))
#define LOAD1_F32(p, i) ((global const float*)(p))[(i)]
#define LOAD4_F16(p, i) vload_half4((i), (global const half*)(p))
#define LOAD1_F16(p, i) vload_half((i), (global const half*)(p))
#define LOAD4_BF16(p, i) as_float4(convert_uint4(vload4((i), (global const ushort*)(p))) << 16)
#define LOAD1_BF16(p, i) as_float(((uint)((global const ushort*)(p))[(i)]) << 16)

// Float weights (rows contiguous in dim 0) times f32 b (rows contiguous in dim 0).
// Grid: (M groups, ceil(N / MV_NC), B2 * B3).
#define MUL_MAT_VEC_FLOAT(NAME, LOAD4, LOAD1)                                                             \
  kernel void NAME(global const char* a, ulong a_off, ulong4 anb, global const char* b, ulong b_off,      \
                   ulong4 bnb, global char* d, ulong d_off, ulong4 dnb, long K, long N, long B2, long r2, \
                   long r3) {                                                                             \
    local float buf[MV_NC * MV_WG];                                                                       \
    const long m = get_group_id(0), n0 = get_global_id(1) * MV_NC, batch = get_global_id(2);              \
    const long i2 = batch % B2, i3 = batch / B2;                                                          \
    const int lid = get_local_id(0), nl = get_local_size(0);                                              \
    const int nc = (int)min((long)MV_NC, N - n0);                                                         \
    global const char* arow = a + a_off + m * anb.s1 + (i2 / r2) * anb.s2 + (i3 / r3) * anb.s3;           \
    global const char* bcol = b + b_off + n0 * bnb.s1 + i2 * bnb.s2 + i3 * bnb.s3;                        \
    float acc[MV_NC];                                                                                     \
    for (int c = 0; c < MV_NC; ++c) acc[c] = 0.0f;                                                        \
    const long K16 = K / 16;                                                                              \
    for (long k = lid; k < K16; k += nl) {                                                                \
      const float4 x0 = LOAD4(arow, 4 * k), x1 = LOAD4(arow, 4 * k + 1);                                  \
      const float4 x2 = LOAD4(arow, 4 * k + 2), x3 = LOAD4(arow, 4 * k + 3);                              \
      for (int c = 0; c < MV_NC; ++c) {                                                                   \
        if (c < nc) {                                                                                     \
          global const float* y = (global const float*)(bcol + c * bnb.s1) + 16 * k;                      \
          acc[c] += (dot4(x0, vload4(0, y)) + dot4(x1, vload4(1, y))) +                                   \
                    (dot4(x2, vload4(2, y)) + dot4(x3, vload4(3, y)));                                    \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    for (long k = 16 * K16 + lid; k < K; k += nl) {                                                       \
      const float x = LOAD1(arow, k);                                                                     \
      for (int c = 0; c < MV_NC; ++c)                                                                     \
        if (c < nc) acc[c] += x * ((global const float*)(bcol + c * bnb.s1))[k];                          \
    }                                                                                                     \
    mv_reduce(acc, buf);                                                                                  \
    mv_store(buf, d, d_off, dnb, m, n0, nc, i2, i3);                                                      \
  }

MUL_MAT_VEC_FLOAT(mul_mat_vec_f32, LOAD4_F32, LOAD1_F32)
MUL_MAT_VEC_FLOAT(mul_mat_vec_f16, LOAD4_F16, LOAD1_F16)
MUL_MAT_VEC_FLOAT(mul_mat_vec_bf16, LOAD4_BF16, LOAD1_BF16)

inline int hsum16(int16 p) {
  const int8 s8 = p.lo + p.hi;
  const int4 s4 = s8.lo + s8.hi;
  const int2 s2 = s4.lo + s4.hi;
  return s2.x + s2.y;
}

inline int dot16(char16 x, char16 y) { return hsum16(convert_int16(x) * convert_int16(y)); }

// Quantized weights (device layout: quants qa, scales da) times b as Q8_0 (device layout: quants
// qb, scales db; row r = n + N * (i2 + B2 * i3) holds K / 32 blocks).
// Grid: (M groups, ceil(N / MV_NC), B2 * B3).
#define MUL_MAT_VEC_Q(NAME, TYPE_BYTES, BLOCK_DOT)                                                      \
  kernel void NAME(global const char* a, ulong a_qoff, ulong a_doff, ulong4 anb, global const char* b,  \
                   ulong b_qoff, ulong b_doff, global char* d, ulong d_off, ulong4 dnb, long K, long N, \
                   long B2, long r2, long r3) {                                                         \
    local float buf[MV_NC * MV_WG];                                                                     \
    const long m = get_group_id(0), n0 = get_global_id(1) * MV_NC, batch = get_global_id(2);            \
    const long i2 = batch % B2, i3 = batch / B2;                                                        \
    const int lid = get_local_id(0), nl = get_local_size(0);                                            \
    const int nc = (int)min((long)MV_NC, N - n0);                                                       \
    const long nbk = K / QK;                                                                            \
    const long ablk = (long)((m * anb.s1 + (i2 / r2) * anb.s2 + (i3 / r3) * anb.s3) / TYPE_BYTES);      \
    const long bblk = (n0 + N * batch) * nbk;                                                           \
    global const char* qa = a + a_qoff;                                                                 \
    global const half* da = (global const half*)(a + a_doff);                                           \
    global const char* qb = b + b_qoff;                                                                 \
    global const half* db = (global const half*)(b + b_doff);                                           \
    float acc[MV_NC];                                                                                   \
    for (int c = 0; c < MV_NC; ++c) acc[c] = 0.0f;                                                      \
    for (long kb = lid; kb < nbk; kb += nl) {                                                           \
      const float sa = vload_half(ablk + kb, da);                                                       \
      BLOCK_DOT(qa, ablk + kb)                                                                          \
    }                                                                                                   \
    mv_reduce(acc, buf);                                                                                \
    mv_store(buf, d, d_off, dnb, m, n0, nc, i2, i3);                                                    \
  }

// Q8_0 weights: 32 int8 per block.
#define BLOCK_DOT_Q8_0(qa, blk)                                                     \
  const char16 w0 = vload16(0, qa + (blk)*32), w1 = vload16(1, qa + (blk)*32);      \
  for (int c = 0; c < MV_NC; ++c) {                                                 \
    if (c < nc) {                                                                   \
      const long bb = bblk + c * nbk + kb;                                          \
      const char16 x0 = vload16(0, qb + bb * 32), x1 = vload16(1, qb + bb * 32);    \
      acc[c] += (float)(dot16(w0, x0) + dot16(w1, x1)) * (sa * vload_half(bb, db)); \
    }                                                                               \
  }

// Q4_0 weights: 16 bytes per block, byte j = elements (2j, 2j+1) as signed int4 (low, high nibble).
#define BLOCK_DOT_Q4_0(qa, blk)                                                                   \
  const char16 v = as_char16(vload16(0, (global const uchar*)(qa + (blk)*16)));                   \
  const char16 w_even = (v << (char16)4) >> (char16)4, w_odd = v >> (char16)4;                    \
  for (int c = 0; c < MV_NC; ++c) {                                                               \
    if (c < nc) {                                                                                 \
      const long bb = bblk + c * nbk + kb;                                                        \
      const char16 x0 = vload16(0, qb + bb * 32), x1 = vload16(1, qb + bb * 32);                  \
      const char16 x_even = (char16)(x0.even, x1.even), x_odd = (char16)(x0.odd, x1.odd);         \
      acc[c] += (float)(dot16(w_even, x_even) + dot16(w_odd, x_odd)) * (sa * vload_half(bb, db)); \
    }                                                                                             \
  }

MUL_MAT_VEC_Q(mul_mat_vec_q8_0, 34, BLOCK_DOT_Q8_0)
MUL_MAT_VEC_Q(mul_mat_vec_q4_0, 18, BLOCK_DOT_Q4_0)

// Native block weights (every type but Q4_0 / Q8_0, rows contiguous) times f32 b (rows contiguous,
// already rounded as the CPU rounds it): weights decoded 32 at a time, f32 products.
// Grid: (M groups, ceil(N / MV_NC), B2 * B3).
#define MUL_MAT_VEC_NATIVE(NAME, TYPE)                                                                    \
  kernel void NAME(global const char* a, ulong a_off, ulong4 anb, global const char* b, ulong b_off,      \
                   ulong4 bnb, global char* d, ulong d_off, ulong4 dnb, long K, long N, long B2, long r2, \
                   long r3) {                                                                             \
    local float buf[MV_NC * MV_WG];                                                                       \
    const long m = get_group_id(0), n0 = get_global_id(1) * MV_NC, batch = get_global_id(2);              \
    const long i2 = batch % B2, i3 = batch / B2;                                                          \
    const int lid = get_local_id(0), nl = get_local_size(0);                                              \
    const int nc = (int)min((long)MV_NC, N - n0);                                                         \
    const int chunks = (int)(block_elems(TYPE) / QK); /* 32-element chunks per block */                   \
    global const char* arow = a + a_off + m * anb.s1 + (i2 / r2) * anb.s2 + (i3 / r3) * anb.s3;           \
    global const char* bcol = b + b_off + n0 * bnb.s1 + i2 * bnb.s2 + i3 * bnb.s3;                        \
    float acc[MV_NC];                                                                                     \
    for (int c = 0; c < MV_NC; ++c) acc[c] = 0.0f;                                                        \
    for (long ch = lid; ch < K / QK; ch += nl) {                                                          \
      float x[QK];                                                                                        \
      load_chunk(arow, arow, ch / chunks, (int)(ch % chunks), TYPE, x);                                   \
      for (int c = 0; c < MV_NC; ++c) {                                                                   \
        if (c < nc) {                                                                                     \
          global const float* y = (global const float*)(bcol + c * bnb.s1) + QK * ch;                     \
          float s = 0.0f;                                                                                 \
          for (int j = 0; j < QK; j += 4)                                                                 \
            s += dot4((float4)(x[j], x[j + 1], x[j + 2], x[j + 3]), vload4(j / 4, y));                    \
          acc[c] += s;                                                                                    \
        }                                                                                                 \
      }                                                                                                   \
    }                                                                                                     \
    mv_reduce(acc, buf);                                                                                  \
    mv_store(buf, d, d_off, dnb, m, n0, nc, i2, i3);                                                      \
  }

MUL_MAT_VEC_NATIVE(mul_mat_vec_q4_1, T_Q4_1)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q5_0, T_Q5_0)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q5_1, T_Q5_1)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q2_k, T_Q2_K)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q3_k, T_Q3_K)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q4_k, T_Q4_K)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q5_k, T_Q5_K)
MUL_MAT_VEC_NATIVE(mul_mat_vec_q6_k, T_Q6_K)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq4_nl, T_IQ4_NL)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq4_xs, T_IQ4_XS)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq2_xxs, T_IQ2_XXS)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq2_xs, T_IQ2_XS)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq2_s, T_IQ2_S)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq3_xxs, T_IQ3_XXS)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq3_s, T_IQ3_S)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq1_s, T_IQ1_S)
MUL_MAT_VEC_NATIVE(mul_mat_vec_iq1_m, T_IQ1_M)
MUL_MAT_VEC_NATIVE(mul_mat_vec_mxfp4, T_MXFP4)

// b's value as the weights multiply it: as it is (mode 0), rounded to f16 (mode 4: F16 weights) or to
// bf16 (mode 5: BF16 weights), ggml's rule (tessera::fp32_to_fp16 / fp32_to_bf16, to nearest even).
inline float round_b(float x, int mode) {
  if (mode == 4) {
    ushort h;
    vstore_half_rte(x, 0, (private half*)&h);
    return vload_half(0, (private const half*)&h);
  }
  if (mode == 5) {
    const uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return as_float(u | 0x400000u);  // quiet NaN
    return as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  }
  return x;
}

// b (F32/F16, any strides, [K, N, B2, B3]) made contiguous: mode 0 writes f32 rows, mode 1 Q8_0
// blocks in device layout (quants at out_q, fp16 scales at out_d), mode 2 f32 rows rounded
// through Q8_0, mode 3 f32 rows rounded through Q8_K (K a multiple of 256), modes 4 and 5 f32 rows
// rounded to f16 and bf16 (round_b). Row r = n + N * (i2 + B2 * i3). Grid: (K / 32 blocks, N, B2 * B3).
kernel void mul_mat_prepare_b(global const char* b, ulong b_off, int b_type, long4 bne, ulong4 bnb,
                              global char* out, ulong out_q, ulong out_d, int mode) {
  const long kb = get_global_id(0), nbk = bne.s0 / QK;
  if (kb >= nbk) return;
  const long n = get_global_id(1), batch = get_global_id(2);
  const long i2 = batch % bne.s2, i3 = batch / bne.s2;
  const long r = n + bne.s1 * batch;
  global const char* src = b + b_off + kb * QK * bnb.s0 + n * bnb.s1 + i2 * bnb.s2 + i3 * bnb.s3;
  float x[QK];
  for (int j = 0; j < QK; ++j) x[j] = load_f32(src + j * bnb.s0, b_type);
  global float* f = (global float*)(out + out_q) + r * bne.s0 + kb * QK;
  if (mode == 0 || mode == 4 || mode == 5) {
    for (int j = 0; j < QK; ++j) f[j] = round_b(x[j], mode);
  } else if (mode == 1) {
    quantize_block(x, out + out_q, out + out_d, r * nbk + kb, T_Q8_0);
  } else if (mode == 3) {
    // Q8_K (tessera::ref::quantize_row_q8_k): the element of largest magnitude of the 256 maps to
    // -127, first on ties; q rounds to nearest even; values written back as d * q.
    global const char* sb = src - (kb % 8) * QK * bnb.s0;  // the super-block's first element
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float v = load_f32(sb + j * bnb.s0, b_type);
      if (fabs(v) > amax) {
        amax = fabs(v);
        max = v;
      }
    }
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
    for (int j = 0; j < QK; ++j) f[j] = d * (float)min(127, (int)rint(iscale * x[j]));
  } else {
    // The same rounding as quantize_block, values written back as f32.
    float amax = 0.0f;
    for (int j = 0; j < QK; ++j) amax = fmax(amax, fabs(x[j]));
    const float scale = amax / 127.0f;
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    ushort h;
    vstore_half_rte(scale, 0, (private half*)&h);
    const float ds = vload_half(0, (private const half*)&h);
    for (int j = 0; j < QK; ++j) f[j] = round(x[j] * id) * ds;
  }
}

// Like modes 0, 4 and 5 for the K % 32 elements past the last whole block (quantized weights have
// K % 32 == 0). Grid: (K % 32, N, B2 * B3).
kernel void mul_mat_prepare_b_tail(global const char* b, ulong b_off, int b_type, long4 bne, ulong4 bnb,
                                   global char* out, ulong out_off, int mode) {
  const long k = bne.s0 / QK * QK + get_global_id(0);
  if (k >= bne.s0) return;
  const long n = get_global_id(1), batch = get_global_id(2);
  const long i2 = batch % bne.s2, i3 = batch / bne.s2;
  const long r = n + bne.s1 * batch;
  ((global float*)(out + out_off))[r * bne.s0 + k] =
      round_b(load_f32(b + b_off + k * bnb.s0 + n * bnb.s1 + i2 * bnb.s2 + i3 * bnb.s3, b_type), mode);
}

// Weight rows [m0, m0 + rows) of weight batches [w0, w0 + nw) (flattened i2 + A2 * i3) as f32, 32
// elements per item: rows contiguous (out[((w - w0) * rows + r) * K + k]) or, when `transposed`,
// columns contiguous (out[((w - w0) * K + k) * rows + r]: the layout CLBlast's GEMM works in, so it
// does not transpose the tile again). Any type (device layout for Q4_0 / Q8_0, native blocks for
// the other quantized types), any strides.
// Grid: (rows, ceil(K / 32), nw).
kernel void mul_mat_weights_f32(global const char* a, ulong a_off, ulong a_doff, int a_type, long4 ane,
                                ulong4 anb, long m0, long rows, long w0, global char* out, ulong out_off,
                                int transposed) {
  const long r = get_global_id(0);
  if (r >= rows) return;
  const long kb = get_global_id(1), w = get_global_id(2);
  const long K = ane.s0, k0 = kb * QK;
  const long4 c = (long4)(k0, m0 + r, (w0 + w) % ane.s2, (w0 + w) / ane.s2);
  float x[QK];
  const int n = (int)min((long)QK, K - k0);
  if (is_quant(a_type)) {
    const long blk = (long)(byte_offset(c, anb, a_type) / (ulong)block_bytes(a_type));
    load_chunk(a + a_off, a + a_doff, blk, (int)(kb % (block_elems(a_type) / QK)), a_type, x);
  } else {
    global const char* p = a + a_off + byte_offset(c, anb, a_type);
    for (int j = 0; j < n; ++j) x[j] = load_f32(p + j * anb.s0, a_type);
  }
  global float* o = (global float*)(out + out_off);
  if (transposed) {
    for (int j = 0; j < n; ++j) o[(w * K + k0 + j) * rows + r] = x[j];
  } else {
    for (int j = 0; j < n; ++j) o[(w * rows + r) * K + k0 + j] = x[j];
  }
}

// MUL_MAT_ID: dst[m, e, t] = sum_k a[k, m, ids[e, t]] * y[k, e % B1, t], y being b as the weights
// multiply it (contiguous f32 rows [K, B1, T], rounded as MUL_MAT rounds b: mul_mat_prepare_b). For
// batches where experts take several tokens, the tokens are grouped by expert so that each expert's
// rows are read once per MV_NC of its tokens: mul_mat_id_routes lists each expert's (slot, token)
// pairs, mul_mat_id walks them. For a few tokens (generation) mul_mat_id_each computes each output
// from its expert's row. Both sum a pair in the same operations (a strided share of the row per item:
// 32-element chunks of block weights decoded as load_chunk does, single elements of float weights;
// the shares added in local memory in the same tree), so a token's result never depends on the
// other tokens, their slots or the path. An expert id outside [0, E) gives NaN (the CPU refuses it
// with an Error, which a kernel cannot raise).

// The share of row m of expert x (quantized: from block blk0) that item lid of nl sums for pair c,
// added to acc[c] for the first nc pairs of yc.
inline void mmid_shares(global const char* a, global const char* a_d, int a_type, long blk0,
                        global const char* row, ulong stride, long K, global const float** yc, int nc, float* acc) {
  const int lid = get_local_id(0), nl = get_local_size(0);
  if (is_quant(a_type)) {
    const int chunks = (int)(block_elems(a_type) / QK);
    for (long ch = lid; ch < K / QK; ch += nl) {
      float w[QK];
      load_chunk(a, a_d, blk0 + ch / chunks, (int)(ch % chunks), a_type, w);
      for (int c = 0; c < nc; ++c) {
        float s = 0.0f;
        for (int j = 0; j < QK; j += 4)
          s += dot4((float4)(w[j], w[j + 1], w[j + 2], w[j + 3]), vload4(0, yc[c] + ch * QK + j));
        acc[c] += s;
      }
    }
  } else {
    for (long k = lid; k < K; k += nl) {
      const float w = load_f32(row + k * stride, a_type);
      for (int c = 0; c < nc; ++c) acc[c] += w * yc[c][k];
    }
  }
}

// Grid: (M groups, n_used, T).
kernel void mul_mat_id_each(global const char* a, ulong a_off, ulong a_doff, int a_type, long4 ane, ulong4 anb,
                            global const char* y, ulong y_off, long B1, global const char* ids, ulong ids_off,
                            ulong4 inb, global char* d, ulong d_off, ulong4 dnb) {
  local float buf[MV_NC * MV_WG];
  const long m = get_group_id(0), e = get_global_id(1), t = get_global_id(2);
  const long K = ane.s0;
  const int expert = *(global const int*)(ids + ids_off + e * inb.s0 + t * inb.s1);
  const bool bad = expert < 0 || expert >= ane.s2;
  global const float* yc[MV_NC];
  yc[0] = (global const float*)(y + y_off) + (t * B1 + e % B1) * K;
  float acc[MV_NC];
  for (int c = 0; c < MV_NC; ++c) acc[c] = 0.0f;
  if (!bad) {
    const ulong at = m * anb.s1 + expert * anb.s2;
    mmid_shares(a + a_off, a + a_doff, a_type, is_quant(a_type) ? (long)(at / (ulong)block_bytes(a_type)) : 0,
                a + a_off + at, anb.s0, K, yc, 1, acc);
  }
  mv_reduce(acc, buf);
  if (get_local_id(0) == 0)
    *(global float*)(d + d_off + m * dnb.s0 + e * dnb.s1 + t * dnb.s2) = bad ? NAN : buf[0];
}

// Grid: E + 1 items. Item x lists, in token order, the pairs p = t * n_used + e that route to expert x
// (x == E: the ids outside [0, E)), at routes[x * n_used * T ...], and their count.
kernel void mul_mat_id_routes(global const char* ids, ulong ids_off, ulong4 inb, long n_used, long T, long E,
                              global char* routes, ulong routes_off, global char* counts, ulong counts_off) {
  const long x = get_global_id(0);
  global int* r = (global int*)(routes + routes_off) + x * n_used * T;
  int n = 0;
  for (long t = 0; t < T; ++t)
    for (long e = 0; e < n_used; ++e) {
      const int id = *(global const int*)(ids + ids_off + e * inb.s0 + t * inb.s1);
      const long bucket = id < 0 || id >= E ? E : id;
      if (bucket == x) r[n++] = (int)(t * n_used + e);
    }
  ((global int*)(counts + counts_off))[x] = n;
}

// A work-group per (m, expert): MV_NC routed pairs at a time. Grid: (M groups, E + 1).
kernel void mul_mat_id(global const char* a, ulong a_off, ulong a_doff, int a_type, long4 ane, ulong4 anb,
                       global const char* y, ulong y_off, long B1, long n_used, long T, global const char* routes,
                       ulong routes_off, global const char* counts, ulong counts_off, global char* d, ulong d_off,
                       ulong4 dnb) {
  local float buf[MV_NC * MV_WG];
  const long m = get_group_id(0), x = get_global_id(1);
  const int lid = get_local_id(0);
  const long K = ane.s0, E = ane.s2;
  const int n = ((global const int*)(counts + counts_off))[x];
  global const int* r = (global const int*)(routes + routes_off) + x * n_used * T;
  if (x == E) {
    if (lid == 0)
      for (int i = 0; i < n; ++i)
        *(global float*)(d + d_off + m * dnb.s0 + (r[i] % n_used) * dnb.s1 + (r[i] / n_used) * dnb.s2) = NAN;
    return;
  }
  const ulong at = m * anb.s1 + x * anb.s2;
  const long blk0 = is_quant(a_type) ? (long)(at / (ulong)block_bytes(a_type)) : 0;
  for (int j0 = 0; j0 < n; j0 += MV_NC) {
    const int nc = min(MV_NC, n - j0);
    global const float* yc[MV_NC];
    for (int c = 0; c < nc; ++c) {
      const int p = r[j0 + c];
      yc[c] = (global const float*)(y + y_off) + ((p / n_used) * B1 + (p % n_used) % B1) * K;
    }
    float acc[MV_NC];
    for (int c = 0; c < MV_NC; ++c) acc[c] = 0.0f;
    mmid_shares(a + a_off, a + a_doff, a_type, blk0, a + a_off + at, anb.s0, K, yc, nc, acc);
    mv_reduce(acc, buf);
    if (lid == 0)
      for (int c = 0; c < nc; ++c) {
        const int p = r[j0 + c];
        *(global float*)(d + d_off + m * dnb.s0 + (p % n_used) * dnb.s1 + (p / n_used) * dnb.s2) = buf[c * MV_WG];
      }
    barrier(CLK_LOCAL_MEM_FENCE);  // buf is the next group's
  }
}
