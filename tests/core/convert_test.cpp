// f32 <-> f16 / bf16: hand-computed cases, an independent oracle (nearest representable value found
// by search in double precision), and the vectorized rows against the scalar reference, bit for bit.
#include "tessera/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace tessera;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Value of a positive finite half pattern; the inf pattern stands for 2^16, the next step of the
// binade past 65504, so nearest-even rounding against it gives IEEE overflow.
double half_value(uint32_t b) {
  if (b >= 0x7c00u) return 65536.0;
  const uint32_t e = b >> 10, m = b & 0x3ffu;
  return e == 0 ? std::ldexp(static_cast<double>(m), -24)
                : std::ldexp(static_cast<double>(1024 + m), int(e) - 25);
}

// Same for bf16: the inf pattern 0x7f80 stands for 2^128.
double bf16_value(uint32_t b) {
  if (b >= 0x7f80u) return std::ldexp(1.0, 128);
  return static_cast<double>(from_bits(b << 16));
}

// Nearest pattern in [0, top] to |x| by binary search over the monotone value table; ties go to
// the even pattern. Sign applied after.
template <typename ValueFn>
uint16_t oracle_round(float x, uint32_t top, uint16_t sign_bit, ValueFn value) {
  const double a = std::fabs(static_cast<double>(x));
  uint32_t lo = 0, hi = top;  // invariant: value(lo) <= a (value(0) = 0)
  if (a >= value(top)) return static_cast<uint16_t>((std::signbit(x) ? sign_bit : 0) | top);
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (value(mid) <= a)
      lo = mid;
    else
      hi = mid;
  }
  uint32_t r;
  const double dlo = a - value(lo), dhi = value(hi) - a;
  if (dlo < dhi)
    r = lo;
  else if (dhi < dlo)
    r = hi;
  else
    r = (lo % 2 == 0) ? lo : hi;
  return static_cast<uint16_t>((std::signbit(x) ? sign_bit : 0) | r);
}

uint16_t oracle_fp16(float x) { return oracle_round(x, 0x7c00u, 0x8000u, half_value); }
uint16_t oracle_bf16(float x) { return oracle_round(x, 0x7f80u, 0x8000u, bf16_value); }

// Random f32s that hit every region: raw bit patterns (NaN, inf, subnormal), half-range values,
// values near the half subnormal range, and exact half midpoints.
std::vector<float> edge_and_random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          from_bits(0x7f800001u),
                          from_bits(0xffa00000u),
                          from_bits(0x7fbfe000u),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -25),
                          std::ldexp(1023.5f, -24),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(),
                          from_bits(0x3f808000u),
                          from_bits(0x3f818000u)};
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-30, 17);
  std::uniform_int_distribution<uint32_t> half(0, 0x7bfe);
  while (v.size() < n) {
    switch (v.size() % 4) {
      case 0:
        v.push_back(from_bits(any(rng)));
        break;
      case 1:
        v.push_back(std::ldexp(unit(rng), exp(rng)));
        break;
      case 2: {
        const uint32_t b = half(rng);
        v.push_back(static_cast<float>((half_value(b) + half_value(b + 1)) / 2) *
                    (any(rng) & 1 ? -1.0f : 1.0f));
        break;
      }
      default:
        v.push_back(from_bits((any(rng) & 0x80000000u) | 0x7f800000u | (any(rng) & 0x7fffffu)));  // inf/NaN
    }
  }
  return v;
}

bool is_half_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

}  // namespace

// ---------------------------------------------------------------- f32 -> f16, hand-computed

TEST(ConvertFp16, ExactValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(1.5f), 0x3e00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(fp32_to_fp16(-65504.0f), 0xfbff);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
}

TEST(ConvertFp16, RoundsToNearestEven) {
  // Around 1.0 the half ulp is 2^-10; 2^-11 above is a tie.
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, 0x3c00 is even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie between 0x3c01 and 0x3c02
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23)), 0x3c01);  // just above
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -23)), 0x3c00);  // just below
  EXPECT_EQ(fp32_to_fp16(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);  // 0.0999755859375
}

TEST(ConvertFp16, RoundsUpIntoTheNextBinade) {
  // 2 - 2^-10 is 0x3fff; the midpoint to 2.0 is 2 - 2^-11 (a tie, 0x4000 is even).
  EXPECT_EQ(fp32_to_fp16(2.0f - std::ldexp(1.0f, -10)), 0x3fff);
  EXPECT_EQ(fp32_to_fp16(2.0f - std::ldexp(1.0f, -11)), 0x4000);
  EXPECT_EQ(fp32_to_fp16(2.0f - std::ldexp(1.0f, -12)), 0x4000);
  EXPECT_EQ(fp32_to_fp16(2.0f - std::ldexp(1.0f, -11) - std::ldexp(1.0f, -23)), 0x3fff);
  // Largest subnormal (1023 * 2^-24) plus half a step rounds up to the smallest normal.
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.25f, -24)), 0x03ff);
}

