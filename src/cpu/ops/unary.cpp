// UNARY (GELU, GELU_QUICK, SILU, TANH, RELU, HARDSIGMOID, HARDSWISH), LEAKY_RELU, SCALE, SQR, CLAMP.
// Elementwise on f32 or f16: each value is computed in f32 and rounded to the result type.
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "cpu/vec_math.h"
#include "tessera/op_params.h"

namespace tessera::cpu {
namespace {

// 0.5x(1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))); saturated outside (-10, 10) as ggml's CPU does.
struct GeluFn {
  float operator()(float x) const {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
  }
};
struct GeluQuickFn {
  float operator()(float x) const { return x / (1.0f + std::exp(-1.702f * x)); }
};
struct SiluFn {  // the exp of vec_math's rows, so that the vectorised row gives the same bits
  float operator()(float x) const { return vec::silu(x); }
};
struct TanhFn {
  float operator()(float x) const { return std::tanh(x); }
};
struct ReluFn {
  float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct HardSigmoidFn {
  float operator()(float x) const { return std::fmin(1.0f, std::fmax(0.0f, (x + 3.0f) / 6.0f)); }
};
struct HardSwishFn {
  float operator()(float x) const { return x * HardSigmoidFn{}(x); }
};
struct LeakyReluFn {
  float slope;
  float operator()(float x) const { return (x > 0.0f ? x : 0.0f) + slope * (x < 0.0f ? x : 0.0f); }
};
struct ScaleFn {
  float s, b;
  float operator()(float x) const { return x * s + b; }
};
struct SqrFn {
  float operator()(float x) const { return x * x; }
};
// max(min(x, hi), lo); a NaN input gives hi, as with ggml's comparisons.
struct ClampFn {
  float lo, hi;
  float operator()(float x) const {
    const float m = x < hi ? x : hi;
    return m > lo ? m : lo;
  }
};

template <typename F>
void map_rows(const ComputeContext& ctx, const Tensor& a, Tensor& dst, F f) {
  const int64_t n0 = dst.ne[0];
  // f32 with contiguous rows: plain pointer loops over the same function (the same bits).
  const bool fast = !ctx.reference() && a.type == DType::F32 && a.nb[0] == 4 && dst.nb[0] == 4;
  ctx.parallel_for(dst.nrows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i1 = r % dst.ne[1];
      const int64_t i2 = (r / dst.ne[1]) % dst.ne[2];
      const int64_t i3 = r / (dst.ne[1] * dst.ne[2]);
      const char* s = a.at(0, i1, i2, i3);
      char* d = dst.at(0, i1, i2, i3);
      if (fast) {
        const auto* x = reinterpret_cast<const float*>(s);
        auto* y = reinterpret_cast<float*>(d);
        if constexpr (std::is_same_v<F, SiluFn>)
          vec::math().silu(x, y, n0);
        else
          for (int64_t i = 0; i < n0; ++i) y[i] = f(x[i]);
        continue;
      }
      for (int64_t i0 = 0; i0 < n0; ++i0)
        store_f32(dst.type, d + i0 * dst.nb[0], f(load_f32(a.type, s + i0 * a.nb[0])));
    }
  });
}

void run_unary_fn(const ComputeContext& ctx, const Tensor& a, Tensor& dst) {
  const UnaryOp which = unary_op(dst);
  switch (which) {
    case UnaryOp::Gelu:
      return map_rows(ctx, a, dst, GeluFn{});
    case UnaryOp::GeluQuick:
      return map_rows(ctx, a, dst, GeluQuickFn{});
    case UnaryOp::Silu:
      return map_rows(ctx, a, dst, SiluFn{});
    case UnaryOp::Tanh:
      return map_rows(ctx, a, dst, TanhFn{});
    case UnaryOp::Relu:
      return map_rows(ctx, a, dst, ReluFn{});
    case UnaryOp::HardSigmoid:
      return map_rows(ctx, a, dst, HardSigmoidFn{});
    case UnaryOp::HardSwish:
      return map_rows(ctx, a, dst, HardSwishFn{});
    case UnaryOp::Count_:
      break;
  }
  raise(ErrorCode::InvalidArgument, "UNARY: unknown unary op {}", static_cast<int>(which));
}

}  // namespace

void run_unary(const ComputeContext& ctx, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  if ((a.type != DType::F32 && a.type != DType::F16) || dst.type != a.type || !a.same_shape(dst))
    raise(ErrorCode::InvalidArgument, "{}: needs f32 or f16 of the result's shape ({} -> {})",
          op_name(dst.op), a.describe(), dst.describe());
  switch (dst.op) {
    case Op::Unary:
      return run_unary_fn(ctx, a, dst);
    case Op::LeakyRelu:
      return map_rows(ctx, a, dst, LeakyReluFn{leaky_relu_params(dst).slope});
    case Op::Scale:
      return map_rows(ctx, a, dst, ScaleFn{scale_params(dst).scale, scale_params(dst).bias});
    case Op::Sqr:
      return map_rows(ctx, a, dst, SqrFn{});
    case Op::Clamp:
      return map_rows(ctx, a, dst, ClampFn{clamp_params(dst).min, clamp_params(dst).max});
    default:
      raise(ErrorCode::Unsupported, "CPU: {} is not a unary op", op_name(dst.op));
  }
}

}  // namespace tessera::cpu
