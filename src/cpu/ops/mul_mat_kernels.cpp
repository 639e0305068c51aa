// Portable scalar MUL_MAT tile kernels (the fallback everywhere) and the run-time kernel choice.
#include "cpu/ops/mul_mat_kernels.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "core/env.h"
#include "cpu/interleave.h"
#include "tessera/convert.h"
#include "tessera/log.h"
#include "tessera/quant.h"

namespace tessera::cpu::mm {
namespace {

float load_elem(WeightKind kind, const char* row, int64_t i) noexcept {
  switch (kind) {
    case WeightKind::F16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return fp16_to_fp32(h);
    }
    default: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
  }
}

// Scalar state: lane 0 of each dot's accumulator holds the running sum.
template <WeightKind Kind, int RM, int RN>
void tile_float(const TileArgs& t) noexcept {
  for (int m = 0; m < RM; ++m) {
    const char* arow = t.a + m * t.a_stride;
    for (int n = 0; n < RN; ++n) {
      const auto* brow = reinterpret_cast<const float*>(t.b + n * t.b_stride);
      // t.acc is null when the tile is both first and last: index it only when used.
      const int64_t at = (m * RN + n) * kAccLanes;
      float s = t.first ? 0.0f : t.acc[at];
      for (int64_t i = t.k0; i < t.k1; ++i) s += load_elem(Kind, arow, i) * brow[i];
      if (t.last)
        t.dst[n * t.dst_stride + m] = s;
      else
        t.acc[at] = s;
    }
  }
}

// Bit 4 of element j of a Q5_0/Q5_1 block.
inline int high_bit(const uint8_t qh[4], int j) noexcept { return (qh[j / 8] >> (j % 8)) & 1; }

// sum(v * b) over a block, v the block's integer values (x = d * v, or x = d * v + m).
int32_t block_dot(const BlockQ4_0& a, const int8_t* b) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) {
    s += ((a.qs[j] & 0x0f) - 8) * b[j];
    s += ((a.qs[j] >> 4) - 8) * b[j + 16];
  }
  return s;
}

int32_t block_dot(const BlockQ8_0& a, const int8_t* b) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += a.qs[j] * b[j];
  return s;
}

int32_t block_dot(const BlockQ4_1& a, const int8_t* b) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (a.qs[j] & 0x0f) * b[j] + (a.qs[j] >> 4) * b[j + 16];
  return s;
}

template <class Block>
int32_t five_bit_dot(const Block& a, const int8_t* b, int offset) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) {
    s += (((a.qs[j] & 0x0f) | (high_bit(a.qh, j) << 4)) - offset) * b[j];
    s += (((a.qs[j] >> 4) | (high_bit(a.qh, j + 16) << 4)) - offset) * b[j + 16];
  }
  return s;
}
int32_t block_dot(const BlockQ5_0& a, const int8_t* b) noexcept { return five_bit_dot(a, b, 16); }
int32_t block_dot(const BlockQ5_1& a, const int8_t* b) noexcept { return five_bit_dot(a, b, 0); }

int32_t block_dot(const BlockIQ4_NL& a, const int8_t* b) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += kIq4Values[a.qs[j] & 0x0f] * b[j] + kIq4Values[a.qs[j] >> 4] * b[j + 16];
  return s;
}

int32_t block_dot(const BlockMXFP4& a, const int8_t* b) noexcept {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j)
    s += kMxfp4Values[a.qs[j] & 0x0f] * b[j] + kMxfp4Values[a.qs[j] >> 4] * b[j + 16];
  return s;
}

// The block's scale: fp16 d, or MXFP4's E8M0 exponent (halved, as its doubled values need).
template <class Block>
float block_scale(const Block& a) noexcept {
  if constexpr (std::is_same_v<Block, BlockMXFP4>)
    return e8m0_half(a.e);
  else
    return fp16_to_fp32(a.d);
}

// Q4_1 and Q5_1 add m to every element: m * sum(b), with ggml's Q8_1 sum s of b's block.
template <class Block>
constexpr bool kHasMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;

