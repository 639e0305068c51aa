// NORM, RMS_NORM and GROUP_NORM reference kernels. Sums are accumulated in double (ggml_float),
// the final scaling is done in f32, as ggml does.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {
namespace {

float* dst_row(const Tensor& dst, int64_t i1, int64_t i2, int64_t i3) {
  return reinterpret_cast<float*>(dst.at(0, i1, i2, i3));
}

// y = (x - mean) / sqrt(var + eps) over each row; population variance.
void norm_rows(const ComputeContext& ctx, const Tensor& a, Tensor& dst, float eps) {
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      float* y = dst_row(dst, i1, i2, i3);
      double sum = 0.0;
      for (int64_t i = 0; i < ne0; ++i) sum += x[i];
      const float mean = static_cast<float>(sum / static_cast<double>(ne0));
      double sum2 = 0.0;
      for (int64_t i = 0; i < ne0; ++i) {
        const float v = x[i] - mean;
        y[i] = v;
        sum2 += static_cast<double>(v * v);
      }
      const float variance = static_cast<float>(sum2 / static_cast<double>(ne0));
      const float scale = 1.0f / std::sqrt(variance + eps);
      for (int64_t i = 0; i < ne0; ++i) y[i] *= scale;
    }
  });
}

// y = x / sqrt(mean(x^2) + eps) over each row.
void rms_norm_rows(const ComputeContext& ctx, const Tensor& a, Tensor& dst, float eps) {
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      double sum = 0.0;
      for (int64_t i = 0; i < ne0; ++i) sum += static_cast<double>(x[i] * x[i]);
      const float mean = static_cast<float>(sum / static_cast<double>(ne0));
      const float scale = 1.0f / std::sqrt(mean + eps);
      float* y = dst_row(dst, i1, i2, i3);
      for (int64_t i = 0; i < ne0; ++i) y[i] = x[i] * scale;
    }
  });
}

// Groups of ceil(ne2 / G) channels along dim 2 (the last one may be smaller, trailing groups may be
// empty); each (group, i3) is normalized over ne0 * ne1 * channels values.
void group_norm(const ComputeContext& ctx, const Tensor& a, Tensor& dst, int64_t n_groups, float eps) {
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2], ne3 = a.ne[3];
  const int64_t per_group = (ne2 + n_groups - 1) / n_groups;
  ctx.parallel_for(n_groups * ne3, [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item % n_groups, i3 = item / n_groups;
      const int64_t c_begin = g * per_group;
      const int64_t c_end = std::min(ne2, c_begin + per_group);
      if (c_begin >= c_end) continue;
      const double count = static_cast<double>(ne0 * ne1 * (c_end - c_begin));

      double sum = 0.0;
      for (int64_t i2 = c_begin; i2 < c_end; ++i2)
        for (int64_t i1 = 0; i1 < ne1; ++i1) {
          load_row_f32(a, i1, i2, i3, x.data());
          for (int64_t i = 0; i < ne0; ++i) sum += x[i];
        }
      const float mean = static_cast<float>(sum / count);

      double sum2 = 0.0;
      for (int64_t i2 = c_begin; i2 < c_end; ++i2)
        for (int64_t i1 = 0; i1 < ne1; ++i1) {
          load_row_f32(a, i1, i2, i3, x.data());
          float* y = dst_row(dst, i1, i2, i3);
          for (int64_t i = 0; i < ne0; ++i) {
            const float v = x[i] - mean;
            y[i] = v;
            sum2 += static_cast<double>(v * v);
          }
        }
      const float variance = static_cast<float>(sum2 / count);
      const float scale = 1.0f / std::sqrt(variance + eps);
      for (int64_t i2 = c_begin; i2 < c_end; ++i2)
        for (int64_t i1 = 0; i1 < ne1; ++i1) {
          float* y = dst_row(dst, i1, i2, i3);
          for (int64_t i = 0; i < ne0; ++i) y[i] *= scale;
        }
    }
  });
}

}  // namespace

void run_norm(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: {} needs an f32 source, got {}", op_name(dst.op), a.describe());
  switch (dst.op) {
    case Op::Norm:
      return norm_rows(ctx, a, dst, norm_params(dst).eps);
    case Op::RmsNorm:
      return rms_norm_rows(ctx, a, dst, norm_params(dst).eps);
    case Op::GroupNorm: {
      const GroupNormParams params = group_norm_params(dst);
      return group_norm(ctx, a, dst, params.n_groups, params.eps);
    }
    default:
      raise(ErrorCode::Unsupported, "CPU: run_norm cannot run {}", op_name(dst.op));
  }
}

}  // namespace tessera::cpu
