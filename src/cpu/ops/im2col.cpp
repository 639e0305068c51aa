// IM2COL reference kernel: unfolds input patches into rows of [IC*KH*KW] (zero outside the input).
#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "tessera/op_params.h"

namespace tessera::cpu {

void run_im2col(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& kernel = *dst.src[0];
  const Tensor& in = *dst.src[1];
  TESSERA_ASSERT((dst.type == DType::F32 || dst.type == DType::F16) && dst.is_contiguous());
  const Im2ColParams params = im2col_params(dst);
  const bool is_2d = params.is_2d;
  const int64_t s0 = params.s0, p0 = params.p0, d0 = params.d0;
  // 1-D has no second spatial dim: its stride, padding and dilation play no part.
  const int64_t s1 = is_2d ? params.s1 : 1, p1 = is_2d ? params.p1 : 0, d1 = is_2d ? params.d1 : 1;

  const int64_t kw = kernel.ne[0], kh = is_2d ? kernel.ne[1] : 1;
  const int64_t iw = in.ne[0], ih = is_2d ? in.ne[1] : 1;
  const int64_t ic = is_2d ? in.ne[2] : in.ne[1];
  // Input strides by role: width, height, channel, batch (1-D inputs are [IW, IC, N]).
  const size_t nb_w = in.nb[0], nb_h = is_2d ? in.nb[1] : 0, nb_c = is_2d ? in.nb[2] : in.nb[1],
               nb_n = is_2d ? in.nb[3] : in.nb[2];
  // Result [IC*KH*KW, OW, OH, N] (1-D: [IC*KW, OW, N, 1], i.e. OH = 1 and N in dim 2).
  const int64_t ow = dst.ne[1], oh = is_2d ? dst.ne[2] : 1;
  TESSERA_ASSERT(dst.ne[0] == ic * kh * kw);

  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t iow = r % ow, ioh = (r / ow) % oh, n = r / (ow * oh);
      char* out = static_cast<char*>(dst.data) + r * dst.nb[1];
      const size_t esize = dst.nb[0];
      for (int64_t c = 0; c < ic; ++c) {
        for (int64_t ikh = 0; ikh < kh; ++ikh) {
          const int64_t y = ioh * s1 + ikh * d1 - p1;
          for (int64_t ikw = 0; ikw < kw; ++ikw) {
            const int64_t x = iow * s0 + ikw * d0 - p0;
            float v = 0.0f;
            if (x >= 0 && x < iw && y >= 0 && y < ih)
              v = load_f32(in.type,
                           static_cast<const char*>(in.data) + x * nb_w + y * nb_h + c * nb_c + n * nb_n);
            store_f32(dst.type, out + ((c * kh + ikh) * kw + ikw) * esize, v);
          }
        }
      }
    }
  });
}

}  // namespace tessera::cpu
