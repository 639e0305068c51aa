// GET_ROWS: dst[:, r, j, k] = to_f32(a[:, idx[r, j, k], j, k]); i32 rows are copied as i32.
#include <cstring>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"

namespace tessera::cpu {
namespace {

int32_t index_at(const Tensor& idx, int64_t r, int64_t j, int64_t k) {
  int32_t v;
  std::memcpy(&v, idx.at(r, j, k), sizeof v);
  return v;
}

}  // namespace

void run_get_rows(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& idx = *dst.src[1];
  TESSERA_ASSERT(idx.type == DType::I32);
  if (is_quantized(a.type) && !a.rows_contiguous())
    raise(ErrorCode::InvalidArgument, "GET_ROWS: quantized source {} must have whole rows", a.describe());
  if (dst.type != (a.type == DType::I32 ? DType::I32 : DType::F32))
    raise(ErrorCode::InvalidArgument, "GET_ROWS: result {} has the wrong type for source {}", dst.describe(),
          a.describe());

  // Every index is checked before any row is read, so a bad one never causes an out-of-bounds read.
  for (int64_t k = 0; k < idx.ne[2]; ++k)
    for (int64_t j = 0; j < idx.ne[1]; ++j)
      for (int64_t r = 0; r < idx.ne[0]; ++r) {
        const int32_t v = index_at(idx, r, j, k);
        if (v < 0 || v >= a.ne[1])
          raise(ErrorCode::InvalidArgument, "GET_ROWS: index {} at [{}, {}, {}] is outside [0, {}) of {}", v,
                r, j, k, a.ne[1], a.describe());
      }

  const int64_t n0 = a.ne[0];
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t r = row % dst.ne[1];
      const int64_t j = (row / dst.ne[1]) % dst.ne[2];
      const int64_t k = row / (dst.ne[1] * dst.ne[2]);
      const int64_t src_row = index_at(idx, r, j, k);
      char* d = dst.at(0, r, j, k);
      if (dst.type == DType::I32) {
        const char* s = a.at(0, src_row, j, k);
        for (int64_t i0 = 0; i0 < n0; ++i0) std::memcpy(d + i0 * dst.nb[0], s + i0 * a.nb[0], 4);
      } else {
        load_row_f32(a, src_row, j, k, reinterpret_cast<float*>(d));
      }
    }
  });
}

}  // namespace tessera::cpu
