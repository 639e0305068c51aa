// ADD_ID: row (i1, i2) of a plus the row of b that ids[i1, i2] names (ggml_add_id: the biases of the
// experts each token's slots picked). An id outside b's rows gives NaNs: the CPU refuses it with an
// Error, which a kernel cannot raise. Grid: (ne0, ne1, ne2).
kernel void add_id(global const char* a, ulong a_off, ulong4 anb, global const char* b, ulong b_off, ulong4 bnb,
                   long b_rows, global const char* ids, ulong ids_off, ulong4 inb, global char* dst,
                   ulong dst_off, long ne0, ulong4 dnb) {
  const long i0 = get_global_id(0);
  if (i0 >= ne0) return;
  const long i1 = get_global_id(1), i2 = get_global_id(2);
  const int row = *(global const int*)(ids + ids_off + i1 * inb.s0 + i2 * inb.s1);
  const float x = *(global const float*)(a + a_off + i0 * anb.s0 + i1 * anb.s1 + i2 * anb.s2);
  const float bias = row >= 0 && row < b_rows ? *(global const float*)(b + b_off + i0 * bnb.s0 + row * bnb.s1) : NAN;
  *(global float*)(dst + dst_off + i0 * dnb.s0 + i1 * dnb.s1 + i2 * dnb.s2) = x + bias;
}