TEST(ConvertFp16, Subnormals) {
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1023.0f, -24)), 0x83ff);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);   // half the smallest: tie to even 0
  EXPECT_EQ(fp32_to_fp16(-std::ldexp(1.0f, -25)), 0x8000);  // keeps the sign
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 steps: tie to 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 steps: tie to 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(7.0f, -25)), 0x0004);  // 3.5 steps: tie to 4
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(ConvertFp16, Overflow) {
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);  // below the midpoint 65520
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);   // the midpoint: 0x7c00 is even -> inf
  EXPECT_EQ(fp32_to_fp16(-65520.0f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(65536.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e6f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(ConvertFp16, NaNStaysQuietNaN) {
  // Quiet bit set, sign kept, top 10 payload bits kept (F16C's rule).
  EXPECT_EQ(fp32_to_fp16(from_bits(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(fp32_to_fp16(from_bits(0xffc00000u)), 0xfe00);
  EXPECT_EQ(fp32_to_fp16(from_bits(0x7f800001u)), 0x7e00);  // signalling, payload below the kept bits
  EXPECT_EQ(fp32_to_fp16(from_bits(0x7fa00000u)), 0x7f00);  // signalling, payload bit 21 -> bit 8
  EXPECT_EQ(fp32_to_fp16(from_bits(0xffbfe000u)), 0xffff);
  for (uint32_t payload = 1; payload < 0x800000u; payload = payload * 3 + 1) {
    const uint16_t h = fp32_to_fp16(from_bits(0x7f800000u | payload));
    EXPECT_TRUE(is_half_nan(h)) << std::hex << payload;
    EXPECT_TRUE(h & 0x200u) << std::hex << payload;
  }
}

// ---------------------------------------------------------------- f32 -> f16 against the oracle

TEST(ConvertFp16, MatchesOracleAroundEveryHalf) {
  // Every positive finite half, the midpoint to its successor, and the floats either side.
  for (uint32_t b = 0; b < 0x7c00u; ++b) {
    const double mid = (half_value(b) + half_value(b + 1)) / 2;
    const float xs[] = {static_cast<float>(half_value(b)), static_cast<float>(mid),
                        std::nextafter(static_cast<float>(mid), 0.0f),
                        std::nextafter(static_cast<float>(mid), 1e30f)};
    for (float x : xs) {
      ASSERT_EQ(static_cast<double>(static_cast<float>(mid)), mid);  // midpoints are exact floats
      ASSERT_EQ(fp32_to_fp16(x), oracle_fp16(x)) << "x = " << x << " near half " << std::hex << b;
      ASSERT_EQ(fp32_to_fp16(-x), oracle_fp16(-x)) << "x = " << -x;
    }
  }
}

TEST(ConvertFp16, MatchesOracleOnRandomValues) {
  for (float x : edge_and_random_floats(400000, 7)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(fp32_to_fp16(x), oracle_fp16(x)) << "bits " << std::hex << bits(x);
  }
}

// ---------------------------------------------------------------- f16 -> f32

TEST(ConvertFp16, ToFp32AllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool neg = (h & 0x8000u) != 0;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31 && m != 0) {
      // NaN: quiet, same sign, payload in the top mantissa bits.
      EXPECT_EQ(bits(f), (neg ? 0x80000000u : 0u) | 0x7fc00000u | (m << 13)) << std::hex << h;
      continue;
    }
    const double mag = e == 31 ? std::numeric_limits<double>::infinity() : half_value(h & 0x7fffu);
    ASSERT_EQ(static_cast<double>(f), neg ? -mag : mag) << std::hex << h;
    ASSERT_EQ(std::signbit(f), neg) << std::hex << h;
  }
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
}

TEST(ConvertFp16, RoundTripsAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h)));
    if (is_half_nan(static_cast<uint16_t>(h))) {
      EXPECT_EQ(back, h | 0x200u) << std::hex << h;  // comes back quiet, payload kept
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// ---------------------------------------------------------------- bf16

TEST(ConvertBf16, HandComputed) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-3.0f), 0xc040);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, 0x3f80 even: down
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, 0x3f81 odd: up
  EXPECT_EQ(fp32_to_bf16(from_bits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);  // below
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3f80ffffu)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3fffffffu)), 0x4000);             // carries into the next binade
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00008000u)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000u)), 0x0002);
}

TEST(ConvertBf16, NaNIsQuieted) {
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7fc00000u)), 0x7fc0);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);  // would round to inf without the rule
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7fffffffu)), 0x7fff);  // would carry out without the rule
  EXPECT_EQ(fp32_to_bf16(from_bits(0xff810000u)), 0xffc1);
  EXPECT_EQ(fp32_to_bf16(from_bits(0xff800001u)), 0xffc0);
}

