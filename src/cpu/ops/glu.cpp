// GLU: gated linear units over rows of a gate and an up projection. SWIGLU_OAI is gpt-oss's clamped
// SwiGLU: min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1), in f32
// with expf as ggml's CPU computes it.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_glu(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor* b = dst.src[1];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  const GluParams p = glu_params(dst);
  if (p.op != GluOp::SwigluOai)
    raise(ErrorCode::Unsupported, "CPU: GLU op {} has no kernel", static_cast<int>(p.op));
  if (a.type != DType::F32 || (b != nullptr && b->type != DType::F32) || !a.rows_contiguous() ||
      (b != nullptr && !b->rows_contiguous()))
    raise(ErrorCode::Unsupported, "CPU: GLU needs f32 sources with contiguous rows, got {}", dst.describe());
  const int64_t nc = dst.ne[0], ne1 = dst.ne[1], ne2 = dst.ne[2];
  const float alpha = p.alpha, limit = p.limit;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      const auto* g = reinterpret_cast<const float*>(a.at(0, i1, i2, i3));
      const float* u = b != nullptr ? reinterpret_cast<const float*>(b->at(0, i1, i2, i3)) : g + nc;
      if (b == nullptr && p.swapped) std::swap(g, u);
      auto* y = reinterpret_cast<float*>(dst.at(0, i1, i2, i3));
      for (int64_t i = 0; i < nc; ++i) {
        const float x = std::min(g[i], limit);
        const float up = std::clamp(u[i], -limit, limit);
        y[i] = x / (1.0f + std::exp(alpha * -x)) * (up + 1.0f);
      }
    }
  });
}

}  // namespace tessera::cpu
