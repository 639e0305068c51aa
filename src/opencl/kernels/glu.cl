// GLU: gated linear units. SWIGLU_OAI is gpt-oss's clamped SwiGLU,
// y = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1), in f32 with
// the comparisons written as the CPU's std::min and std::clamp make them (NaN inputs alike).
// The gate g and up u come with their own offsets and strides (the fused form's halves of one row
// included). Grid: (ne0, ne1, ne2 * ne3).
kernel void swiglu_oai(global const char* g, ulong g_off, ulong4 gnb, global const char* u, ulong u_off,
                       ulong4 unb, global char* dst, ulong dst_off, long4 dne, ulong4 dnb, float alpha,
                       float limit) {
  const long i0 = get_global_id(0);
  if (i0 >= dne.s0) return;
  const long i1 = get_global_id(1), i23 = get_global_id(2);
  const long i2 = i23 % dne.s2, i3 = i23 / dne.s2;
  const float gate = *(global const float*)(g + g_off + i0 * gnb.s0 + i1 * gnb.s1 + i2 * gnb.s2 + i3 * gnb.s3);
  const float up = *(global const float*)(u + u_off + i0 * unb.s0 + i1 * unb.s1 + i2 * unb.s2 + i3 * unb.s3);
  const float x = limit < gate ? limit : gate;
  const float v = up < -limit ? -limit : (limit < up ? limit : up);
  *(global float*)(dst + dst_off + i0 * dnb.s0 + i1 * dnb.s1 + i2 * dnb.s2 + i3 * dnb.s3) =
      x / (1.0f + exp(alpha * -x)) * (v + 1.0f);
}
