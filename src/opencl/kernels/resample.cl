// UPSCALE, PAD, ARANGE, TIMESTEP_EMBEDDING: f32 results, one work-item per result element.

inline float load_at(global const char* a, long4 c, ulong4 nb) {
  return *(global const float*)(a + byte_offset(c, nb, T_F32));
}

// Nearest source index for result index i: the f32 scale factor decides the rounding, as on the CPU.
inline long nearest_index(long i, float sf, long ne_in) { return min((long)((float)i / sf), ne_in - 1); }

// Bilinear source coordinate: neighbours lo, hi (clamped) and the weight of hi.
inline float bilinear_coord(long i, long ne_in, long ne_out, int align_corners, long* lo, long* hi) {
  float x;
  if (align_corners) {
    if (ne_in == 1 || ne_out == 1) {
      x = 0.0f;
    } else {
      const float sf = (float)(ne_out - 1) / (float)(ne_in - 1);
      x = (float)i / sf;
    }
  } else {
    const float sf = (float)ne_out / (float)ne_in;
    x = ((float)i + 0.5f) / sf - 0.5f;
  }
  const long x0 = (long)floor(x);
  *lo = clamp(x0, 0L, ne_in - 1);
  *hi = clamp(x0 + 1, 0L, ne_in - 1);
  return clamp(x - (float)*lo, 0.0f, 1.0f);
}

// mode 0: nearest in every dim; 1: bilinear in dims 0 and 1 (nearest in 2 and 3). sf = ne_out / ne_in.
kernel void upscale_op(global const char* a, ulong a_off, long4 ane, ulong4 anb, global char* dst,
                       ulong dst_off, long4 dne, ulong4 dnb, float4 sf, long n, int bilinear,
                       int align_corners) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  global const char* src = a + a_off;
  const long j2 = nearest_index(c.s2, sf.s2, ane.s2), j3 = nearest_index(c.s3, sf.s3, ane.s3);
  float v;
  if (!bilinear) {
    v = load_at(src, (long4)(nearest_index(c.s0, sf.s0, ane.s0), nearest_index(c.s1, sf.s1, ane.s1), j2, j3),
                anb);
  } else {
    long x_lo, x_hi, y_lo, y_hi;
    const float wx = bilinear_coord(c.s0, ane.s0, dne.s0, align_corners, &x_lo, &x_hi);
    const float wy = bilinear_coord(c.s1, ane.s1, dne.s1, align_corners, &y_lo, &y_hi);
    const float v00 = load_at(src, (long4)(x_lo, y_lo, j2, j3), anb);
    const float v10 = load_at(src, (long4)(x_hi, y_lo, j2, j3), anb);
    const float v01 = load_at(src, (long4)(x_lo, y_hi, j2, j3), anb);
    const float v11 = load_at(src, (long4)(x_hi, y_hi, j2, j3), anb);
    v = v00 * (1 - wx) * (1 - wy) + v10 * wx * (1 - wy) + v01 * (1 - wx) * wy + v11 * wx * wy;
  }
  *(global float*)(dst + dst_off + byte_offset(c, dnb, T_F32)) = v;
}

// Source index along one dim for result index i, or -1 in zero padding.
inline long pad_index(long i, long lp, long ne, int circular) {
  const long j = i - lp;
  if (ne <= 0) return -1;
  if (circular) return ((j % ne) + ne) % ne;
  return (j >= 0 && j < ne) ? j : -1;
}

kernel void pad_op(global const char* a, ulong a_off, long4 ane, ulong4 anb, global char* dst, ulong dst_off,
                   long4 dne, ulong4 dnb, long4 lp, long n, int circular) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  const long4 s = (long4)(pad_index(c.s0, lp.s0, ane.s0, circular), pad_index(c.s1, lp.s1, ane.s1, circular),
                          pad_index(c.s2, lp.s2, ane.s2, circular), pad_index(c.s3, lp.s3, ane.s3, circular));
  const bool inside = s.s0 >= 0 && s.s1 >= 0 && s.s2 >= 0 && s.s3 >= 0;
  *(global float*)(dst + dst_off + byte_offset(c, dnb, T_F32)) = inside ? load_at(a + a_off, s, anb) : 0.0f;
}

kernel void arange_op(global float* dst, ulong dst_off, float start, float step, long n) {
  const long i = get_global_id(0);
  if (i >= n) return;
  ((global float*)((global char*)dst + dst_off))[i] = start + (float)i * step;
}

// dst [dim, N]: cos(t f_j) for j < half, sin(t f_j) at j + half, 0 in the last column of an odd
// dim; f_j = exp(neg_log_period * j / half). Flat index l = i * dim + j over n = N * dim.
kernel void timestep_embedding_op(global const char* t, ulong t_off, ulong t_nb0, global char* dst,
                                  ulong dst_off, ulong dst_nb1, int dim, float neg_log_period, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long i = l / dim;
  const int j = (int)(l - i * dim);
  global float* out = (global float*)(dst + dst_off + i * dst_nb1);
  const int half_dim = dim / 2;
  if (j >= 2 * half_dim) {
    out[j] = 0.0f;
    return;
  }
  const int f = j < half_dim ? j : j - half_dim;
  const float ts = *(global const float*)(t + t_off + i * t_nb0);
  const float freq = exp(neg_log_period * (float)f / (float)half_dim);
  const float arg = ts * freq;
  out[j] = j < half_dim ? cos(arg) : sin(arg);
}
