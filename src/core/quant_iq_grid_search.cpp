// Writing the I-quants of grid codebooks (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) as
// ggml's quantize_iq* do: per group an importance-weighted search over trial scales in which every
// run of 8 (or 4) elements is rounded to the codebook's levels and, where those levels are not a
// point of the codebook, replaced by the best of the nearest points. The searches are ggml's
// operation for operation in float (no reordered sums, no fused multiply-adds), so that ties fall
// the same way and a row gets llama.cpp's bytes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/iq_grids.h"
#include "core/quant_search.h"
#include "tessera/convert.h"
#include "tessera/quant.h"

namespace tessera::ref {
namespace {

// A codebook as the searches see it. A point's coordinates are its levels l (the rank of each
// byte's magnitude among the codebook's values) written as odd integers 2l + 1; a "code" packs the
// levels of a run of `dims` elements, `bits` per element. `map` gives a code's point index, or for
// a code that is no point, -1 - the offset of its neighbour list: a count, then the points at the
// `nwant` smallest distinct squared distances from the code, by distance, then by index.
struct GridSearch {
  int dims = 0, bits = 0, size = 0;
  std::vector<int8_t> points;  // size * dims odd coordinates
  std::vector<int32_t> map;    // 1 << (dims * bits) entries
  std::vector<uint16_t> lists;

