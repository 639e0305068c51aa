// Shared by every program (prepended to each): element types in DType's order, scalar loads and
// stores through f32, and the device layout of Q4_0 / Q8_0 (all quants, then all fp16 scales).
// OpenCL C 1.2 only: halfs are read and written with vload_half / vstore_half (no fp16 math).

// Exact products and sums, as on the CPU (no fused multiply-add).
#pragma OPENCL FP_CONTRACT OFF

#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_Q4_0 3
#define T_Q8_0 4
#define T_I32 5

#define QK 32

inline bool is_quant(int type) { return type == T_Q4_0 || type == T_Q8_0; }
inline long block_bytes(int type) { return type == T_Q4_0 ? 18 : 34; }
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
  const long e0 = is_quant(type) ? c.s0 / QK : c.s0;
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