template <class Block, int RM, int RN>
void tile_quant(const TileArgs& t) noexcept {
  const int64_t j0 = t.k0 / 32, j1 = t.k1 / 32;
  for (int m = 0; m < RM; ++m) {
    const auto* ablk = reinterpret_cast<const Block*>(t.a + m * t.a_stride);
    for (int n = 0; n < RN; ++n) {
      const auto* bq = reinterpret_cast<const int8_t*>(t.b + n * t.b_stride);
      const auto* bd = reinterpret_cast<const float*>(bq + t.k);
      const float* bs = bd + 2 * (t.k / 32);
      const int64_t at = (m * RN + n) * kAccLanes;
      float s = t.first ? 0.0f : t.acc[at];
      for (int64_t j = j0; j < j1; ++j) {
        const float d = block_scale(ablk[j]) * bd[j];
        s += static_cast<float>(block_dot(ablk[j], bq + 32 * j)) * d;
        if constexpr (kHasMin<Block>) s += fp16_to_fp32(ablk[j].m) * bs[j];
      }
      if (t.last)
        t.dst[n * t.dst_stride + m] = s;
      else
        t.acc[at] = s;
    }
  }
}

void quantize_q8_row(const float* src, char* dst, int64_t k) noexcept {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* ds = reinterpret_cast<float*>(dst + k);
  float* cs = ds + k / 32;
  float* ss = cs + k / 32;
  auto* sums = reinterpret_cast<int32_t*>(ss + k / 32);
  for (int64_t j = 0; j < k / 32; ++j) {
    const float* x = src + 32 * j;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    ds[j] = fp16_to_fp32(fp32_to_fp16(d));
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      qs[32 * j + i] = static_cast<int8_t>(std::roundf(x[i] * id));
      sum += qs[32 * j + i];
    }
    cs[j] = static_cast<float>(8 * sum) * ds[j];
    ss[j] = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sum) * d));
    sums[j] = sum;
  }
}

void quantize_q8k_row(const float* src, char* dst, int64_t k) noexcept {
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* ds = reinterpret_cast<float*>(dst + k);
  auto* bsums = reinterpret_cast<int16_t*>(ds + k / 256);
  BlockQ8_K blk;
  for (int64_t j = 0; j < k / 256; ++j) {
    ref::quantize_row_q8_k(src + 256 * j, &blk, 256);
    std::memcpy(qs + 256 * j, blk.qs, 256);
    ds[j] = blk.d;
    std::memcpy(bsums + 16 * j, blk.bsums, sizeof blk.bsums);
  }
}

void f16_row(const uint16_t* src, float* dst, int64_t k) noexcept { fp16_to_fp32_row(src, dst, k); }

// F16 weights in the interleaved layout: tile_float's operations on each row of the group,
// state acc[(l * RN + n) * kAccLanes].
template <WeightKind Kind, int RN>
void tile_interleaved_half(const TileArgs& t) noexcept {
  for (int l = 0; l < kInterleaveRows; ++l)
    for (int n = 0; n < RN; ++n) {
      const auto* brow = reinterpret_cast<const float*>(t.b + n * t.b_stride);
      const int64_t at = (l * RN + n) * kAccLanes;
      float s = t.first ? 0.0f : t.acc[at];
      for (int64_t i = t.k0; i < t.k1; ++i)
        s += load_elem(Kind, t.a + half_offset_in_group(l, i), 0) * brow[i];
      if (t.last)
        t.dst[n * t.dst_stride + l] = s;
      else
        t.acc[at] = s;
    }
}

