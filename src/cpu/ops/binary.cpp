// ADD, MUL, DIV: dst = a (op) b with b tiled over a (b[i mod b.ne]); computed in f32 and rounded to
// the result type (a's). Type mixes: f32 f32, f16 f16, f16 a with f32 b.
#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"

namespace tessera::cpu {
namespace {

struct AddFn {
  float operator()(float x, float y) const { return x + y; }
};
struct MulFn {
  float operator()(float x, float y) const { return x * y; }
};
struct DivFn {
  float operator()(float x, float y) const { return x / y; }
};

template <typename F>
void binary_rows(const ComputeContext& ctx, const Tensor& a, const Tensor& b, Tensor& dst, F f) {
  const int64_t n0 = dst.ne[0];
  // All f32 with contiguous rows: plain pointer loops (the same f32 operations, so the same bits).
  const bool fast = !ctx.reference() && a.type == DType::F32 && b.type == DType::F32 &&
                    dst.type == DType::F32 && a.nb[0] == 4 && b.nb[0] == 4 && dst.nb[0] == 4;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % dst.ne[1];
      const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
      const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
      const char* pa = a.at(0, i1, i2, i3);
      const char* pb = b.at(0, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
      char* pd = dst.at(0, i1, i2, i3);
      if (fast) {
        const auto* xa = reinterpret_cast<const float*>(pa);
        const auto* xb = reinterpret_cast<const float*>(pb);
        auto* xd = reinterpret_cast<float*>(pd);
        for (int64_t base = 0; base < n0; base += b.ne[0])
          for (int64_t i = 0; i < b.ne[0]; ++i) xd[base + i] = f(xa[base + i], xb[i]);
        continue;
      }
      for (int64_t i0 = 0; i0 < n0; ++i0) {
        const float x = load_f32(a.type, pa + i0 * a.nb[0]);
        const float y = load_f32(b.type, pb + (i0 % b.ne[0]) * b.nb[0]);
        store_f32(dst.type, pd + i0 * dst.nb[0], f(x, y));
      }
    }
  });
}

}  // namespace

void run_binary(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const bool types_ok =
      dst.type == a.type && ((a.type == DType::F32 && b.type == DType::F32) ||
                             (a.type == DType::F16 && (b.type == DType::F16 || b.type == DType::F32)));
  if (!types_ok)
    raise(ErrorCode::InvalidArgument, "{}: type mix {} {} -> {} is not supported", op_name(dst.op),
          name(a.type), name(b.type), name(dst.type));
  for (int d = 0; d < kMaxDims; ++d)
    if (dst.ne[d] != a.ne[d] || b.ne[d] <= 0 || a.ne[d] % b.ne[d] != 0)
      raise(ErrorCode::InvalidArgument, "{}: {} does not tile {}", op_name(dst.op), b.describe(),
            a.describe());
  switch (dst.op) {
    case Op::Add:
      return binary_rows(ctx, a, b, dst, AddFn{});
    case Op::Mul:
      return binary_rows(ctx, a, b, dst, MulFn{});
    case Op::Div:
      return binary_rows(ctx, a, b, dst, DivFn{});
    default:
      raise(ErrorCode::Unsupported, "CPU: {} is not a binary op", op_name(dst.op));
  }
}

}  // namespace tessera::cpu
