// GET_ROWS: dst[:, r, j, k] = a[:, idx[r, j, k], j, k] as f32 (i32 stays i32). An index outside
// [0, a.ne1) writes zeros and records itself in status (int[2]: flag, first bad index).
// Grid (ne0, R, n1 * n2).
kernel void get_rows(global const char* src, ulong src_off, ulong src_doff, int src_type, long src_ne1,
                     ulong4 snb, global const char* idx, ulong idx_off, ulong4 inb, global char* dst,
                     ulong dst_off, ulong4 dnb, long ne0, long n1, global char* status, ulong status_off) {
  const long i0 = get_global_id(0);
  if (i0 >= ne0) return;
  const long r = get_global_id(1);
  const long jk = get_global_id(2);
  const long j = jk % n1, k = jk / n1;
  const int row = *(global const int*)(idx + idx_off + r * inb.s0 + j * inb.s1 + k * inb.s2);
  global char* d = dst + dst_off + i0 * dnb.s0 + r * dnb.s1 + j * dnb.s2 + k * dnb.s3;
  if (row < 0 || row >= src_ne1) {
    global int* flag = (global int*)(status + status_off);
    if (atomic_cmpxchg(flag, 0, 1) == 0) flag[1] = row;
    *(global int*)d = 0;
    return;
  }
  const long4 c = (long4)(i0, row, j, k);
  if (is_quant(src_type)) {
    const long blk = (long)(byte_offset(c, snb, src_type) / (ulong)block_bytes(src_type));
    *(global float*)d = load_q(src + src_off, src + src_doff, blk, (int)(i0 % QK), src_type);
  } else if (src_type == T_I32) {
    *(global int*)d = *(global const int*)(src + src_off + byte_offset(c, snb, src_type));
  } else {
    *(global float*)d = load_f32(src + src_off + byte_offset(c, snb, src_type), src_type);
  }
}
