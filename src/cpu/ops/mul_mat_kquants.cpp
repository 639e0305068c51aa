// Portable scalar MUL_MAT tile kernels of the K-quants (Q2_K ... Q6_K), IQ4_XS and the grid
// I-quants (IQ2_XXS ... IQ1_M) against b in Q8_K (the q8k rows of mul_mat_kernels.h), as ggml's CPU
// computes them: per super-block, integer sums of quants times b's quants per group, weighted by
// the group scales; the minimums through b's group sums. The grid I-quants' integers are those of
// core/iq_grids.h (IQ1's shift of 1/8 made whole, so the sums stay exact).
#include <algorithm>
#include <utility>

#include "core/iq_grids.h"
#include "cpu/ops/mul_mat_kernels.h"
#include "tessera/blocks.h"
#include "tessera/convert.h"

namespace tessera::cpu::mm {
namespace {

// One super-block as integers: x[i] = d * sc[i / 16] * v[i] - dmin * mn[i / 16].
struct Unpacked {
  int8_t v[256];
  int16_t sc[16];
  int16_t mn[16];
  float d, dmin;
};

void unpack(const BlockQ2_K& b, Unpacked& u) noexcept {
  u.d = fp16_to_fp32(b.d);
  u.dmin = fp16_to_fp32(b.dmin);
  for (int g = 0; g < 16; ++g) {
    u.sc[g] = static_cast<int16_t>(b.scales[g] & 0x0f);
    u.mn[g] = static_cast<int16_t>(b.scales[g] >> 4);
  }
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int i = 0; i < 32; ++i)
        u.v[128 * h + 32 * p + i] = static_cast<int8_t>((b.qs[32 * h + i] >> (2 * p)) & 3);
}

void unpack(const BlockQ3_K& b, Unpacked& u) noexcept {
  u.d = fp16_to_fp32(b.d);
  u.dmin = 0.0f;
  int8_t sc[16];
  q3_k_scales(b.scales, sc);
  for (int g = 0; g < 16; ++g) {
    u.sc[g] = sc[g];
    u.mn[g] = 0;
  }
  for (int h = 0; h < 2; ++h)
    for (int p = 0; p < 4; ++p)
      for (int i = 0; i < 32; ++i) {
        const int lo = (b.qs[32 * h + i] >> (2 * p)) & 3;
        const int hi = (b.hmask[i] >> (4 * h + p)) & 1;
        u.v[128 * h + 32 * p + i] = static_cast<int8_t>(lo - (hi ? 0 : 4));
      }
}

template <class Block>
void unpack_4_5(const Block& b, Unpacked& u, const uint8_t* qh) noexcept {
  u.d = fp16_to_fp32(b.d);
  u.dmin = fp16_to_fp32(b.dmin);
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    k_scale_min(g, b.scales, sc, m);
    u.sc[2 * g] = u.sc[2 * g + 1] = sc;
    u.mn[2 * g] = u.mn[2 * g + 1] = m;
  }
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 2; ++k)
      for (int l = 0; l < 32; ++l) {
        const int g = 2 * i + k;
        int q = (b.qs[32 * i + l] >> (4 * k)) & 0x0f;
        if (qh != nullptr) q |= ((qh[l] >> g) & 1) << 4;
        u.v[32 * g + l] = static_cast<int8_t>(q);
      }
}
void unpack(const BlockQ4_K& b, Unpacked& u) noexcept { unpack_4_5(b, u, nullptr); }
void unpack(const BlockQ5_K& b, Unpacked& u) noexcept { unpack_4_5(b, u, b.qh); }

void unpack(const BlockQ6_K& b, Unpacked& u) noexcept {
  u.d = fp16_to_fp32(b.d);
  u.dmin = 0.0f;
  for (int g = 0; g < 16; ++g) {
    u.sc[g] = b.scales[g];
    u.mn[g] = 0;
  }
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int lo = (b.ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
        const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
        u.v[128 * h + 32 * k + l] = static_cast<int8_t>((lo | (hi << 4)) - 32);
      }
}