  const int8_t* point(int i) const noexcept { return points.data() + static_cast<size_t>(i) * dims; }
  uint32_t code_of(const int8_t* levels) const noexcept {
    uint32_t u = 0;
    for (int i = 0; i < dims; ++i) u |= static_cast<uint32_t>(levels[i]) << (bits * i);
    return u;
  }
  const uint16_t* neighbours(uint32_t code) const noexcept { return lists.data() + (-1 - map[code]); }
};

// Builds the search tables from a codebook whose points are `dims` bytes each (signed for IQ1).
// Neighbour lists are made for every code whose levels are at most max_level: the searches clamp
// their levels to that range, so no other code is ever looked up.
template <class Word>
GridSearch build_search(const Word* grid, int size, int dims, int bits, bool signed_bytes, int nwant,
                        int max_level) {
  GridSearch g;
  g.dims = dims;
  g.bits = bits;
  g.size = size;
  auto byte_of = [&](int i, int k) {
    const int b = static_cast<int>((static_cast<uint64_t>(grid[i]) >> (8 * k)) & 0xff);
    return signed_bytes ? static_cast<int>(static_cast<int8_t>(b)) : b;
  };
  std::vector<int> values;
  for (int i = 0; i < size; ++i)
    for (int k = 0; k < dims; ++k) values.push_back(byte_of(i, k));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  g.points.resize(static_cast<size_t>(size) * dims);
  g.map.assign(size_t{1} << (dims * bits), -1);
  for (int i = 0; i < size; ++i) {
    int8_t levels[8];
    for (int k = 0; k < dims; ++k) {
      const int l =
          static_cast<int>(std::lower_bound(values.begin(), values.end(), byte_of(i, k)) - values.begin());
      levels[k] = static_cast<int8_t>(l);
      g.points[static_cast<size_t>(i) * dims + k] = static_cast<int8_t>(2 * l + 1);
    }
    g.map[g.code_of(levels)] = i;
  }
  std::vector<int> d2(static_cast<size_t>(size));
  const uint32_t codes = uint32_t{1} << (dims * bits), mask = (1u << bits) - 1;
  for (uint32_t u = 0; u < codes; ++u) {
    if (g.map[u] >= 0) continue;
    int pos[8];
    bool reachable = true;
    for (int k = 0; k < dims; ++k) {
      const int l = static_cast<int>((u >> (bits * k)) & mask);
      reachable = reachable && l <= max_level;
      pos[k] = 2 * l + 1;
    }
    if (!reachable) continue;
    // The nwant smallest distinct distances, then every point at one of them in (distance, index) order.
    int best[4] = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
    for (int j = 0; j < size; ++j) {
      int d = 0;
      const int8_t* p = g.point(j);
      for (int k = 0; k < dims; ++k) d += (p[k] - pos[k]) * (p[k] - pos[k]);
      d2[static_cast<size_t>(j)] = d;
      for (int s = 0; s < nwant; ++s) {
        if (d == best[s]) break;
        if (d < best[s]) {
          for (int t = nwant - 1; t > s; --t) best[t] = best[t - 1];
          best[s] = d;
          break;
        }
      }
    }
    const size_t start = g.lists.size();
    g.lists.push_back(0);
    for (int s = 0; s < nwant && best[s] != INT32_MAX; ++s)
      for (int j = 0; j < size; ++j)
        if (d2[static_cast<size_t>(j)] == best[s]) g.lists.push_back(static_cast<uint16_t>(j));
    g.lists[start] = static_cast<uint16_t>(g.lists.size() - start - 1);
    g.map[u] = -1 - static_cast<int32_t>(start);
  }
  return g;
}

// Built once on first use (thread-safe static initialization); IQ1_S and IQ1_M share theirs.
const GridSearch& iq2xxs_search() {
  static const GridSearch g = build_search(iq::kIq2xxsGrid, 256, 8, 2, false, 2, 2);
  return g;
}
const GridSearch& iq2xs_search() {
  static const GridSearch g = build_search(iq::kIq2xsGrid, 512, 8, 2, false, 2, 2);
  return g;
}
const GridSearch& iq2s_search() {
  static const GridSearch g = build_search(iq::kIq2sGrid, 1024, 8, 2, false, 1, 2);
  return g;
}
const GridSearch& iq1_search() {
  static const GridSearch g = build_search(iq::kIq1sGrid, 2048, 8, 2, true, 3, 2);
  return g;
}
const GridSearch& iq3xxs_search() {
  static const GridSearch g = build_search(iq::kIq3xxsGrid, 256, 4, 3, false, 2, 7);
  return g;
}
const GridSearch& iq3s_search() {
  static const GridSearch g = build_search(iq::kIq3sGrid, 512, 4, 3, false, 3, 7);
  return g;
}

// Of a code's neighbours, the point nearest to x / scale under weights w (the first on ties); its
// levels go to L.
int best_neighbour(const GridSearch& g, uint32_t code, const float* x, const float* w, float scale,
                   int8_t* L) noexcept {
  const uint16_t* list = g.neighbours(code);
  float best_d2 = FLT_MAX;
  int index = list[1];  // ggml asserts a nearest point exists; only NaN inputs find none
  for (int j = 1; j <= list[0]; ++j) {
    const int8_t* p = g.point(list[j]);
    float d2 = 0;
    for (int i = 0; i < g.dims; ++i) {
      const float q = p[i];
      const float diff = scale * q - x[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      index = list[j];
    }
  }
  const int8_t* p = g.point(index);
  for (int i = 0; i < g.dims; ++i) L[i] = static_cast<int8_t>((p[i] - 1) / 2);
  return index;
}

// The levels of x * id rounded (l = round((id x - 1) / 2), clamped to [0, max_level]); returns whether
// they are a point, replacing them with the best neighbour at `scale` when they are not.
bool round_to_grid(const GridSearch& g, const float* x, const float* waux, float id, float scale,
                   int max_level, int8_t* L) noexcept {
  for (int i = 0; i < g.dims; ++i) {
    const int l = nearest_int(0.5f * (id * x[i] - 1));
    L[i] = static_cast<int8_t>(std::max(0, std::min(max_level, l)));
  }
  const uint32_t u = g.code_of(L);
  if (g.map[u] >= 0) return true;
  best_neighbour(g, u, x, waux, scale, L);
  return false;
}

// The index of the point whose levels L holds (always a point once a search is done).
int index_of(const GridSearch& g, const int8_t* L) noexcept {
  const int i = g.map[g.code_of(L)];
  return i >= 0 ? i : 0;
}

// How a group's search ends once the trial scales are done.
enum class Refit {
  kAll,         // IQ2_XXS: every run again at the chosen scale
  kAllIfOff,    // IQ3_S: every run, if any run of the chosen trial was off the grid (or none was chosen)
  kOffGridOnly  // IQ2_XS, IQ2_S, IQ3_XXS: only the runs that were off the grid
};

struct GroupSearch {
  const GridSearch* grid;
  int max_q;        // levels 0 .. max_q - 1
  int half_trials;  // trial steps -half_trials .. half_trials
  float step;       // of the inverse scale, in units of (2 max_q - 1) / max
  Refit refit;
};

float weighted_fit(int n, const float* x, const float* w, const int8_t* L, float& sumq2) noexcept {
  float sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    sumqx += w[i] * x[i] * q;
    sumq2 += w[i] * q * q;
  }
  return sumqx;
}

// One group of n magnitudes xval (signs already taken out) under weights w (waux = sqrt(w) for the
// neighbour searches): trial inverse scales (2 max_q - 1 + k step) / denom, each rounded to the grid
// and refitted by weighted least squares, the best kept; then the refit. L receives the levels (all
// points of the grid), the scale is returned.
float search_group(const GroupSearch& s, int n, const float* xval, const float* w, const float* waux,
                   float denom, float scale, int8_t* L) noexcept {
  const GridSearch& g = *s.grid;
  const int runs = n / g.dims;
  int8_t Laux[32];
  bool on_grid[8], on_grid_aux[8];
  for (int k = 0; k < runs; ++k) on_grid[k] = s.refit != Refit::kAllIfOff;
  float best = 0;
  for (int is = -s.half_trials; is <= s.half_trials; ++is) {
    const float id = (static_cast<float>(2 * s.max_q - 1) + static_cast<float>(is) * s.step) / denom;
    const float this_scale = 1 / id;
    for (int k = 0; k < runs; ++k)
      on_grid_aux[k] = round_to_grid(g, xval + g.dims * k, waux + g.dims * k, id, this_scale, s.max_q - 1,
                                     Laux + g.dims * k);
    float sumq2;
    const float sumqx = weighted_fit(n, xval, w, Laux, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, static_cast<size_t>(n));
      std::copy(on_grid_aux, on_grid_aux + runs, on_grid);
    }
  }
  bool refit = scale > 0;
  if (s.refit != Refit::kAll) {
    int off = 0;
    for (int k = 0; k < runs; ++k) off += on_grid[k] ? 0 : 1;
    refit = refit && off > 0;
  }
  if (refit) {
    const float id = 1 / scale;
    for (int k = 0; k < runs; ++k) {
      if (s.refit == Refit::kOffGridOnly && on_grid[k]) continue;
      round_to_grid(g, xval + g.dims * k, waux + g.dims * k, id, scale, s.max_q - 1, L + g.dims * k);
    }
    float sumq2;
    const float sumqx = weighted_fit(n, xval, w, L, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// The weights of a group: importance * sqrt(sigma2 + x^2), or the format's fallback without one.
// (importance, when there is one, is the block's; the group's weights start at `at`.)
template <class Fallback>
void group_weights(const float* x, const float* importance, int at, float sigma2, int n, float* w,
                   Fallback fallback) noexcept {
  for (int i = 0; i < n; ++i)
    w[i] = importance != nullptr ? importance[at + i] * std::sqrt(sigma2 + x[i] * x[i]) : fallback(x[i]);
}

float sum_squares(const float* x) noexcept {
  float s = 0;
  for (int i = 0; i < kSuperBlock; ++i) s += x[i] * x[i];
  return s;
}

// Magnitudes of runs of 8 and their sign bytes. With `even_parity` (the formats that store seven
// sign bits and derive the eighth) a run with an odd count of negatives flips the sign of its
// element of least w x^2 instead, which then enters the search as a negative magnitude.
void split_signs(const float* x, const float* w, int n, bool even_parity, float* xval,
                 uint8_t* signs) noexcept {
  for (int k = 0; k < n / 8; ++k) {
    int negatives = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      const float v = x[8 * k + i];
      if (v >= 0) {
        xval[8 * k + i] = v;
      } else {
        xval[8 * k + i] = -v;
        ++negatives;
        s = static_cast<uint8_t>(s | (1u << i));
      }
    }
    if (even_parity && negatives % 2 != 0) {
      int imin = 0;
      float min = w[8 * k] * x[8 * k] * x[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float ax = w[8 * k + i] * x[8 * k + i] * x[8 * k + i];
        if (ax < min) {
          min = ax;
          imin = i;
        }
      }
      xval[8 * k + imin] = -xval[8 * k + imin];
      s = static_cast<uint8_t>(s ^ (1u << imin));
    }
    signs[k] = even_parity ? static_cast<uint8_t>(s & 127) : s;
  }
}

float group_max(const float* xval, int n) noexcept {
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
  return max;
}

// A 4-bit sub-scale of a group scale against d = max_scale / 31: round((s / d - 1) / 2).
int sub_scale(float id, float scale, int top) noexcept {
  return std::max(0, std::min(top, nearest_int(0.5f * (id * scale - 1))));
}

void sqrt_weights(const float* w, int n, float* waux) noexcept {
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(w[i]);
}

// ---- IQ2_XXS: groups of 32 (four runs of 8 over the 256-point grid), seven sign bits per run.
void quantize_iq2_xxs_block(const float* x, const float* importance, BlockIQ2_XXS& y) noexcept {
  const GridSearch& g = iq2xxs_search();
  const GroupSearch search{&g, 3, 6, 0.1f, Refit::kAll};
  uint32_t q2[16] = {};
  float scales[8];
  float max_scale = 0;
  const float sigma2 = sum_squares(x) / kSuperBlock;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float w[32], waux[32], xval[32];
    uint8_t signs[4];
    int8_t L[32] = {};
    group_weights(xb, importance, 32 * ib, sigma2, 32, w, [](float) { return 0.0f; });
    sqrt_weights(w, 32, waux);
    split_signs(xb, w, 32, true, xval, signs);
    scales[ib] = 0;
    if (group_max(xval, 32) < kGroupMaxEps) continue;
    uint8_t levels[32];
    float scale = fit_positive_levels(32, search.max_q + 1, xval, w, levels);
    const float eff_max = scale * static_cast<float>(search.max_q);
    if (eff_max <= 0) continue;
    scale = search_group(search, 32, xval, w, waux, eff_max, scale, L);
    if (scale < 0) {  // never in practice; the scales are unsigned, so the signs turn instead
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
    }
    for (int k = 0; k < 4; ++k) {
      q2[2 * ib] |= static_cast<uint32_t>(index_of(g, L + 8 * k)) << (8 * k);
      q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
    }
    scales[ib] = scale;
    max_scale = std::max(max_scale, scale);
  }
  y.d = fp32_to_fp16(0.0f);
  if (max_scale == 0) {
    std::memset(y.qs, 0, sizeof y.qs);
    return;
  }
  const float d = max_scale / 31;
  y.d = fp32_to_fp16(d);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= static_cast<uint32_t>(sub_scale(id, scales[ib], 15)) << 28;
  std::memcpy(y.qs, q2, sizeof y.qs);
}

// ---- IQ2_XS (512 points, a 9-bit index and 7 sign bits per run) and IQ2_S (1024 points, 10-bit
// indices, sign bytes): groups of 16, two runs of 8.
template <class Block>
void quantize_iq2_16_block(const float* x, const float* importance, Block& y) noexcept {
  constexpr bool kXs = std::is_same_v<Block, BlockIQ2_XS>;
  const GridSearch& g = kXs ? iq2xs_search() : iq2s_search();
  const GroupSearch search{&g, 3, 9, 0.1f, Refit::kOffGridOnly};
  std::memset(&y, 0, sizeof y);
  uint16_t q2[32] = {};
  float scales[16];
  float max_scale = 0;
  const float sumx2 = sum_squares(x);
  const float sigma2 = kXs ? sumx2 / kSuperBlock : 2 * sumx2 / kSuperBlock;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    float w[16], waux[16], xval[16];
    uint8_t signs[2];
    int8_t L[16] = {};
    group_weights(xb, importance, 16 * ib, sigma2, 16, w,
                  [sigma2](float v) { return 0.25f * sigma2 + v * v; });
    sqrt_weights(w, 16, waux);
    split_signs(xb, w, 16, kXs, xval, signs);
    scales[ib] = 0;
    const float max = group_max(xval, 16);
    if (max < (kXs ? kGroupMaxEps : 1e-8f)) continue;
    float scale = search_group(search, 16, xval, w, waux, max, max / 5, L);
    if (scale < 0) {
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(kXs ? ~s & 127 : ~s);
    }
    for (int k = 0; k < 2; ++k) {
      const int index = index_of(g, L + 8 * k);
      if constexpr (kXs) {
        q2[2 * ib + k] = static_cast<uint16_t>(index | (signs[k] << 9));
      } else {
        const int i8 = 2 * ib + k;
        y.qs[i8] = static_cast<uint8_t>(index & 255);
        y.qh[i8 / 4] = static_cast<uint8_t>(y.qh[i8 / 4] | ((index >> 8) << (2 * (i8 % 4))));
        y.qs[32 + i8] = signs[k];
      }
    }
    scales[ib] = scale;
    max_scale = std::max(max_scale, scale);
  }
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  y.d = fp32_to_fp16(kXs ? d : d * 0.9875f);
  const float id = 1 / d;
  for (int ib = 0; ib < 16; ++ib) {
    const int l = sub_scale(id, scales[ib], 15);
    y.scales[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? l : y.scales[ib / 2] | (l << 4));
  }
  if constexpr (kXs) std::memcpy(y.qs, q2, sizeof y.qs);
}

// ---- IQ3_XXS (256 points, 7 sign bits per 8) and IQ3_S (512 points, sign bytes): groups of 32,
// eight runs of 4.
void quantize_iq3_xxs_block(const float* x, const float* importance, BlockIQ3_XXS& y) noexcept {
  const GridSearch& g = iq3xxs_search();
  const GroupSearch search{&g, 8, 15, 0.2f, Refit::kOffGridOnly};
  uint8_t q3[96] = {};
  float scales[8];
  float max_scale = 0;
  const float sigma2 = 2 * sum_squares(x) / kSuperBlock;
  uint32_t words[8] = {};
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float w[32], waux[32], xval[32];
    uint8_t signs[4];
    int8_t L[32] = {};
    group_weights(xb, importance, 32 * ib, sigma2, 32, w, [](float v) { return v * v; });
    sqrt_weights(w, 32, waux);
    split_signs(xb, w, 32, true, xval, signs);
    scales[ib] = 0;
    const float max = group_max(xval, 32);
    if (max < 1e-8f) continue;
    float scale = search_group(search, 32, xval, w, waux, max, max / 15, L);
    if (scale < 0) {
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
    }
    for (int k = 0; k < 8; ++k) q3[8 * ib + k] = static_cast<uint8_t>(index_of(g, L + 4 * k));
    words[ib] = signs[0] | (signs[1] << 7) | (signs[2] << 14) | (static_cast<uint32_t>(signs[3]) << 21);
    scales[ib] = scale;
    max_scale = std::max(max_scale, scale);
  }
  y.d = fp32_to_fp16(0.0f);
  if (max_scale == 0) {
    std::memset(y.qs, 0, sizeof y.qs);
    return;
  }
  const float d = max_scale / 31;
  y.d = fp32_to_fp16(d * 1.0125f);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) words[ib] |= static_cast<uint32_t>(sub_scale(id, scales[ib], 15)) << 28;
  std::memcpy(q3 + 64, words, sizeof words);
  std::memcpy(y.qs, q3, sizeof y.qs);
}

