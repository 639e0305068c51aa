// REPEAT and CONCAT: element bytes copied exactly (any non-quantized type; esize 2 or 4).

inline void copy_element(global const char* from, global char* to, int esize) {
  if (esize == 4)
    *(global uint*)to = *(global const uint*)from;
  else
    *(global ushort*)to = *(global const ushort*)from;
}

// dst[i] = a[i mod a.ne]; one work-item per result element.
kernel void repeat_op(global const char* a, ulong a_off, long4 ane, ulong4 anb, global char* dst,
                      ulong dst_off, long4 dne, ulong4 dnb, long n, int esize) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  const long4 s = (long4)(c.s0 % ane.s0, c.s1 % ane.s1, c.s2 % ane.s2, c.s3 % ane.s3);
  copy_element(a + a_off + byte_offset(s, anb, T_F32), dst + dst_off + byte_offset(c, dnb, T_F32), esize);
}

// Along `dim`, a below a_len, else b at index - a_len; one work-item per result element.
kernel void concat_op(global const char* a, ulong a_off, ulong4 anb, global const char* b, ulong b_off,
                      ulong4 bnb, global char* dst, ulong dst_off, long4 dne, ulong4 dnb, long n, int dim,
                      long a_len, int esize) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  long4 s = c;
  long at;
  switch (dim) {
    case 0:
      at = c.s0;
      s.s0 -= a_len;
      break;
    case 1:
      at = c.s1;
      s.s1 -= a_len;
      break;
    case 2:
      at = c.s2;
      s.s2 -= a_len;
      break;
    default:
      at = c.s3;
      s.s3 -= a_len;
      break;
  }
  global const char* from =
      at < a_len ? a + a_off + byte_offset(c, anb, T_F32) : b + b_off + byte_offset(s, bnb, T_F32);
  copy_element(from, dst + dst_off + byte_offset(c, dnb, T_F32), esize);
}
