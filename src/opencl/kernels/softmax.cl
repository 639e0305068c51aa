// SOFT_MAX and DIAG_MASK_INF. SOFT_MAX runs a work-group per row: w = x*scale + slope*mask, then
// max (with the head's sink), sum of exp(w - max) (plus the sink's) and the normalized values, each pass over the row recomputing w (so a
// result in place of its source is safe: every element is read and written by one item).

// ALiBi slope of head h (1 when max_bias is 0): m0^(h+1) for the first n_head_log2 heads, then
// m1^(2(h - n_head_log2) + 1); m0 and m1 come from the host, computed as the CPU does.
inline float alibi_slope(float max_bias, long h, long n_head_log2, float m0, float m1) {
  if (max_bias <= 0.0f) return 1.0f;
  return h < n_head_log2 ? pow(m0, (float)(h + 1)) : pow(m1, (float)(2 * (h - n_head_log2) + 1));
}

inline float masked(global const char* x, ulong xnb0, global const char* m, ulong mnb0, int mask_type, long i,
                    float scale, float slope) {
  const float w = *(global const float*)(x + i * xnb0) * scale;
  return mask_type < 0 ? w : w + slope * load_f32(m + i * mnb0, mask_type);
}

// mask_type < 0: no mask. The mask row i1 of slice (i2 % mne2, i3 % mne3) applies to row (i1, i2, i3).
// has_sinks: head i2's sink logit sinks[i2] joins the row's max and denominator (gpt-oss). Without
// sinks, a row whose logits are all -inf gives zeros. Grid: (ne1 groups, ne2, ne3).
kernel void soft_max(global const char* src, ulong src_off, long ne0, ulong4 snb, global const char* mask,
                     ulong mask_off, int mask_type, long mne2, long mne3, ulong4 mnb, global char* dst,
                     ulong dst_off, ulong4 dnb, float scale, float max_bias, float m0, float m1,
                     long n_head_log2, global const char* sinks, ulong sinks_off, int has_sinks) {
  local float buf[MAX_GROUP];
  const long i1 = get_group_id(0), i2 = get_global_id(1), i3 = get_global_id(2);
  const int lid = get_local_id(0), nl = get_local_size(0);
  global const char* x = src + src_off + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3;
  global const char* m =
      mask_type < 0 ? x : mask + mask_off + i1 * mnb.s1 + (i2 % mne2) * mnb.s2 + (i3 % mne3) * mnb.s3;
  global char* y = dst + dst_off + i1 * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3;
  const float slope = alibi_slope(max_bias, i2, n_head_log2, m0, m1);

  float mx = -INFINITY;
  for (long i = lid; i < ne0; i += nl) mx = fmax(mx, masked(x, snb.s0, m, mnb.s0, mask_type, i, scale, slope));
  mx = group_max(mx, buf);
  const float sink = has_sinks ? ((global const float*)(sinks + sinks_off))[i2] : -INFINITY;
  mx = fmax(mx, sink);
  if (mx == -INFINITY) {  // a fully masked row: zeros (see the CPU kernel)
    for (long i = lid; i < ne0; i += nl) *(global float*)(y + i * dnb.s0) = 0.0f;
    return;
  }
  float s = 0.0f;
  for (long i = lid; i < ne0; i += nl) s += exp(masked(x, snb.s0, m, mnb.s0, mask_type, i, scale, slope) - mx);
  const float inv = 1.0f / (group_sum(s, buf) + (has_sinks ? exp(sink - mx) : 0.0f));
  for (long i = lid; i < ne0; i += nl)
    *(global float*)(y + i * dnb.s0) = exp(masked(x, snb.s0, m, mnb.s0, mask_type, i, scale, slope) - mx) * inv;
}

// Element (i, j) of every 2-D slice becomes -inf when i > n_past + j. Grid: (ne0, ne1, ne2 * ne3).
kernel void diag_mask_inf(global const char* src, ulong src_off, long4 ne, ulong4 snb, global char* dst,
                          ulong dst_off, ulong4 dnb, long n_past) {
  const long i = get_global_id(0);
  if (i >= ne.s0) return;
  const long j = get_global_id(1), i23 = get_global_id(2);
  const long i2 = i23 % ne.s2, i3 = i23 / ne.s2;
  const float v = *(global const float*)(src + src_off + i * snb.s0 + j * snb.s1 + i2 * snb.s2 + i3 * snb.s3);
  *(global float*)(dst + dst_off + i * dnb.s0 + j * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3) =
      i > n_past + j ? -INFINITY : v;
}