// Weights in the interleaved layout (cpu/interleave.h): per row, exact integer block sums, then
// acc = fma(sum, d_a * d_b, acc) block after block, the SIMD kernel's operations.
template <class Block, int RN>
void tile_interleaved(const TileArgs& t) noexcept {
  constexpr bool kQ4 = std::is_same_v<Block, BlockQ4_0>;
  constexpr int kRows = kMatVecRows;
  constexpr size_t kWords = (sizeof(Block) - 2) / 4;
  for (int n = 0; n < RN; ++n) {
    const char* brow = t.b + n * t.b_stride;
    const auto* bq = reinterpret_cast<const int8_t*>(brow);
    const auto* bd = reinterpret_cast<const float*>(brow + t.k);
    for (int l = 0; l < kRows; ++l) {
      float acc = t.first ? 0.0f : t.acc[n * kAccLanes + l];
      for (int64_t j = t.k0 / 32; j < t.k1 / 32; ++j) {
        const char* blk = t.a + static_cast<size_t>(j) * kRows * sizeof(Block);
        uint16_t h;
        std::memcpy(&h, blk + 2 * l, 2);
        const auto* q = reinterpret_cast<const uint8_t*>(blk + 2 * kRows + 4 * l);
        const int8_t* b = bq + 32 * j;
        int32_t sum = 0;
        for (size_t v = 0; v < kWords; ++v)
          for (int i = 0; i < 4; ++i) {
            const uint8_t byte = q[32 * v + i];
            const int e = static_cast<int>(4 * v) + i;
            if constexpr (kQ4)
              sum += ((byte & 0x0f) - 8) * b[e] + ((byte >> 4) - 8) * b[e + 16];
            else
              sum += static_cast<int8_t>(byte) * b[e];
          }
        acc = std::fma(static_cast<float>(sum), fp16_to_fp32(h) * bd[j], acc);
      }
      if (t.last)
        t.dst[n * t.dst_stride + l] = acc;
      else
        t.acc[n * kAccLanes + l] = acc;
    }
  }
}

// F32, F16 and the kinds whose b is a q8 row, every tile shape.
void fill_tiles(KernelTable& t) {
  for_each_tile_shape([&]<int RM, int RN>() {
    t.tile[static_cast<int>(WeightKind::F32)][RM - 1][RN - 1] = tile_float<WeightKind::F32, RM, RN>;
    t.tile[static_cast<int>(WeightKind::F16)][RM - 1][RN - 1] = tile_float<WeightKind::F16, RM, RN>;
    for_each_q8_kind([&]<class Block>(int k) { t.tile[k][RM - 1][RN - 1] = tile_quant<Block, RM, RN>; });
  });
}

void fill_interleaved(KernelTable& t) {
  for_each_index<kMaxRN>([&]<int I>() {
    t.interleaved[static_cast<int>(WeightKind::Q4_0)][I] = tile_interleaved<BlockQ4_0, I + 1>;
    t.interleaved[static_cast<int>(WeightKind::Q8_0)][I] = tile_interleaved<BlockQ8_0, I + 1>;
    t.interleaved[static_cast<int>(WeightKind::F16)][I] = tile_interleaved_half<WeightKind::F16, I + 1>;
  });
}

KernelTable make_scalar() {
  KernelTable t;
  t.isa = "scalar";
  fill_tiles(t);
  t.quantize_q8_row = quantize_q8_row;
  t.quantize_q8k_row = quantize_q8k_row;
  t.f16_to_f32_row = f16_row;
  fill_kquant_scalar(t);
  fill_interleaved(t);
  fill_bf16_scalar(t);
  return t;
}

std::atomic<const KernelTable*> g_override{nullptr};

}  // namespace

const KernelTable& scalar_kernels() noexcept {
  static const KernelTable table = make_scalar();
  return table;
}

std::vector<const KernelTable*> available_kernels() {
  std::vector<const KernelTable*> tables;
  for (const KernelTable* t : {avx512_kernels(), avx2_kernels()})
    if (t != nullptr) tables.push_back(t);
  tables.push_back(&scalar_kernels());
  return tables;
}

const KernelTable& active_kernels() noexcept {
  if (const KernelTable* o = g_override.load(std::memory_order_acquire)) return *o;
  static const KernelTable* chosen = [] {
    const std::vector<const KernelTable*> tables = available_kernels();
    const std::optional<std::string> want = env_string("TESSERA_CPU_ISA");
    if (!want) return tables.front();
    std::string names;
    for (const KernelTable* t : tables) {
      if (*want == t->isa) return t;
      names += names.empty() ? t->isa : fmt::format(", {}", t->isa);
    }
    log(LogLevel::Warn, fmt::format("TESSERA_CPU_ISA='{}' is not one this CPU runs ({}); using {}", *want,
                                    names, tables.front()->isa));
    return tables.front();
  }();
  return *chosen;
}

ScopedKernelOverride::ScopedKernelOverride(const KernelTable* table) noexcept
    : previous_(g_override.exchange(table, std::memory_order_acq_rel)) {}

ScopedKernelOverride::~ScopedKernelOverride() { g_override.store(previous_, std::memory_order_release); }

}  // namespace tessera::cpu::mm