void quantize_iq3_s_block(const float* x, const float* importance, BlockIQ3_S& y) noexcept {
  const GridSearch& g = iq3s_search();
  const GroupSearch search{&g, 8, 9, 0.2f, Refit::kAllIfOff};
  std::memset(&y, 0, sizeof y);
  float scales[8];
  float max_scale = 0;
  const float sigma2 = 2 * sum_squares(x) / kSuperBlock;
  // ggml advances its index and sign cursors only past groups that are not all zero, so a zero
  // group leaves the later groups' indices and signs one group early (and the last ones zero):
  // the layout llama.cpp writes, kept for its bits.
  int qs_at = 0, signs_at = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float w[32], waux[32], xval[32];
    uint8_t signs[4];
    int8_t L[32] = {};
    group_weights(xb, importance, 32 * ib, sigma2, 32, w, [](float v) { return v * v; });
    sqrt_weights(w, 32, waux);
    split_signs(xb, w, 32, false, xval, signs);
    scales[ib] = 0;
    const float max = group_max(xval, 32);
    if (max == 0) continue;
    float scale = search_group(search, 32, xval, w, waux, max, max / 15, L);
    if (scale < 0) {
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s);
    }
    for (int k = 0; k < 8; ++k) {
      const int index = index_of(g, L + 4 * k);
      y.qs[qs_at + k] = static_cast<uint8_t>(index & 255);
      y.qh[ib] = static_cast<uint8_t>(y.qh[ib] | ((index >> 8) << k));
    }
    qs_at += 8;
    std::memcpy(y.signs + signs_at, signs, 4);
    signs_at += 4;
    scales[ib] = scale;
    max_scale = std::max(max_scale, scale);
  }
  if (max_scale == 0) return;
  const float d = max_scale / 31;
  y.d = fp32_to_fp16(d * 1.033f);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ib += 2)
    y.scales[ib / 2] =
        static_cast<uint8_t>(sub_scale(id, scales[ib], 15) | (sub_scale(id, scales[ib + 1], 15) << 4));
}

