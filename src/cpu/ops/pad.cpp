// PAD reference kernel: zero padding or circular (wrap-around) padding, left and right per dim.
#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_pad(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  const PadParams params = pad_params(dst);
  const bool circular = params.circular;

  // Source index along dim d for output index i, or -1 when it falls in zero padding.
  auto source_index = [&](int d, int64_t i) -> int64_t {
    const int64_t j = i - params.left[static_cast<size_t>(d)];
    if (circular) {
      if (a.ne[d] == 0) return -1;
      return ((j % a.ne[d]) + a.ne[d]) % a.ne[d];
    }
    return (j >= 0 && j < a.ne[d]) ? j : -1;
  };

  const int64_t ne0 = dst.ne[0], ne1 = dst.ne[1], ne2 = dst.ne[2];
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
      float* out = reinterpret_cast<float*>(dst.at(0, i1, i2, i3));
      const int64_t j1 = source_index(1, i1), j2 = source_index(2, i2), j3 = source_index(3, i3);
      for (int64_t i0 = 0; i0 < ne0; ++i0) {
        const int64_t j0 = source_index(0, i0);
        if (j0 < 0 || j1 < 0 || j2 < 0 || j3 < 0) {
          out[i0] = 0.0f;
          continue;
        }
        out[i0] = load_f32(a.type, static_cast<const char*>(a.data) + j0 * a.nb[0] + j1 * a.nb[1] +
                                       j2 * a.nb[2] + j3 * a.nb[3]);
      }
    }
  });
}

}  // namespace tessera::cpu
