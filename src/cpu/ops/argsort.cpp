// ARGSORT reference kernel: I32 indices of each row in ascending or descending order.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_argsort(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::I32 && dst.is_contiguous() && dst.same_shape(a));
  if (a.type != DType::F32)
    raise(ErrorCode::Unsupported, "CPU: ARGSORT needs an f32 source, got {}", a.describe());
  const bool descending = argsort_order(dst) == SortOrder::Descending;
  const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
  ctx.parallel_for(a.nrows(), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      load_row_f32(a, i1, i2, i3, x.data());
      int32_t* idx = reinterpret_cast<int32_t*>(dst.at(0, i1, i2, i3));
      std::iota(idx, idx + ne0, 0);
      // A stable sort keeps equal values in index order (ggml leaves ties unspecified), and NaNs
      // go last in both orders so the comparison stays a strict weak ordering.
      std::stable_sort(idx, idx + ne0, [&](int32_t l, int32_t r2) {
        const float u = x[static_cast<size_t>(l)], v = x[static_cast<size_t>(r2)];
        if (std::isnan(u) || std::isnan(v)) return !std::isnan(u) && std::isnan(v);
        return descending ? u > v : u < v;
      });
    }
  });
}

}  // namespace tessera::cpu
