// libFuzzer target for the block decoders. The first byte picks a type (every DType), the rest are
// its blocks, as a file's tensor data would hold them. Decoding must never crash or read outside
// the row (ASan), and the values must be what the format says:
// - F16 and BF16 decode bit for bit as an independent decoder here does (NaN as NaN);
// - F32 and I32 convert exactly;
// - the vectorized Q4_0 / Q8_0 rows give the bits of the scalar reference;
// - a quantized block whose scales are finite decodes to values bounded by its scales (so finite
//   unless the bound itself overflows a float).
// A violation traps, so the fuzzer reports it as a crash.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/blocks.h"
#include "tessera/dtype.h"
#include "tessera/quant.h"

namespace {

using namespace tessera;

constexpr size_t kMaxBlocks = 32;

[[noreturn]] void bug(DType type, const char* what, size_t i, double got, double bound) {
  std::fprintf(stderr, "blocks_fuzzer: %.*s: %s at element %zu: %.9g (bound %.9g)\n",
               static_cast<int>(name(type).size()), name(type).data(), what, i, got, bound);
  __builtin_trap();
}

// IEEE half to double, from the definition (not the library's converter, which is under test).
double half(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exponent == 0)
    v = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else
    v = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -v : v;
}

double bfloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool same_value(float a, double b) { return (std::isnan(a) && std::isnan(b)) || static_cast<double>(a) == b; }

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

template <typename Block>
const Block& block_at(const std::vector<std::byte>& data, size_t i) {
  return reinterpret_cast<const Block*>(data.data())[i];
}

// The largest |x| a block can decode to, from its scales and the format's integer ranges; NaN when
// a scale is not finite (then nothing is promised).
double block_bound(DType type, const std::vector<std::byte>& data, size_t i) {
  switch (type) {
    case DType::Q4_0:
      return 8 * std::fabs(half(block_at<BlockQ4_0>(data, i).d));
    case DType::Q4_1: {
      const auto& b = block_at<BlockQ4_1>(data, i);
      return 15 * std::fabs(half(b.d)) + std::fabs(half(b.m));
    }
    case DType::Q5_0:
      return 16 * std::fabs(half(block_at<BlockQ5_0>(data, i).d));
    case DType::Q5_1: {
      const auto& b = block_at<BlockQ5_1>(data, i);
      return 31 * std::fabs(half(b.d)) + std::fabs(half(b.m));
    }
    case DType::Q8_0:
      return 128 * std::fabs(half(block_at<BlockQ8_0>(data, i).d));
    case DType::Q2_K: {  // 4-bit scale and min, 2-bit q
      const auto& b = block_at<BlockQ2_K>(data, i);
      return 15 * 3 * std::fabs(half(b.d)) + 15 * std::fabs(half(b.dmin));
    }
    case DType::Q3_K:  // scale in [-32, 31], q in [-4, 3]
      return 32 * 4 * std::fabs(half(block_at<BlockQ3_K>(data, i).d));
    case DType::Q4_K: {  // 6-bit scale and min
      const auto& b = block_at<BlockQ4_K>(data, i);
      return 63 * 15 * std::fabs(half(b.d)) + 63 * std::fabs(half(b.dmin));
    }
    case DType::Q5_K: {
      const auto& b = block_at<BlockQ5_K>(data, i);
      return 63 * 31 * std::fabs(half(b.d)) + 63 * std::fabs(half(b.dmin));
    }
    case DType::Q6_K:  // int8 scale, q - 32 in [-32, 31]
      return 128 * 32 * std::fabs(half(block_at<BlockQ6_K>(data, i).d));
    case DType::Q8_K:
      return 128 * std::fabs(static_cast<double>(block_at<BlockQ8_K>(data, i).d));
    case DType::IQ4_NL:
      return 127 * std::fabs(half(block_at<BlockIQ4_NL>(data, i).d));
    case DType::IQ4_XS:  // scale - 32 in [-32, 31]
      return 32 * 127 * std::fabs(half(block_at<BlockIQ4_XS>(data, i).d));
    case DType::MXFP4:  // doubled E2M1 codes up to 12
      return 12 * static_cast<double>(e8m0_half(block_at<BlockMXFP4>(data, i).e));
    default:
      return std::numeric_limits<double>::quiet_NaN();
  }
}

void check_exact(DType type, const std::vector<std::byte>& data, const float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double want;
    if (type == DType::F16 || type == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, data.data() + 2 * i, 2);
      want = type == DType::F16 ? half(h) : bfloat(h);
    } else if (type == DType::I32) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      want = static_cast<float>(v);  // the nearest float, as a conversion rounds
    } else {
      float v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      want = v;
    }
    if (!same_value(out[i], want)) bug(type, "decoded", i, out[i], want);
  }
}

void check_bounds(DType type, const std::vector<std::byte>& data, const float* out, size_t n_blocks) {
  const auto block = static_cast<size_t>(traits(type).block_size);
  for (size_t b = 0; b < n_blocks; ++b) {
    const double bound = block_bound(type, data, b);
    if (!std::isfinite(bound)) continue;
    // The decoders multiply in float: allow their rounding.
    const double slack = bound * 1e-6 + 1e-45;
    for (size_t j = 0; j < block; ++j) {
      const float x = out[b * block + j];
      if (std::isnan(x)) bug(type, "NaN from finite scales", b * block + j, x, bound);
      if (bound + slack < std::numeric_limits<float>::max() && !std::isfinite(x))
        bug(type, "infinite from finite scales", b * block + j, x, bound);
      if (std::isfinite(x) && std::fabs(x) > bound + slack)
        bug(type, "beyond the scales' bound", b * block + j, x, bound);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t size) {
  if (size < 1) return 0;
  const DType type = kAllDTypes[input[0] % kDTypeCount];
  const DTypeTraits& t = traits(type);
  const size_t n_blocks = std::min((size - 1) / t.block_bytes, kMaxBlocks);
  if (n_blocks == 0) return 0;
  // A buffer of exactly the row's bytes (ASan catches a decoder reading past it), aligned as
  // tensor data is.
  std::vector<std::byte> data(n_blocks * t.block_bytes);
  std::memcpy(data.data(), input + 1, data.size());
  const auto n = static_cast<int64_t>(n_blocks) * t.block_size;
  std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
  to_f32_row(type, data.data(), out.data(), n);

  if (!t.quantized) {
    check_exact(type, data, out.data(), static_cast<size_t>(n));
    return 0;
  }
  if (type == DType::Q4_0) {
    ref::dequantize_row_q4_0(reinterpret_cast<const BlockQ4_0*>(data.data()), ref.data(), n);
    if (!same_bits(out.data(), ref.data(), out.size()))
      bug(type, "vectorized row differs from the reference", 0, 0, 0);
  } else if (type == DType::Q8_0) {
    ref::dequantize_row_q8_0(reinterpret_cast<const BlockQ8_0*>(data.data()), ref.data(), n);
    if (!same_bits(out.data(), ref.data(), out.size()))
      bug(type, "vectorized row differs from the reference", 0, 0, 0);
  }
  check_bounds(type, data, out.data(), n_blocks);
  return 0;
}
