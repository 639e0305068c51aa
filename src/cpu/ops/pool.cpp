// POOL_2D reference kernel: max or average over k0 x k1 windows with zero-width padding.
#include <cfloat>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_pool_2d(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  const Pool2DParams params = pool_2d_params(dst);
  const PoolOp op = params.op;
  const int64_t k0 = params.k0, k1 = params.k1, s0 = params.s0, s1 = params.s1, p0 = params.p0,
                p1 = params.p1;

  const int64_t ne0 = dst.ne[0], ne1 = dst.ne[1], ne2 = dst.ne[2];
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t oy = r % ne1, c = (r / ne1) % ne2, n = r / (ne1 * ne2);
      float* out = reinterpret_cast<float*>(dst.at(0, oy, c, n));
      const char* plane = static_cast<const char*>(a.data) + c * a.nb[2] + n * a.nb[3];
      for (int64_t ox = 0; ox < ne0; ++ox) {
        // Padding contributes nothing: max skips it, avg still divides by the whole window.
        float acc = op == PoolOp::Max ? -FLT_MAX : 0.0f;
        for (int64_t ky = 0; ky < k1; ++ky) {
          const int64_t y = oy * s1 + ky - p1;
          if (y < 0 || y >= a.ne[1]) continue;
          for (int64_t kx = 0; kx < k0; ++kx) {
            const int64_t x = ox * s0 + kx - p0;
            if (x < 0 || x >= a.ne[0]) continue;
            const float v = load_f32(a.type, plane + x * a.nb[0] + y * a.nb[1]);
            if (op == PoolOp::Max) {
              if (v > acc) acc = v;
            } else {
              acc += v;
            }
          }
        }
        out[ox] = op == PoolOp::Avg ? acc / static_cast<float>(k0 * k1) : acc;
      }
    }
  });
}

}  // namespace tessera::cpu
