// UNARY (GELU .. HARDSWISH), LEAKY_RELU, SCALE, SQR, CLAMP: elementwise on f32 or f16, each value
// computed in f32 and rounded to the result type.

// Codes 0..6 are UnaryOp's values; the other ops follow.
#define U_GELU 0
#define U_GELU_QUICK 1
#define U_SILU 2
#define U_TANH 3
#define U_RELU 4
#define U_HARDSIGMOID 5
#define U_HARDSWISH 6
#define U_LEAKY_RELU 7
#define U_SCALE 8
#define U_SQR 9
#define U_CLAMP 10

inline float hardsigmoid_f32(float x) { return fmin(1.0f, fmax(0.0f, (x + 3.0f) / 6.0f)); }

inline float unary_f32(float x, int op, float p0, float p1) {
  switch (op) {
    case U_GELU: {
      // Saturated outside (-10, 10) as ggml's CPU table is.
      if (x <= -10.0f) return 0.0f;
      if (x >= 10.0f) return x;
      const float k_sqrt_2_over_pi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + tanh(k_sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
    }
    case U_GELU_QUICK:
      return x / (1.0f + exp(-1.702f * x));
    case U_SILU:
      return x / (1.0f + exp(-x));
    case U_TANH:
      return tanh(x);
    case U_RELU:
      return x > 0.0f ? x : 0.0f;
    case U_HARDSIGMOID:
      return hardsigmoid_f32(x);
    case U_HARDSWISH:
      return x * hardsigmoid_f32(x);
    case U_LEAKY_RELU:  // p0 = slope
      return (x > 0.0f ? x : 0.0f) + p0 * (x < 0.0f ? x : 0.0f);
    case U_SCALE:  // p0 = scale, p1 = bias
      return x * p0 + p1;
    case U_SQR:
      return x * x;
    default: {  // U_CLAMP: p0 = min, p1 = max; a NaN gives max, as the CPU's comparisons do
      const float m = x < p1 ? x : p1;
      return m > p0 ? m : p0;
    }
  }
}

// One work-item per element (flat index over dst's shape); any source and result strides.
kernel void unary_op(global const char* a, ulong a_off, int a_type, ulong4 anb, global char* dst,
                     ulong dst_off, int dst_type, long4 dne, ulong4 dnb, long n, int op, float p0, float p1) {
  const long l = get_global_id(0);
  if (l >= n) return;
  const long4 c = coords_of(l, dne);
  const float x = load_f32(a + a_off + byte_offset(c, anb, a_type), a_type);
  store_f32(dst + dst_off + byte_offset(c, dnb, dst_type), dst_type, unary_f32(x, op, p0, p1));
}
