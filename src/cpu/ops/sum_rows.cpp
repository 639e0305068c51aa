// SUM_ROWS reference kernel: each row summed in double, rounded to f32 once.
#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"

namespace tessera::cpu {

void run_sum_rows(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous() && dst.ne[0] == 1 && dst.ne[1] == a.ne[1] &&
                 dst.ne[2] == a.ne[2] && dst.ne[3] == a.ne[3]);
  if (a.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: SUM_ROWS needs an f32 source, got {}", a.describe());
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      const char* row = a.at(0, i1, i2, i3);
      double sum = 0.0;
      for (int64_t i = 0; i < ne0; ++i) sum += load_f32(DType::F32, row + i * a.nb[0]);
      store_f32(DType::F32, dst.at(0, i1, i2, i3), static_cast<float>(sum));
    }
  });
}

}  // namespace tessera::cpu
