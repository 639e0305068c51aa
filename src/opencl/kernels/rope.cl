// ROPE: NORMAL pairs (x[2i], x[2i+1]), NEOX pairs (x[i], x[i + n_dims/2]); YaRN when ext_factor != 0;
// optional frequency factors; channels past n_dims copied. F32 and F16 data (math in f32).
// The angle of pair i is p * theta_scale^i computed by i repeated f32 multiplications, exactly as
// the CPU reference does: a pow() would round differently, and at positions in the thousands the
// difference shows in the result.

inline float rope_angle(float theta_extrap, long i, float freq_scale, float ext_factor, float corr_lo,
                        float corr_hi) {
  const float theta_interp = freq_scale * theta_extrap;
  if (ext_factor == 0.0f) return theta_interp;
  const float y = ((float)i - corr_lo) / fmax(0.001f, corr_hi - corr_lo);
  const float ramp_mix = (1.0f - fmin(1.0f, fmax(0.0f, y))) * ext_factor;
  return theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
}

// One item per rotated pair (i < n_dims/2) or copied channel. Grid: (n_dims/2 + ne0 - n_dims, ne1, ne2 * ne3).
kernel void rope(global const char* src, ulong src_off, int type, long4 ne, ulong4 snb, global const char* pos,
                 ulong pos_off, ulong pos_nb0, global const char* ff, ulong ff_off, ulong ff_nb0, int has_ff,
                 global char* dst, ulong dst_off, ulong4 dnb, int n_dims, int neox, float theta_scale,
                 float freq_scale, float ext_factor, float mscale, float corr_lo, float corr_hi) {
  const long half_dims = n_dims / 2;
  const long t = get_global_id(0);
  if (t >= half_dims + ne.s0 - n_dims) return;
  const long i1 = get_global_id(1), i23 = get_global_id(2);
  const long i2 = i23 % ne.s2, i3 = i23 / ne.s2;
  global const char* x = src + src_off + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3;
  global char* y = dst + dst_off + i1 * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3;
  if (t >= half_dims) {
    const long c = n_dims + (t - half_dims);
    store_f32(y + c * dnb.s0, type, load_f32(x + c * snb.s0, type));
    return;
  }
  const long i = t;
  const int p = *(global const int*)(pos + pos_off + i2 * pos_nb0);
  float theta = (float)p;
  for (long j = 0; j < i; ++j) theta *= theta_scale;
  const float f = has_ff ? *(global const float*)(ff + ff_off + i * ff_nb0) : 1.0f;
  const float angle = rope_angle(theta / f, i, freq_scale, ext_factor, corr_lo, corr_hi);
  const float cos_t = cos(angle) * mscale;
  const float sin_t = sin(angle) * mscale;
  const long j0 = neox ? i : 2 * i;
  const long j1 = neox ? i + half_dims : 2 * i + 1;
  const float x0 = load_f32(x + j0 * snb.s0, type), x1 = load_f32(x + j1 * snb.s0, type);
  store_f32(y + j0 * dnb.s0, type, x0 * cos_t - x1 * sin_t);
  store_f32(y + j1 * dnb.s0, type, x0 * sin_t + x1 * cos_t);
}