void unpack(const BlockIQ4_XS& b, Unpacked& u) noexcept {
  u.d = fp16_to_fp32(b.d);
  u.dmin = 0.0f;
  for (int g = 0; g < 8; ++g) {
    const int low = (b.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
    const int high = (b.scales_h >> (2 * g)) & 3;
    u.sc[2 * g] = u.sc[2 * g + 1] = static_cast<int16_t>((low | (high << 4)) - 32);
    u.mn[2 * g] = u.mn[2 * g + 1] = 0;
    for (int j = 0; j < 16; ++j) {
      u.v[32 * g + j] = kIq4Values[b.qs[16 * g + j] & 0x0f];
      u.v[32 * g + j + 16] = kIq4Values[b.qs[16 * g + j] >> 4];
    }
  }
}

template <class Block>
void unpack_grid(const Block& b, Unpacked& u) noexcept {
  iq::Unpacked g;
  iq::unpack(b, g);
  std::copy(g.v, g.v + 256, u.v);
  std::copy(g.sc, g.sc + 16, u.sc);
  std::fill(u.mn, u.mn + 16, int16_t{0});
  u.d = g.d;
  u.dmin = 0.0f;
}
void unpack(const BlockIQ2_XXS& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ2_XS& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ2_S& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ3_XXS& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ3_S& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ1_S& b, Unpacked& u) noexcept { unpack_grid(b, u); }
void unpack(const BlockIQ1_M& b, Unpacked& u) noexcept { unpack_grid(b, u); }

// One super-block's share of the dot product with b's super-block j.
float superblock_dot(const Unpacked& u, const Q8KRow& b, int64_t j) noexcept {
  const int8_t* q = b.qs + 256 * j;
  const int16_t* bsums = b.bsums + 16 * j;
  int32_t isum = 0, msum = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t s = 0;
    for (int l = 0; l < 16; ++l) s += u.v[16 * g + l] * q[16 * g + l];
    isum += u.sc[g] * s;
    msum += u.mn[g] * bsums[g];
  }
  const float db = b.d[j];
  return db * u.d * static_cast<float>(isum) - db * u.dmin * static_cast<float>(msum);
}

// Scalar state: lane 0 of each dot's accumulator holds the running sum.
template <class Block, int RM, int RN>
void tile_kquant(const TileArgs& t) noexcept {
  const int64_t j0 = t.k0 / 256, j1 = t.k1 / 256;
  float sums[RM][RN];
  for (int m = 0; m < RM; ++m)
    for (int n = 0; n < RN; ++n) sums[m][n] = t.first ? 0.0f : t.acc[(m * RN + n) * kAccLanes];
  Q8KRow brow[RN];
  for (int n = 0; n < RN; ++n) brow[n] = q8k_row(t.b + n * t.b_stride, t.k);
  Unpacked u;
  for (int m = 0; m < RM; ++m) {
    const auto* arow = reinterpret_cast<const Block*>(t.a + m * t.a_stride);
    for (int64_t j = j0; j < j1; ++j) {
      unpack(arow[j], u);
      for (int n = 0; n < RN; ++n) sums[m][n] += superblock_dot(u, brow[n], j);
    }
  }
  for (int m = 0; m < RM; ++m)
    for (int n = 0; n < RN; ++n) {
      if (t.last)
        t.dst[n * t.dst_stride + m] = sums[m][n];
      else
        t.acc[(m * RN + n) * kAccLanes] = sums[m][n];
    }
}

}  // namespace

void fill_kquant_scalar(KernelTable& t) {
  for_each_q8k_kind([&]<class Block>(int k) {
    for_each_tile_shape([&]<int RM, int RN>() { t.tile[k][RM - 1][RN - 1] = tile_kquant<Block, RM, RN>; });
  });
}

}  // namespace tessera::cpu::mm
