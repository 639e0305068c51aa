// REPEAT: dst[i0, i1, i2, i3] = a[i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3] (same type; bytes
// are copied, so every non-quantized type repeats exactly).
#include <cstring>

#include "core/check.h"
#include "cpu/kernels.h"

namespace tessera::cpu {

void run_repeat(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  if (is_quantized(a.type) || a.type != dst.type)
    raise(ErrorCode::InvalidArgument, "REPEAT: cannot repeat {} into {}", a.describe(), dst.describe());
  for (int d = 0; d < kMaxDims; ++d)
    if (a.ne[d] <= 0 || dst.ne[d] % a.ne[d] != 0)
      raise(ErrorCode::InvalidArgument, "REPEAT: {} does not tile {}", a.describe(), dst.describe());
  const size_t esize = traits(a.type).block_bytes;
  const int64_t n0 = dst.ne[0];
  // With a's rows contiguous, each period of a row is one memcpy (the same bytes either way).
  const bool whole_rows = !ctx.reference() && a.nb[0] == esize;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % dst.ne[1];
      const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
      const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
      const char* s = a.at(0, i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
      char* d = dst.at(0, i1, i2, i3);
      if (whole_rows) {
        for (int64_t i0 = 0; i0 < n0; i0 += a.ne[0])
          std::memcpy(d + i0 * dst.nb[0], s, static_cast<size_t>(a.ne[0]) * esize);
      } else {
        for (int64_t i0 = 0; i0 < n0; ++i0)
          std::memcpy(d + i0 * dst.nb[0], s + (i0 % a.ne[0]) * a.nb[0], esize);
      }
    }
  });
}

}  // namespace tessera::cpu
