// ARANGE and TIMESTEP_EMBEDDING reference kernels (f32 arithmetic, as ggml computes them).
#include <cmath>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {
namespace {

void arange(const ComputeContext& ctx, Tensor& dst) {
  const ArangeParams params = arange_params(dst);
  const float start = params.start, step = params.step;
  float* out = static_cast<float*>(dst.data);
  ctx.parallel_for(dst.ne[0], [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = start + static_cast<float>(i) * step;
  });
}

void timestep_embedding(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& t = *dst.src[0];
  const TimestepEmbeddingParams params = timestep_embedding_params(dst);
  const int64_t dim = params.dim;
  const float max_period = static_cast<float>(params.max_period);
  const int64_t half = dim / 2;
  TESSERA_ASSERT(dst.ne[0] == dim && dst.ne[1] == t.ne[0]);
  const float neg_log_period = -std::log(max_period);
  ctx.parallel_for(dst.ne[1], [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float ts = load_f32(t.type, static_cast<const char*>(t.data) + i * t.nb[0]);
      float* out = reinterpret_cast<float*>(dst.at(0, i));
      for (int64_t j = 0; j < half; ++j) {
        const float freq = std::exp(neg_log_period * static_cast<float>(j) / static_cast<float>(half));
        const float arg = ts * freq;
        out[j] = std::cos(arg);
        out[j + half] = std::sin(arg);
      }
      if (dim % 2 != 0) out[dim - 1] = 0.0f;
    }
  });
}

}  // namespace

void run_generator(const ComputeContext& ctx, Tensor& dst) {
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  switch (dst.op) {
    case Op::Arange:
      return arange(ctx, dst);
    case Op::TimestepEmbedding:
      return timestep_embedding(ctx, dst);
    default:
      raise(ErrorCode::Unsupported, "CPU: {} is not a generator op", op_name(dst.op));
  }
}

}  // namespace tessera::cpu