// ---- IQ1_S and IQ1_M: elements -1, 0, +1 shifted by +-1/8, 2048 points of 8.
constexpr float kIq1Delta = 0.125f;
constexpr float kShiftUp[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
constexpr float kShiftDown[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// The element order of a group by value, ascending, equal values in their order (what ggml's qsort,
// glibc's merge sort, gives): an insertion sort, defined for any input.
void sort_by_value(const float* x, int n, int* order) noexcept {
  for (int j = 0; j < n; ++j) {
    int k = j;
    while (k > 0 && x[j] < x[order[k - 1]]) {
      order[k] = order[k - 1];
      --k;
    }
    order[k] = j;
  }
}

// Of a code's neighbours, the point nearest to x / scale with levels read through the shifted
// values xg (ggml's iq1_find_best_neighbour2); its levels go to L.
int iq1_neighbour(const GridSearch& g, uint32_t code, const float* x, const float* w, float scale,
                  const float* xg, int8_t* L) noexcept {
  const uint16_t* list = g.neighbours(code);
  float best = FLT_MAX;
  int index = list[1];  // only NaN inputs find none (ggml asserts)
  for (int j = 1; j <= list[0]; ++j) {
    const int8_t* p = g.point(list[j]);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float q = xg[(p[i] - 1) / 2];
      const float diff = scale * q - x[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      index = list[j];
    }
  }
  const int8_t* p = g.point(index);
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>((p[i] - 1) / 2);
  return index;
}

// The runs of a group to points: L's levels where they are one, the best neighbour otherwise;
// then, if any run moved, the scale refitted. xg(k) gives run k's shifted values.
template <class ShiftOf>
float iq1_place(const GridSearch& g, int n, const float* xb, const float* w, float scale, int8_t* L,
                ShiftOf xg, uint16_t* index) noexcept {
  bool all_on_grid = true;
  for (int k = 0; k < n / 8; ++k) {
    const uint32_t u = g.code_of(L + 8 * k);
    int i = g.map[u];
    if (i < 0) {
      all_on_grid = false;
      i = iq1_neighbour(g, u, xb + 8 * k, w + 8 * k, scale, xg(k), L + 8 * k);
    }
    index[k] = static_cast<uint16_t>(i);
  }
  if (!all_on_grid) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n / 8; ++k) {
      const int8_t* p = g.point(index[k]);
      for (int j = 0; j < 8; ++j) {
        const float q = xg(k)[(p[j] - 1) / 2];
        sumqx += w[8 * k + j] * q * xb[8 * k + j];
        sumq2 += w[8 * k + j] * q * q;
      }
    }
    if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

void quantize_iq1_s_block(const float* x, const float* importance, BlockIQ1_S& y) noexcept {
  const GridSearch& g = iq1_search();
  y.d = fp32_to_fp16(0.0f);
  std::memset(y.qs, 0, sizeof y.qs);
  std::memset(y.qh, 0, sizeof y.qh);
  float scales[8];
  int shifts[8];
  float max_scale = 0;
  const float sigma2 = 2 * sum_squares(x) / kSuperBlock;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float w[32];
    group_weights(xb, importance, 32 * ib, sigma2, 32, w, [](float) { return 0.0f; });
    scales[ib] = 0;
    shifts[ib] = 1;
    float max = std::fabs(xb[0]);
    for (int i = 1; i < 32; ++i) max = std::max(max, std::fabs(xb[i]));
    if (max < 1e-12f) continue;
    // Sorted by value, every split into -1 / 0 / +1 runs of the order is a candidate: the prefix
    // sums give each one's least-squares scale and score for both shifts.
    int order[32];
    sort_by_value(xb, 32, order);
    float sumx[33], sumw[33];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
      sumx[j + 1] = sumx[j] + w[order[j]] * xb[order[j]];
      sumw[j + 1] = sumw[j] + w[order[j]];
    }
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= 32; ++i1) {
      for (int i2 = i1; i2 <= 32; ++i2) {
        for (int shift : {1, -1}) {
          const float* v = shift == 1 ? kShiftUp : kShiftDown;
          const float sumqx =
              (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[32] - sumx[i2]) * v[2];
          const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                              (sumw[32] - sumw[i2]) * v[2] * v[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1;
            besti2 = i2;
            best_shift = shift;
          }
        }
      }
    }
    if (besti1 < 0 || besti2 < 0 || best_shift == 0) continue;
    int8_t L[32];
    for (int j = 0; j < 32; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
    if (scale < 0) {
      for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
      scale = -scale;
      best_shift = -best_shift;
    }
    const float* xx = best_shift == 1 ? kShiftUp : kShiftDown;
    uint16_t index[4];
    scale = iq1_place(
        g, 32, xb, w, scale, L, [xx](int) { return xx; }, index);
    uint16_t h = 0;
    for (int k = 0; k < 4; ++k) {
      y.qs[4 * ib + k] = static_cast<uint8_t>(index[k] & 255);
      h = static_cast<uint16_t>(h | ((index[k] >> 8) << (3 * k)));
    }
    y.qh[ib] = h;
    scales[ib] = scale;
    shifts[ib] = best_shift;
    max_scale = std::max(max_scale, scale);
  }
  if (max_scale == 0) return;
  const float d = max_scale / 15;
  y.d = fp32_to_fp16(d * 1.125f);
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) {
    int l = sub_scale(id, scales[ib], 7);
    if (shifts[ib] == -1) l |= 8;
    y.qh[ib] = static_cast<uint16_t>(y.qh[ib] | (l << 12));
  }
}

