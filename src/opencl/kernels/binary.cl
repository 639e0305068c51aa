// ADD, MUL, DIV (b tiled over a) and ACC. Values in f32, rounded to the result type on store.
// A tensor argument is (buffer, byte offset of its first element, type, [ne,] nb).

#define BINARY_ADD 0
#define BINARY_MUL 1
#define BINARY_DIV 2

// dst = a (op) b[i mod b.ne]; one work-item per result element (flat index).
kernel void binary_op(global const char* a, ulong a_off, int a_type, ulong4 anb, global const char* b,
                      ulong b_off, int b_type, long4 bne, ulong4 bnb, global char* dst, ulong dst_off,
                      int dst_type, long4 dne, ulong4 dnb, long n, int op) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  const long4 cb = (long4)(c.s0 % bne.s0, c.s1 % bne.s1, c.s2 % bne.s2, c.s3 % bne.s3);
  const float x = load_f32(a + a_off + byte_offset(c, anb, a_type), a_type);
  const float y = load_f32(b + b_off + byte_offset(cb, bnb, b_type), b_type);
  float r;
  if (op == BINARY_ADD)
    r = x + y;
  else if (op == BINARY_MUL)
    r = x * y;
  else
    r = x / y;
  store_f32(dst + dst_off + byte_offset(c, dnb, dst_type), dst_type, r);
}

// ACC step 1: dst = a (both contiguous f32 of n elements).
kernel void acc_copy(global const float* a, ulong a_off, global float* dst, ulong dst_off, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  ((global float*)((global char*)dst + dst_off))[l] =
      ((global const float*)((global const char*)a + a_off))[l];
}

// ACC step 2 when no two elements of b land on the same f32 of dst: one work-item per b element.
// stride = (4, nb1, nb2, nb3) of the target view; offset in bytes.
kernel void acc_add(global const char* b, ulong b_off, long4 bne, ulong4 bnb, global char* dst, ulong dst_off,
                    ulong4 stride, ulong offset, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, bne);
  global float* d = (global float*)(dst + dst_off + offset + byte_offset(c, stride, T_F32));
  *d = *d + *(global const float*)(b + b_off + byte_offset(c, bnb, T_F32));
}

// ACC step 2 when targets overlap: one work-item per f32 of dst in [first, first + n); it adds
// every element of b that lands on it in b's logical order, as a sequential loop would.
kernel void acc_add_ordered(global const char* b, ulong b_off, long4 bne, ulong4 bnb, global char* dst,
                            ulong dst_off, ulong4 stride, ulong offset, long first, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long at = (first + l) * 4;  // byte position in dst
  global float* d = (global float*)(dst + dst_off + at);
  float v = *d;
  for (long i3 = 0; i3 < bne.s3; ++i3)
    for (long i2 = 0; i2 < bne.s2; ++i2)
      for (long i1 = 0; i1 < bne.s1; ++i1) {
        const long rel =
            at - (long)offset - i1 * (long)stride.s1 - i2 * (long)stride.s2 - i3 * (long)stride.s3;
        if (rel < 0 || rel / 4 >= bne.s0) continue;
        const long4 c = (long4)(rel / 4, i1, i2, i3);
        v += *(global const float*)(b + b_off + byte_offset(c, bnb, T_F32));
      }
  *d = v;
}
