// IM2COL and POOL_2D: one work-item per result element.

// dst[(c*KH + kh)*KW + kw, ow, oh, n] = in[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, c, n], 0 outside.
// Input strides by role (w, h, c, n) and sizes (iw, ih); 1-D inputs pass kh = 1, ih = 1, nb_h = 0.
// dne is the result's shape viewed as [IC*KH*KW, OW, OH, N].
kernel void im2col_op(global const char* in, ulong in_off, int in_type, ulong4 inb, long iw, long ih,
                      global char* dst, ulong dst_off, int dst_type, long4 dne, ulong4 dnb, long kw, long kh,
                      int s0, int s1, int p0, int p1, int d0, int d1, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  const long kx = c.s0 % kw, ky = (c.s0 / kw) % kh, ch = c.s0 / (kw * kh);
  const long x = c.s1 * s0 + kx * d0 - p0;
  const long y = c.s2 * s1 + ky * d1 - p1;
  float v = 0.0f;
  if (x >= 0 && x < iw && y >= 0 && y < ih)
    v = load_f32(in + in_off + x * inb.s0 + y * inb.s1 + ch * inb.s2 + c.s3 * inb.s3, in_type);
  store_f32(dst + dst_off + byte_offset(c, dnb, dst_type), dst_type, v);
}

// Max (op 0) or average (op 1) over k0 x k1 windows; padding adds nothing, avg divides by k0*k1.
kernel void pool_2d_op(global const char* a, ulong a_off, int a_type, long4 ane, ulong4 anb, global char* dst,
                       ulong dst_off, long4 dne, ulong4 dnb, int op, int k0, int k1, int s0, int s1, int p0,
                       int p1, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  global const char* plane = a + a_off + c.s2 * anb.s2 + c.s3 * anb.s3;
  float acc = op == 0 ? -FLT_MAX : 0.0f;
  for (int ky = 0; ky < k1; ++ky) {
    const long y = c.s1 * s1 + ky - p1;
    if (y < 0 || y >= ane.s1) continue;
    for (int kx = 0; kx < k0; ++kx) {
      const long x = c.s0 * s0 + kx - p0;
      if (x < 0 || x >= ane.s0) continue;
      const float v = load_f32(plane + x * anb.s0 + y * anb.s1, a_type);
      if (op == 0) {
        if (v > acc) acc = v;
      } else {
        acc += v;
      }
    }
  }
  *(global float*)(dst + dst_off + byte_offset(c, dnb, T_F32)) = op == 1 ? acc / (float)(k0 * k1) : acc;
}
