// CONCAT(a, b, dim): along `dim` the result is a where the index is below a.ne[dim], else b at
// index - a.ne[dim]; every other dim matches. Same type; bytes are copied.
#include <array>
#include <cstring>

#include "core/check.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_concat(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int dim = concat_params(dst).dim;
  if (dim < 0 || dim >= kMaxDims || a.type != dst.type || b.type != dst.type || is_quantized(dst.type))
    raise(ErrorCode::InvalidArgument, "CONCAT: cannot concatenate {} and {} along dim {}", a.describe(),
          b.describe(), dim);
  for (int d = 0; d < kMaxDims; ++d) {
    const int64_t want = d == dim ? a.ne[d] + b.ne[d] : a.ne[d];
    if (dst.ne[d] != want || (d != dim && b.ne[d] != a.ne[d]))
      raise(ErrorCode::InvalidArgument, "CONCAT: shapes of {} and {} do not give {} along dim {}",
            a.describe(), b.describe(), dst.describe(), dim);
  }
  const size_t esize = traits(dst.type).block_bytes;
  const int64_t n0 = dst.ne[0];
  const bool fast = !ctx.reference() && a.nb[0] == esize && b.nb[0] == esize;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::array<int64_t, 4> i{0, r % dst.ne[1], (r / dst.ne[1]) % dst.ne[2], r / (dst.ne[1] * dst.ne[2])};
      char* d = dst.at(0, i[1], i[2], i[3]);
      if (fast && dim != 0) {
        // The whole row comes from one source.
        const Tensor& s = i[dim] < a.ne[dim] ? a : b;
        if (i[dim] >= a.ne[dim]) i[dim] -= a.ne[dim];
        std::memcpy(d, s.at(0, i[1], i[2], i[3]), static_cast<size_t>(n0) * esize);
        continue;
      }
      if (fast) {
        std::memcpy(d, a.at(0, i[1], i[2], i[3]), static_cast<size_t>(a.ne[0]) * esize);
        std::memcpy(d + a.ne[0] * esize, b.at(0, i[1], i[2], i[3]), static_cast<size_t>(b.ne[0]) * esize);
        continue;
      }
      for (int64_t i0 = 0; i0 < n0; ++i0) {
        std::array<int64_t, 4> j = i;
        j[0] = i0;
        const Tensor* s = &a;
        if (j[dim] >= a.ne[dim]) {
          s = &b;
          j[dim] -= a.ne[dim];
        }
        const char* p = static_cast<const char*>(s->data) + j[0] * s->nb[0] + j[1] * s->nb[1] +
                        j[2] * s->nb[2] + j[3] * s->nb[3];
        std::memcpy(d + i0 * dst.nb[0], p, esize);
      }
    }
  });
}

}  // namespace tessera::cpu