void quantize_iq1_m_block(const float* x, const float* importance, BlockIQ1_M& y) noexcept {
  const GridSearch& g = iq1_search();
  std::memset(&y, 0, sizeof y);
  float scales[16];
  int shifts[16];  // bit 1: the first run of 8 shifts down, bit 0: the second
  float max_scale = 0;
  const float sigma2 = 2 * sum_squares(x) / kSuperBlock;
  auto weights_of = [&](int ib, float* w) {
    group_weights(x + 16 * ib, importance, 16 * ib, sigma2, 16, w, [](float v) { return v * v; });
  };
  auto shift_of = [](int k, int run) {
    const bool down = run == 0 ? k >= 2 : k % 2 == 1;
    return down ? kShiftDown : kShiftUp;
  };
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    float w[16];
    weights_of(ib, w);
    scales[ib] = 0;
    shifts[ib] = 0;
    float max = std::fabs(xb[0]);
    for (int i = 1; i < 16; ++i) max = std::max(max, std::fabs(xb[i]));
    if (max < 1e-7f) continue;
    int order[16];
    sort_by_value(xb, 16, order);
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= 16; ++i1) {
      for (int i2 = i1; i2 <= 16; ++i2) {
        float sumqx[4] = {}, sumq2[4] = {};
        for (int j = 0; j < 16; ++j) {
          const int i = order[j];
          const int level = j < i1 ? 0 : j < i2 ? 1 : 2;
          for (int k = 0; k < 4; ++k) {
            const float v = shift_of(k, i < 8 ? 0 : 1)[level];
            sumqx[k] += w[i] * v * xb[i];
            sumq2[k] += w[i] * v * v;
          }
        }
        for (int k = 0; k < 4; ++k) {
          if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
            scale = sumqx[k] / sumq2[k];
            best_score = scale * sumqx[k];
            besti1 = i1;
            besti2 = i2;
            best_k = k;
          }
        }
      }
    }
    if (besti1 < 0 || besti2 < 0 || best_k < 0) continue;
    int8_t L[16];
    for (int j = 0; j < 16; ++j) L[order[j]] = static_cast<int8_t>(j < besti1 ? 0 : j < besti2 ? 1 : 2);
    if (scale < 0) {
      for (int8_t& l : L) l = static_cast<int8_t>(2 - l);
      scale = -scale;
      best_k = 3 - best_k;
    }
    uint16_t index[2];
    const int k_best = best_k;
    scale = iq1_place(
        g, 16, xb, w, scale, L, [&](int run) { return shift_of(k_best, run); }, index);
    y.qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
    y.qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
    y.qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
    scales[ib] = scale;
    shifts[ib] = best_k;
    max_scale = std::max(max_scale, scale);
  }
  if (max_scale == 0) return;
  // The sub-scales against max_scale / 15, then d refitted over the whole block with them.
  static constexpr uint8_t kShiftBits[4] = {0x00, 0x80, 0x08, 0x88};
  uint16_t sc[4] = {};
  float d = max_scale / 15;
  const float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const int l = sub_scale(id, scales[ib], 7);
    sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
    y.qh[ib] = static_cast<uint8_t>(y.qh[ib] | kShiftBits[shifts[ib]]);
    const float* xb = x + 16 * ib;
    float w[16];
    weights_of(ib, w);
    for (int k = 0; k < 2; ++k) {
      const float* xx = shift_of(shifts[ib], k);
      const int index = y.qs[2 * ib + k] | ((y.qh[ib] << (8 - 4 * k)) & 0x700);
      const int8_t* p = g.point(index);
      for (int j = 0; j < 8; ++j) {
        const float q = xx[(p[j] - 1) / 2] * static_cast<float>(2 * l + 1);
        sumqx += w[8 * k + j] * q * xb[8 * k + j];
        sumq2 += w[8 * k + j] * q * q;
      }
    }
  }
  if (sumq2 > 0) d = sumqx / sumq2;
  const uint16_t h = fp32_to_fp16(d * 1.1125f);
  sc[0] = static_cast<uint16_t>(sc[0] | ((h & 0x000f) << 12));
  sc[1] = static_cast<uint16_t>(sc[1] | ((h & 0x00f0) << 8));
  sc[2] = static_cast<uint16_t>(sc[2] | ((h & 0x0f00) << 4));
  sc[3] = static_cast<uint16_t>(sc[3] | (h & 0xf000));
  std::memcpy(y.scales, sc, sizeof sc);
}

