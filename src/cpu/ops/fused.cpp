// Fused chains (cpu/fused.h).
#include "cpu/fused.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

bool can_fuse_rms_norm_mul(const Tensor& norm, const Tensor& mul) noexcept {
  if (norm.op != Op::RmsNorm || mul.op != Op::Mul || mul.src[0] != &norm) return false;
  const Tensor* x = norm.src[0];
  const Tensor* w = mul.src[1];
  if (x == nullptr || w == nullptr || w == &norm) return false;
  if (x->type != DType::F32 || norm.type != DType::F32 || w->type != DType::F32 || mul.type != DType::F32)
    return false;
  if (!mul.is_contiguous() || w->nb[0] != sizeof(float) || !mul.same_shape(norm)) return false;
  for (int d = 0; d < kMaxDims; ++d)
    if (w->ne[d] <= 0 || mul.ne[d] % w->ne[d] != 0) return false;
  return true;
}

void run_rms_norm_mul(const ComputeContext& ctx, const Tensor& norm, Tensor& mul) {
  TESSERA_ASSERT(can_fuse_rms_norm_mul(norm, mul));
  const Tensor& a = *norm.src[0];
  const Tensor& w = *mul.src[1];
  const float eps = norm_params(norm).eps;
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2], w0 = w.ne[0];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      // RMS_NORM's sum and scale (norm.cpp), then MUL's product (binary.cpp).
      double sum = 0.0;
      for (int64_t i = 0; i < ne0; ++i) sum += static_cast<double>(x[i] * x[i]);
      const float mean = static_cast<float>(sum / static_cast<double>(ne0));
      const float scale = 1.0f / std::sqrt(mean + eps);
      const auto* pw = reinterpret_cast<const float*>(w.at(0, i1 % w.ne[1], i2 % w.ne[2], i3 % w.ne[3]));
      auto* y = reinterpret_cast<float*>(mul.at(0, i1, i2, i3));
      for (int64_t base = 0; base < ne0; base += w0)
        for (int64_t i = 0; i < w0; ++i) {
          const float n = x[base + i] * scale;
          y[base + i] = n * pw[i];
        }
    }
  });
}

}  // namespace tessera::cpu
