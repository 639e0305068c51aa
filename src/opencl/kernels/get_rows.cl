// GET_ROWS: dst[:, r, j, k] = a[:, idx[r, j, k], j, k] as f32 (i32 stays i32). An index outside
// [0, a.ne1) writes zeros and records itself in status (int[2]: flag, first bad index).

// The source row of (r, j, k), or -1 (recorded in status) when the index is out of range.
inline int source_row(global const char* idx, ulong idx_off, ulong4 inb, long r, long j, long k, long src_ne1,
                      global char* status, ulong status_off) {
  const int row = *(global const int*)(idx + idx_off + r * inb.s0 + j * inb.s1 + k * inb.s2);
  if (row >= 0 && row < src_ne1) return row;
  global int* flag = (global int*)(status + status_off);
  if (atomic_cmpxchg(flag, 0, 1) == 0) flag[1] = row;
  return -1;
}

// Scalar sources, one element per item. Grid (ne0, R, n1 * n2).
kernel void get_rows(global const char* src, ulong src_off, int src_type, long src_ne1, ulong4 snb,
                     global const char* idx, ulong idx_off, ulong4 inb, global char* dst, ulong dst_off,
                     ulong4 dnb, long ne0, long n1, global char* status, ulong status_off) {
  const long i0 = get_global_id(0);
  if (i0 >= ne0) return;
  const long r = get_global_id(1);
  const long jk = get_global_id(2);
  const long j = jk % n1, k = jk / n1;
  const int row = source_row(idx, idx_off, inb, r, j, k, src_ne1, status, status_off);
  global char* d = dst + dst_off + i0 * dnb.s0 + r * dnb.s1 + j * dnb.s2 + k * dnb.s3;
  if (row < 0) {
    *(global int*)d = 0;
    return;
  }
  global const char* p = src + src_off + byte_offset((long4)(i0, row, j, k), snb, src_type);
  if (src_type == T_I32)
    *(global int*)d = *(global const int*)p;
  else
    *(global float*)d = load_f32(p, src_type);
}

// Quantized sources (split layout or native blocks), 32 elements per item. Grid (ne0 / 32, R, n1 * n2).
kernel void get_rows_blocks(global const char* src, ulong src_off, ulong src_doff, int src_type, long src_ne1,
                            ulong4 snb, global const char* idx, ulong idx_off, ulong4 inb, global char* dst,
                            ulong dst_off, ulong4 dnb, long ne0, long n1, global char* status,
                            ulong status_off) {
  const long ch = get_global_id(0);
  if (ch >= ne0 / QK) return;
  const long r = get_global_id(1);
  const long jk = get_global_id(2);
  const long j = jk % n1, k = jk / n1;
  const int row = source_row(idx, idx_off, inb, r, j, k, src_ne1, status, status_off);
  float x[QK];
  if (row < 0) {
    for (int e = 0; e < QK; ++e) x[e] = 0.0f;
  } else {
    const long4 c = (long4)(ch * QK, row, j, k);
    const long blk = (long)(byte_offset(c, snb, src_type) / (ulong)block_bytes(src_type));
    load_chunk(src + src_off, src + src_doff, blk, (int)(ch % (block_elems(src_type) / QK)), src_type, x);
  }
  global char* d = dst + dst_off + r * dnb.s1 + j * dnb.s2 + k * dnb.s3;
  for (int e = 0; e < QK; ++e) *(global float*)(d + (ch * QK + e) * dnb.s0) = x[e];
}
