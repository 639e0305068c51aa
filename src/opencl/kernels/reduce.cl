// SUM_ROWS and ARGSORT. Rows run along dim 0 (one work-group per row, or flat indices): GPUs cap the
// grid's other dims far lower (65535 on NVIDIA).

// Row r's first byte for a tensor of shape ne and strides nb (r counts rows in logical order).
inline ulong row_offset(long r, long4 ne, ulong4 nb) {
  const long i1 = r % ne.s1, i2 = (r / ne.s1) % ne.s2, i3 = r / (ne.s1 * ne.s2);
  return (ulong)i1 * nb.s1 + (ulong)i2 * nb.s2 + (ulong)i3 * nb.s3;
}

#define SUM_MAX_GROUP 256

// Each work-item sums a strided part of the row (compensated), then the group adds the parts in a
// tree. The group size is a power of two <= SUM_MAX_GROUP.
kernel void sum_rows_op(global const char* a, ulong a_off, long4 ane, ulong4 anb, global char* dst,
                        ulong dst_off, long4 dne, ulong4 dnb) {
  local float partial[SUM_MAX_GROUP];
  const int lid = get_local_id(0), group = get_local_size(0);
  const long r = get_group_id(0);
  global const char* row = a + a_off + row_offset(r, ane, anb);
  float sum = 0.0f, comp = 0.0f;  // Kahan: comp holds the low bits lost so far
  for (long i = lid; i < ane.s0; i += group) {
    const float y = *(global const float*)(row + i * anb.s0) - comp;
    const float t = sum + y;
    comp = (t - sum) - y;
    sum = t;
  }
  partial[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = group / 2; s > 0; s /= 2) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) *(global float*)(dst + dst_off + row_offset(r, dne, dnb)) = partial[0];
}

// The sort order of ARGSORT, total so that the result is unique (a stable sort's): by value
// (ascending or descending), ties by index, NaNs after every number, padding (index >= n) last.
inline bool sorts_before(float u, int iu, float v, int iv, int n, int desc) {
  if (iu >= n) return false;
  if (iv >= n) return true;
  const bool un = isnan(u), vn = isnan(v);
  if (un || vn) return un != vn ? vn : iu < iv;
  if (u != v) return desc ? u > v : u < v;
  return iu < iv;
}

// The pair (i, i + j) that work t of a bitonic stage (k, j) orders, and whether it goes up.
inline int bitonic_first(int t, int j) { return ((t & ~(j - 1)) << 1) | (t & (j - 1)); }

// Rows whose power-of-two padding n2 fits in local memory: a bitonic sort of the indices there.
// vals and idx hold n2 entries each.
kernel void argsort_local(global const char* a, ulong a_off, long4 ane, ulong4 anb, global char* dst,
                          ulong dst_off, ulong4 dnb, int n2, int desc, local float* vals, local int* idx) {
  const int lid = get_local_id(0), group = get_local_size(0);
  const long r = get_group_id(0);
  const int n = (int)ane.s0;
  global const char* row = a + a_off + row_offset(r, ane, anb);
  for (int i = lid; i < n2; i += group) {
    idx[i] = i;
    vals[i] = i < n ? *(global const float*)(row + i * anb.s0) : 0.0f;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = 2; k <= n2; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int t = lid; t < n2 / 2; t += group) {
        const int i = bitonic_first(t, j), p = i + j;
        const int xi = idx[i], xp = idx[p];
        const bool up = (i & k) == 0;
        const bool swap = up ? sorts_before(vals[xp], xp, vals[xi], xi, n, desc)
                             : sorts_before(vals[xi], xi, vals[xp], xp, n, desc);
        if (swap) {
          idx[i] = xp;
          idx[p] = xi;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  global char* out = dst + dst_off + row_offset(r, ane, dnb);
  for (int i = lid; i < n; i += group) *(global int*)(out + i * dnb.s0) = idx[i];
}

// Longer rows: the same network in global scratch (idx: n2 ints per row), one launch per stage,
// over flat indices l (n counts them).
kernel void argsort_init(global int* idx, ulong idx_off, int n2, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  ((global int*)((global char*)idx + idx_off))[l] = (int)(l & (n2 - 1));  // n2 is a power of two
}

// l = row * (n2 / 2) + t: work t of stage (k, j) in that row.
kernel void argsort_step(global const char* a, ulong a_off, long4 ane, ulong4 anb, global int* idx,
                         ulong idx_off, int n2, int k, int j, int desc, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long r = l / (n2 / 2);
  const int t = (int)(l - r * (n2 / 2));
  const int len = (int)ane.s0;
  global const char* row = a + a_off + row_offset(r, ane, anb);
  global int* x = (global int*)((global char*)idx + idx_off) + r * n2;
  const int i = bitonic_first(t, j), p = i + j;
  const int xi = x[i], xp = x[p];
  const float vi = xi < len ? *(global const float*)(row + xi * anb.s0) : 0.0f;
  const float vp = xp < len ? *(global const float*)(row + xp * anb.s0) : 0.0f;
  const bool up = (i & k) == 0;
  const bool swap = up ? sorts_before(vp, xp, vi, xi, len, desc) : sorts_before(vi, xi, vp, xp, len, desc);
  if (swap) {
    x[i] = xp;
    x[p] = xi;
  }
}

// l = row * ne0 + i: the first ne0 sorted indices of each row (padding sorted last).
kernel void argsort_write(global const int* idx, ulong idx_off, int n2, long4 dne, global char* dst,
                          ulong dst_off, ulong4 dnb, long n) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long r = l / dne.s0, i = l - r * dne.s0;
  const int v = ((global const int*)((global const char*)idx + idx_off))[r * n2 + i];
  *(global int*)(dst + dst_off + row_offset(r, dne, dnb) + i * dnb.s0) = v;
}
