// ADD_ID: a's row (i1, i2) plus the row of b that ids[i1, i2] names (ggml_add_id: the biases of the
// experts each token's slots picked).
#include <cstdint>

#include "core/check.h"
#include "cpu/kernels.h"

namespace tessera::cpu {

void run_add_id(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const Tensor& ids = *dst.src[2];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.same_shape(a));
  if (a.type != DType::F32 || b.type != DType::F32 || ids.type != DType::I32)
    raise(ErrorCode::Unsupported, "CPU: ADD_ID needs f32 a and b and i32 ids, got {}, {}, {}", a.describe(),
          b.describe(), ids.describe());
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1];
  // Every id first, so a bad one is an Error before anything is written (not a worker's abort).
  for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
    for (int64_t i1 = 0; i1 < ne1; ++i1) {
      const int32_t row = *reinterpret_cast<const int32_t*>(ids.at(i1, i2, 0, 0));
      if (row < 0 || row >= b.ne[1])
        raise(ErrorCode::InvalidArgument, "ADD_ID: id {} at ({}, {}) is outside b's {} rows", row, i1, i2,
              b.ne[1]);
    }
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = r / ne1;
      const int32_t row = *reinterpret_cast<const int32_t*>(ids.at(i1, i2, 0, 0));
      auto* y = reinterpret_cast<float*>(dst.at(0, i1, i2, 0));
      for (int64_t i = 0; i < ne0; ++i)
        y[i] = *reinterpret_cast<const float*>(a.at(i, i1, i2, 0)) +
               *reinterpret_cast<const float*>(b.at(i, row, 0, 0));
    }
  });
}

}  // namespace tessera::cpu
