// ACC: dst = a, then the f32 at byte offset + 4*i0 + i1*nb1 + i2*nb2 + i3*nb3 of dst += b[i0..i3].
#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {
namespace {

// True when no two elements of b land on overlapping bytes of dst (then b's rows may be added in
// parallel; otherwise they are added one after another, in b's logical order).
bool targets_disjoint(const Tensor& b, const std::array<size_t, 4>& stride) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int x, int y) { return stride[x] < stride[y]; });
  size_t span = 4;  // bytes covered by the dims placed so far
  for (int d : order) {
    if (b.ne[d] <= 1) continue;
    if (stride[d] < span) return false;
    span += stride[d] * static_cast<size_t>(b.ne[d] - 1);
  }
  return true;
}

}  // namespace

void run_acc(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  if (a.type != DType::F32 || b.type != DType::F32 || dst.type != DType::F32 || !a.is_contiguous() ||
      !dst.is_contiguous() || !a.same_shape(dst))
    raise(ErrorCode::InvalidArgument, "ACC: needs contiguous f32 a and result ({}, {}, {})", a.describe(),
          b.describe(), dst.describe());
  const AccParams params = acc_params(dst);
  const std::array<size_t, 4> stride{4, params.nb1, params.nb2, params.nb3};
  const size_t offset = params.offset;
  size_t last = offset;
  for (int d = 0; d < kMaxDims; ++d) last += stride[d] * static_cast<size_t>(b.ne[d] - 1);
  const size_t bytes = static_cast<size_t>(dst.nelements()) * 4;
  if (offset % 4 != 0 || last + 4 > bytes)
    raise(ErrorCode::InvalidArgument, "ACC: {} at offset {} with strides {}, {}, {} writes outside {}",
          b.describe(), offset, stride[1], stride[2], stride[3], dst.describe());

  const size_t row_bytes = static_cast<size_t>(dst.ne[0]) * 4;
  char* out = static_cast<char*>(dst.data);
  const char* in = static_cast<const char*>(a.data);
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    std::memcpy(out + begin * row_bytes, in + begin * row_bytes,
                static_cast<size_t>(end - begin) * row_bytes);
  });

  auto add_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % b.ne[1];
      const int64_t i2 = (r / b.ne[1]) % b.ne[2];
      const int64_t i3 = r / (b.ne[1] * b.ne[2]);
      char* d = out + offset + i1 * stride[1] + i2 * stride[2] + i3 * stride[3];
      const char* s = b.at(0, i1, i2, i3);
      for (int64_t i0 = 0; i0 < b.ne[0]; ++i0) {
        float x;
        std::memcpy(&x, d + i0 * 4, 4);
        x += load_f32(DType::F32, s + i0 * b.nb[0]);
        std::memcpy(d + i0 * 4, &x, 4);
      }
    }
  };
  if (targets_disjoint(b, stride))
    ctx.parallel_for(b.nrows(), add_rows);
  else
    add_rows(0, b.nrows());
}

}  // namespace tessera::cpu