TEST(ConvertBf16, ToFp32IsAShift) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(bits(bf16_to_fp32(static_cast<uint16_t>(h))), h << 16);
}

TEST(ConvertBf16, MatchesOracleOnRandomValues) {
  for (float x : edge_and_random_floats(400000, 11)) {
    if (std::isnan(x)) continue;
    ASSERT_EQ(fp32_to_bf16(x), oracle_bf16(x)) << "bits " << std::hex << bits(x);
  }
}

// ---------------------------------------------------------------- vectorized rows vs scalar

class ConvertRows : public ::testing::Test {
 protected:
  void SetUp() override { RecordProperty("isa", conversion_isa()); }
  // Lengths around every vector width, plus long odd ones.
  static std::vector<int64_t> lengths() {
    std::vector<int64_t> n;
    for (int64_t i = 0; i <= 40; ++i) n.push_back(i);
    for (int64_t i : {63, 64, 65, 127, 1000, 4097}) n.push_back(i);
    return n;
  }
};

TEST_F(ConvertRows, Fp32ToFp16MatchesScalar) {
  const std::vector<float> src = edge_and_random_floats(300000, 3);
  std::vector<uint16_t> a(src.size()), b(src.size());
  fp32_to_fp16_row(src.data(), a.data(), static_cast<int64_t>(src.size()));
  ref::fp32_to_fp16_row(src.data(), b.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(a[i], b[i]) << "x bits " << std::hex << bits(src[i]);
  // Every length and a misaligned start; nothing written past n.
  for (int64_t n : lengths()) {
    std::vector<uint16_t> va(n + 9, 0xabcd), vb(n + 9, 0xabcd);
    fp32_to_fp16_row(src.data() + 1, va.data() + 1, n);
    ref::fp32_to_fp16_row(src.data() + 1, vb.data() + 1, n);
    ASSERT_EQ(va, vb) << "n = " << n;
    ASSERT_EQ(va[static_cast<size_t>(n) + 1], 0xabcd);
  }
}

TEST_F(ConvertRows, Fp16ToFp32MatchesScalarOnAllPatterns) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u);  // odd: a permutation
  std::vector<float> a(src.size()), b(src.size());
  fp16_to_fp32_row(src.data(), a.data(), static_cast<int64_t>(src.size()));
  ref::fp16_to_fp32_row(src.data(), b.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(bits(a[i]), bits(b[i])) << "h " << std::hex << src[i];
  for (int64_t n : lengths()) {
    std::vector<float> va(n + 9, 7.0f), vb(n + 9, 7.0f);
    fp16_to_fp32_row(src.data() + 3, va.data() + 1, n);
    ref::fp16_to_fp32_row(src.data() + 3, vb.data() + 1, n);
    for (int64_t i = 0; i < n + 9; ++i) ASSERT_EQ(bits(va[i]), bits(vb[i])) << "n = " << n;
  }
}

TEST_F(ConvertRows, Fp32ToBf16MatchesScalar) {
  const std::vector<float> src = edge_and_random_floats(300000, 5);
  std::vector<uint16_t> a(src.size()), b(src.size());
  fp32_to_bf16_row(src.data(), a.data(), static_cast<int64_t>(src.size()));
  ref::fp32_to_bf16_row(src.data(), b.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(a[i], b[i]) << "x bits " << std::hex << bits(src[i]);
  for (int64_t n : lengths()) {
    std::vector<uint16_t> va(n + 9, 0xabcd), vb(n + 9, 0xabcd);
    fp32_to_bf16_row(src.data() + 1, va.data() + 1, n);
    ref::fp32_to_bf16_row(src.data() + 1, vb.data() + 1, n);
    ASSERT_EQ(va, vb) << "n = " << n;
  }
}

TEST_F(ConvertRows, Bf16ToFp32MatchesScalar) {
  std::vector<uint16_t> src(65536 + 7);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> a(src.size()), b(src.size());
  bf16_to_fp32_row(src.data(), a.data(), static_cast<int64_t>(src.size()));
  ref::bf16_to_fp32_row(src.data(), b.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(bits(a[i]), bits(b[i]));
  for (int64_t n : lengths()) {
    std::vector<float> va(n + 9, 7.0f), vb(n + 9, 7.0f);
    bf16_to_fp32_row(src.data() + 3, va.data() + 1, n);
    ref::bf16_to_fp32_row(src.data() + 3, vb.data() + 1, n);
    for (int64_t i = 0; i < n + 9; ++i) ASSERT_EQ(bits(va[i]), bits(vb[i])) << "n = " << n;
  }
}
