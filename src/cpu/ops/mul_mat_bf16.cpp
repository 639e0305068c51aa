// BF16 weights: the one order of their dot products, and the portable kernels that define it.
//
// b is rounded to bf16 like the weights (ggml's semantics for BF16 weights), so every product is
// exact in f32 and a dot product's bits depend only on the order of its additions. That order is
// the one of VDPBF16PS (AVX512_BF16) on 256 bits: 8 lanes; the 16-element chunk c adds to lane l
// the product of elements 16c + 2l + 1, then that of 16c + 2l, each by one fused multiply-add; after
// the last whole chunk the lanes are reduced as avx2::hsum reduces, ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)), and the elements after it are added one fused multiply-add at a time.
// Every table computes exactly this (the AVX2 one by two FMAs per chunk on the odd and the even
// halves of each 32-bit word), so BF16 results are the same bits on every CPU. The one exception:
// VDPBF16PS treats denormal inputs and results as zero, so values below 2^-126 can differ there.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "cpu/interleave.h"
#include "cpu/ops/mul_mat_kernels.h"
#include "tessera/convert.h"

namespace tessera::cpu::mm {
namespace {

inline float element(const char* p) noexcept {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_fp32(h);
}

// Where elements i..i + 7 (i % 8 == 0) of weight row m are: in ggml's rows, or (Grouped) in the
// interleaved layout (cpu/interleave.h), a pointing at the group.
template <bool Grouped>
inline const char* elems_at(const TileArgs& t, int m, int64_t i) noexcept {
  if constexpr (Grouped) return t.a + half_offset_in_group(m, i);
  return t.a + m * t.a_stride + 2 * i;
}

// RM rows x RN columns over [k0, k1); state acc[(m * RN + n) * kAccLanes + lane].
template <int RM, int RN, bool Grouped>
void tile_bf16(const TileArgs& t) noexcept {
  const int64_t whole = t.k & ~int64_t{15};  // elements in whole chunks
  const int64_t kv = std::min(t.k1, whole);
  for (int m = 0; m < RM; ++m)
    for (int n = 0; n < RN; ++n) {
      const char* brow = t.b + n * t.b_stride;
      float lanes[kAccLanes] = {};
      float* state = t.acc == nullptr ? nullptr : t.acc + (m * RN + n) * kAccLanes;
      if (!t.first) std::memcpy(lanes, state, sizeof lanes);
      for (int64_t i = t.k0; i < kv; i += 16)
        for (int l = 0; l < kAccLanes; ++l) {
          const int64_t e = i + 2 * l;  // the pair's even element; both are in one 8-element piece
          const char* a = elems_at<Grouped>(t, m, e & ~int64_t{7}) + 2 * (e & 7);
          lanes[l] = std::fma(element(a + 2), element(brow + 2 * e + 2), lanes[l]);
          lanes[l] = std::fma(element(a), element(brow + 2 * e), lanes[l]);
        }
      if (!t.last) {
        std::memcpy(state, lanes, sizeof lanes);
        continue;
      }
      float s = hsum_order(lanes);
      for (int64_t i = whole; i < t.k; ++i)
        s = std::fma(element(elems_at<Grouped>(t, m, i & ~int64_t{7}) + 2 * (i & 7)), element(brow + 2 * i),
                     s);
      t.dst[n * t.dst_stride + m] = s;
    }
}

constexpr int kBF16 = static_cast<int>(WeightKind::BF16);

}  // namespace

void fill_bf16_scalar(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() { t.tile[kBF16][RM - 1][RN - 1] = tile_bf16<RM, RN, false>; });
  for_each_index<kMaxRN>([&]<int I>() { t.interleaved[kBF16][I] = tile_bf16<kInterleaveRows, I + 1, true>; });
}

}  // namespace tessera::cpu::mm
