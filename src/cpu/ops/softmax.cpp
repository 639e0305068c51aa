// DIAG_MASK_INF and SOFT_MAX kernels (optional F16/F32 mask, scale, ALiBi slopes). SOFT_MAX runs on
// vec_math's rows: the reference on the scalar ones (std::exp), the fast path on the best the CPU
// has, which differ from them only in exp (the AVX2 exp where the CPU has it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "cpu/vec_math.h"
#include "tessera/op_constants.h"

namespace tessera::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

void run_diag_mask_inf(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: DIAG_MASK_INF needs an f32 source, got {}", a.describe());
  const int64_t n_past = diag_mask_inf_params(dst).n_past;
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t j = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      float* y = reinterpret_cast<float*>(dst.at(0, j, i2, i3));
      load_row_f32(a, j, i2, i3, y);
      for (int64_t i = std::max<int64_t>(0, n_past + j + 1); i < ne0; ++i) y[i] = kNegInf;
    }
  });
}

void run_soft_max(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor* mask = dst.src[1];
  const Tensor* sinks = dst.src[2];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: SOFT_MAX needs an f32 source, got {}", a.describe());
  if (sinks != nullptr && (sinks->type != DType::F32 || sinks->ne[0] != a.ne[2] || !sinks->rows_contiguous()))
    raise(ErrorCode::InvalidArgument, "SOFT_MAX: sinks {} do not fit {}", sinks->describe(), a.describe());
  if (mask != nullptr && ((mask->type != DType::F32 && mask->type != DType::F16) || mask->ne[0] != a.ne[0] ||
                          mask->ne[1] < a.ne[1] || a.ne[2] % mask->ne[2] != 0 || a.ne[3] % mask->ne[3] != 0))
    raise(ErrorCode::InvalidArgument, "SOFT_MAX: mask {} does not fit {}", mask->describe(), a.describe());

  const SoftMaxParams params = soft_max_params(dst);
  const float scale = params.scale;
  const AlibiSlopes alibi = alibi_slopes(params.max_bias, a.ne[2]);
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  // The reference takes the scalar rows (std::exp); the fast path the best this CPU has, which
  // differ from them only in exp.
  const vec::MathKernels& rows = ctx.reference() ? vec::scalar_math() : vec::math();
  // f32 rows and masks are read where they are; others are converted first.
  const bool a_rows = a.nb[0] == sizeof(float);
  const bool mask_rows = mask != nullptr && mask->type == DType::F32 && mask->nb[0] == sizeof(float);
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> m(mask != nullptr && !mask_rows ? static_cast<size_t>(ne0) : 0);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      float* w = reinterpret_cast<float*>(dst.at(0, i1, i2, i3));
      // Mask row i1 of the mask slice that tiles (i2, i3); the slope belongs to head i2.
      const float* mrow = nullptr;
      if (mask != nullptr) {
        const int64_t m2 = i2 % mask->ne[2], m3 = i3 % mask->ne[3];
        if (mask_rows) {
          mrow = reinterpret_cast<const float*>(mask->at(0, i1, m2, m3));
        } else {
          load_row_f32(*mask, i1, m2, m3, m.data());
          mrow = m.data();
        }
      }
      const float* x = w;
      if (a_rows)
        x = reinterpret_cast<const float*>(a.at(0, i1, i2, i3));
      else
        load_row_f32(a, i1, i2, i3, w);
      float max = rows.scale_mask_max(x, w, scale, mrow, alibi.slope(i2), ne0);
      if (sinks != nullptr) {
        // Head i2's sink joins the denominator as ggml adds it: the max over the row and the sink,
        // then exp(sink - max) in f32 added to the row's sum.
        const float sink = reinterpret_cast<const float*>(sinks->data)[i2];
        max = std::max(max, sink);
        const double sum = rows.exp_sum(w, w, ne0, max) + static_cast<double>(std::exp(sink - max));
        rows.scale(w, static_cast<float>(1.0 / sum), ne0);
        continue;
      }
      if (max == kNegInf) {
        // Every logit is -inf (a fully masked row). ggml computes exp(-inf - -inf) = NaN here; we
        // define the result as all zeros instead, so such a row contributes nothing downstream.
        std::fill(w, w + ne0, 0.0f);
        continue;
      }
      const double sum = rows.exp_sum(w, w, ne0, max);
      rows.scale(w, static_cast<float>(1.0 / sum), ne0);
    }
  });
}

}  // namespace tessera::cpu