// Rows of super-blocks; the importance of element i of every row is importance[i].
template <class Block, class Fn>
void grid_row(const float* src, Block* dst, int64_t n, const float* importance, Fn block) noexcept {
  for (int64_t b = 0; b < n / kSuperBlock; ++b)
    block(src + b * kSuperBlock, importance != nullptr ? importance + b * kSuperBlock : nullptr, dst[b]);
}

}  // namespace

void quantize_row_iq2_xxs(const float* src, BlockIQ2_XXS* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq2_xxs_block);
}
void quantize_row_iq2_xs(const float* src, BlockIQ2_XS* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq2_16_block<BlockIQ2_XS>);
}
void quantize_row_iq2_s(const float* src, BlockIQ2_S* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq2_16_block<BlockIQ2_S>);
}
void quantize_row_iq3_xxs(const float* src, BlockIQ3_XXS* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq3_xxs_block);
}
void quantize_row_iq3_s(const float* src, BlockIQ3_S* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq3_s_block);
}
void quantize_row_iq1_s(const float* src, BlockIQ1_S* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq1_s_block);
}
void quantize_row_iq1_m(const float* src, BlockIQ1_M* dst, int64_t n, const float* importance) noexcept {
  grid_row(src, dst, n, importance, quantize_iq1_m_block);
}

}  // namespace tessera::ref
