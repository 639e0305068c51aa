// NORM, RMS_NORM and GROUP_NORM: a work-group per row (per group for GROUP_NORM); each item sums a
// strided share of the values in f32 and the shares are added as a tree, which keeps the rounding
// error near that of the CPU's double sums. The result is written in the last pass only, by the
// item that read the same element, so a result in place of its source is safe.

// mode 0: y = (x - mean) / sqrt(var + eps); mode 1: y = x / sqrt(mean(x^2) + eps).
// Grid: (ne1 groups, ne2, ne3).
kernel void norm_rows(global const char* src, ulong src_off, long ne0, ulong4 snb, global char* dst,
                      ulong dst_off, ulong4 dnb, float eps, int rms) {
  local float buf[MAX_GROUP];
  const long i1 = get_group_id(0), i2 = get_global_id(1), i3 = get_global_id(2);
  const int lid = get_local_id(0), nl = get_local_size(0);
  global const char* x = src + src_off + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3;
  global char* y = dst + dst_off + i1 * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3;
  float mean = 0.0f, scale;
  if (rms) {
    float s = 0.0f;
    for (long i = lid; i < ne0; i += nl) {
      const float v = *(global const float*)(x + i * snb.s0);
      s += v * v;
    }
    const float ms = group_sum(s, buf) / (float)ne0;
    scale = 1.0f / sqrt(ms + eps);
  } else {
    float s = 0.0f;
    for (long i = lid; i < ne0; i += nl) s += *(global const float*)(x + i * snb.s0);
    mean = group_sum(s, buf) / (float)ne0;
    float s2 = 0.0f;
    for (long i = lid; i < ne0; i += nl) {
      const float v = *(global const float*)(x + i * snb.s0) - mean;
      s2 += v * v;
    }
    const float var = group_sum(s2, buf) / (float)ne0;
    scale = 1.0f / sqrt(var + eps);
  }
  for (long i = lid; i < ne0; i += nl)
    *(global float*)(y + i * dnb.s0) = (*(global const float*)(x + i * snb.s0) - mean) * scale;
}

// GROUP_NORM: groups of `per_group` channels along dim 2; a work-group per (group, i3) normalizes
// its ne0 * ne1 * channels values. Grid: (n_groups groups, ne3, 1).
kernel void group_norm(global const char* src, ulong src_off, long4 ne, ulong4 snb, global char* dst,
                       ulong dst_off, ulong4 dnb, long per_group, float eps) {
  local float buf[MAX_GROUP];
  const long g = get_group_id(0), i3 = get_global_id(1);
  const int lid = get_local_id(0), nl = get_local_size(0);
  const long c0 = g * per_group, c1 = min(ne.s2, c0 + per_group);
  if (c0 >= c1) return;  // uniform over the group: trailing groups can be empty
  const long plane = ne.s0 * ne.s1, count = plane * (c1 - c0);
  float s = 0.0f;
  for (long l = lid; l < count; l += nl) {
    const long i0 = l % ne.s0, i1 = (l / ne.s0) % ne.s1, i2 = c0 + l / plane;
    s += *(global const float*)(src + src_off + i0 * snb.s0 + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3);
  }
  const float mean = group_sum(s, buf) / (float)count;
  float s2 = 0.0f;
  for (long l = lid; l < count; l += nl) {
    const long i0 = l % ne.s0, i1 = (l / ne.s0) % ne.s1, i2 = c0 + l / plane;
    const float v =
        *(global const float*)(src + src_off + i0 * snb.s0 + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3) - mean;
    s2 += v * v;
  }
  const float scale = 1.0f / sqrt(group_sum(s2, buf) / (float)count + eps);
  for (long l = lid; l < count; l += nl) {
    const long i0 = l % ne.s0, i1 = (l / ne.s0) % ne.s1, i2 = c0 + l / plane;
    const float v =
        *(global const float*)(src + src_off + i0 * snb.s0 + i1 * snb.s1 + i2 * snb.s2 + i3 * snb.s3);
    *(global float*)(dst + dst_off + i0 * dnb.s0 + i1 * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3) = (v - mean) * scale;
  }
}
