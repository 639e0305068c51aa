// DUP, CONT, CPY: elements of the source in its logical order into the destination's logical order.
// A tensor argument is (buffer, byte offset of its first element or first quant, byte offset of
// its first scale for Q4_0 / Q8_0, type, ne, nb).

// Scalar source and destination: one work-item per destination element; grid (ne0, ne1, ne2 * ne3).
kernel void cpy_elements(global const char* src, ulong src_off, int src_type, long4 sne, ulong4 snb,
                         global char* dst, ulong dst_off, int dst_type, long4 dne, ulong4 dnb, int same_shape,
                         int raw_bytes) {
  const long i0 = get_global_id(0);
  if (i0 >= dne.s0) return;
  const long i1 = get_global_id(1);
  const long i23 = get_global_id(2);
  const long4 c = (long4)(i0, i1, i23 % dne.s2, i23 / dne.s2);
  const long4 s = same_shape ? c : unravel(c.s0 + dne.s0 * (c.s1 + dne.s1 * (c.s2 + dne.s2 * c.s3)), sne);
  global char* d = dst + dst_off + byte_offset(c, dnb, dst_type);
  global const char* p = src + src_off + byte_offset(s, snb, src_type);
  if (raw_bytes == 4)
    *(global uint*)d = *(global const uint*)p;  // same type: exact bits (i32, NaN payloads)
  else if (raw_bytes == 2)
    *(global ushort*)d = *(global const ushort*)p;
  else
    store_f32(d, dst_type, load_f32(p, src_type));
}

// The 32 source elements from logical index l (a multiple of 32: they share a row and a chunk).
inline void load_source_chunk(global const char* src, ulong src_off, ulong src_doff, int src_type, long4 sne,
                              ulong4 snb, long l, float* x) {
  const long4 s = unravel(l, sne);
  if (is_quant(src_type)) {
    const long blk = (long)(byte_offset(s, snb, src_type) / (ulong)block_bytes(src_type));
    load_chunk(src + src_off, src + src_doff, blk, (int)((s.s0 % block_elems(src_type)) / QK), src_type, x);
  } else {
    global const char* p = src + src_off + byte_offset(s, snb, src_type);
    for (int j = 0; j < QK; ++j) x[j] = load_f32(p + j * snb.s0, src_type);
  }
}

// Quantized source (split layout or native blocks), scalar destination: one work-item per 32
// source elements in logical order; grid (nelements / 32, 1, 1).
kernel void cpy_from_blocks(global const char* src, ulong src_off, ulong src_doff, int src_type, long4 sne,
                            ulong4 snb, global char* dst, ulong dst_off, int dst_type, long4 dne, ulong4 dnb,
                            long nchunks) {
  const long ch = get_global_id(0);
  if (ch >= nchunks) return;
  float x[QK];
  load_source_chunk(src, src_off, src_doff, src_type, sne, snb, ch * QK, x);
  for (int j = 0; j < QK; ++j) {
    const long4 c = unravel(ch * QK + j, dne);
    store_f32(dst + dst_off + byte_offset(c, dnb, dst_type), dst_type, x[j]);
  }
}

// Quantized destination (contiguous; Q4_0 / Q8_0 in the split layout, or a native type with a
// device quantizer): one work-item per 32 destination elements.
kernel void cpy_quantize(global const char* src, ulong src_off, ulong src_doff, int src_type, long4 sne,
                         ulong4 snb, global char* dst, ulong dst_off, ulong dst_doff, int dst_type, long nblocks) {
  const long b = get_global_id(0);
  if (b >= nblocks) return;
  float x[QK];
  load_source_chunk(src, src_off, src_doff, src_type, sne, snb, b * QK, x);
  if (is_split(dst_type))
    quantize_block(x, dst + dst_off, dst + dst_doff, b, dst_type);
  else
    quantize_native(x, (global uchar*)(dst + dst_off) + b * block_bytes(dst_type), dst_type);
}

// Same quantized type: blocks copied exactly (quants and scale, or the whole native block).
kernel void cpy_blocks(global const char* src, ulong src_off, ulong src_doff, long4 sne, ulong4 snb,
                       global char* dst, ulong dst_off, ulong dst_doff, int type, long nblocks) {
  const long b = get_global_id(0);
  if (b >= nblocks) return;
  const long blk =
      (long)(byte_offset(unravel(b * block_elems(type), sne), snb, type) / (ulong)block_bytes(type));
  const long qb = is_split(type) ? quant_bytes(type) : block_bytes(type);
  global const uchar* from = (global const uchar*)(src + src_off) + blk * qb;
  global uchar* to = (global uchar*)(dst + dst_off) + b * qb;
  for (long k = 0; k < qb; ++k) to[k] = from[k];
  if (is_split(type)) ((global ushort*)(dst + dst_doff))[b] = ((global const ushort*)(src + src_doff))[blk];
}
