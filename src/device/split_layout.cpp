#include "device/split_layout.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>
#include <vector>

#include "core/check.h"
#include "tessera/quant.h"

namespace tessera::device {
namespace {

static_assert(std::endian::native == std::endian::little, "the layout code packs bytes little-endian");

constexpr uint64_t kLowNibbles = 0x0F0F0F0F0F0F0F0Full;
constexpr uint64_t kFlip = 0x8888888888888888ull;  // unsigned 4-bit -> signed int4, both nibbles

// 8 nibble-sized bytes b0..b7 -> 4 bytes (b0 | b1 << 4), (b2 | b3 << 4), ...
inline uint32_t pack_pairs(uint64_t x) {
  uint64_t y = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
  y = (y | (y >> 8)) & 0x0000FFFF0000FFFFull;
  y = (y | (y >> 16)) & 0x00000000FFFFFFFFull;
  return static_cast<uint32_t>(y);
}

// Inverse of pack_pairs.
inline uint64_t unpack_pairs(uint32_t w) {
  uint64_t z = w;
  z = (z | (z << 16)) & 0x0000FFFF0000FFFFull;
  z = (z | (z << 8)) & 0x00FF00FF00FF00FFull;
  return (z & 0x000F000F000F000Full) | ((z & 0x00F000F000F000F0ull) << 4);
}

void q4_to_device(const BlockQ4_0* src, int64_t n, uint8_t* quants, uint16_t* scales) {
  for (int64_t b = 0; b < n; ++b) {
    uint64_t a, c;  // qs[0..7], qs[8..15]
    std::memcpy(&a, src[b].qs, 8);
    std::memcpy(&c, src[b].qs + 8, 8);
    // Elements 0..15 are the low nibbles, 16..31 the high nibbles, each in qs order.
    const uint64_t lo = static_cast<uint64_t>(pack_pairs(a & kLowNibbles)) |
                        static_cast<uint64_t>(pack_pairs(c & kLowNibbles)) << 32;
    const uint64_t hi = static_cast<uint64_t>(pack_pairs((a >> 4) & kLowNibbles)) |
                        static_cast<uint64_t>(pack_pairs((c >> 4) & kLowNibbles)) << 32;
    const uint64_t out[2] = {lo ^ kFlip, hi ^ kFlip};
    std::memcpy(quants + 16 * b, out, 16);
    scales[b] = src[b].d;
  }
}

void q4_from_device(const uint8_t* quants, const uint16_t* scales, int64_t n, BlockQ4_0* dst) {
  for (int64_t b = 0; b < n; ++b) {
    uint64_t v[2];
    std::memcpy(v, quants + 16 * b, 16);
    const uint64_t lo = v[0] ^ kFlip, hi = v[1] ^ kFlip;
    const uint64_t a = unpack_pairs(static_cast<uint32_t>(lo)) | unpack_pairs(static_cast<uint32_t>(hi)) << 4;
    const uint64_t c =
        unpack_pairs(static_cast<uint32_t>(lo >> 32)) | unpack_pairs(static_cast<uint32_t>(hi >> 32)) << 4;
    std::memcpy(dst[b].qs, &a, 8);
    std::memcpy(dst[b].qs + 8, &c, 8);
    dst[b].d = scales[b];
  }
}

void q8_to_device(const BlockQ8_0* src, int64_t n, uint8_t* quants, uint16_t* scales) {
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(quants + 32 * b, src[b].qs, 32);
    scales[b] = src[b].d;
  }
}

void q8_from_device(const uint8_t* quants, const uint16_t* scales, int64_t n, BlockQ8_0* dst) {
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(dst[b].qs, quants + 32 * b, 32);
    dst[b].d = scales[b];
  }
}

// Runs fn(begin, end) over [0, n) blocks, on several threads when n is large.
template <typename Fn>
void for_blocks(int64_t n, Fn fn) {
  constexpr int64_t kPerThread = int64_t{1} << 15;  // ~0.5 MiB of blocks: below that threads cost more
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t nth = std::min<int64_t>({hw, 8, n / kPerThread});
  if (nth <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> threads;
  const int64_t per = (n + nth - 1) / nth;
  for (int64_t t = 1; t < nth; ++t) {
    const int64_t begin = t * per, end = std::min(n, begin + per);
    if (begin < end) threads.emplace_back([=] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, per));
  for (auto& th : threads) th.join();
}

}  // namespace

bool has_split_layout(DType type) noexcept { return type == DType::Q4_0 || type == DType::Q8_0; }

size_t layout_quant_bytes(DType type) noexcept {
  switch (type) {
    case DType::Q4_0:
      return 16;
    case DType::Q8_0:
      return 32;
    default:
      return 0;
  }
}

void to_device_layout(DType type, const void* blocks, int64_t nblocks, void* quants, void* scales) {
  TESSERA_ASSERT(has_split_layout(type));
  auto* q = static_cast<uint8_t*>(quants);
  auto* s = static_cast<uint16_t*>(scales);
  if (type == DType::Q4_0) {
    const auto* src = static_cast<const BlockQ4_0*>(blocks);
    for_blocks(nblocks, [&](int64_t b, int64_t e) { q4_to_device(src + b, e - b, q + 16 * b, s + b); });
  } else {
    const auto* src = static_cast<const BlockQ8_0*>(blocks);
    for_blocks(nblocks, [&](int64_t b, int64_t e) { q8_to_device(src + b, e - b, q + 32 * b, s + b); });
  }
}

void from_device_layout(DType type, const void* quants, const void* scales, int64_t nblocks, void* blocks) {
  TESSERA_ASSERT(has_split_layout(type));
  const auto* q = static_cast<const uint8_t*>(quants);
  const auto* s = static_cast<const uint16_t*>(scales);
  if (type == DType::Q4_0) {
    auto* dst = static_cast<BlockQ4_0*>(blocks);
    for_blocks(nblocks, [&](int64_t b, int64_t e) { q4_from_device(q + 16 * b, s + b, e - b, dst + b); });
  } else {
    auto* dst = static_cast<BlockQ8_0*>(blocks);
    for_blocks(nblocks, [&](int64_t b, int64_t e) { q8_from_device(q + 32 * b, s + b, e - b, dst + b); });
  }
}

namespace {

const Tensor& split_root(const Tensor& t) {
  const Tensor& root = layout_root(t);
  if (root.type != t.type)
    raise(ErrorCode::Unsupported, "device layout: {} views {} memory of another type", t.describe(),
          root.describe());
  return root;
}

}  // namespace

LayoutRange layout_range(const Tensor& t, size_t offset, size_t size) {
  TESSERA_ASSERT(has_split_layout(t.type));
  const Tensor& root = split_root(t);
  const size_t bb = traits(t.type).block_bytes, qb = layout_quant_bytes(t.type);
  const size_t start = (t.view_src != nullptr ? t.view_offset : 0) + offset;
  if (start % bb != 0 || size % bb != 0)
    raise(ErrorCode::InvalidArgument,
          "{}: byte range [{}, {}) splits a {}-byte {} block (device layouts move whole blocks)",
          t.describe(), offset, offset + size, bb, name(t.type));
  const auto root_blocks = static_cast<int64_t>(root.nbytes() / bb);
  LayoutRange r;
  r.first_block = static_cast<int64_t>(start / bb);
  r.nblocks = static_cast<int64_t>(size / bb);
  TESSERA_ASSERT(r.first_block + r.nblocks <= root_blocks);
  r.quant_offset = static_cast<size_t>(r.first_block) * qb;
  r.quant_size = static_cast<size_t>(r.nblocks) * qb;
  r.scale_offset = static_cast<size_t>(root_blocks) * qb + static_cast<size_t>(r.first_block) * 2;
  r.scale_size = static_cast<size_t>(r.nblocks) * 2;
  return r;
}

QuantAddresses quant_addresses(const Tensor& t) {
  const Tensor& root = split_root(t);
  const LayoutRange r = layout_range(t, 0, 0);
  char* base = static_cast<char*>(root.data);
  return {base + r.quant_offset, base + r.scale_offset};
}

// ---------------------------------------------------------------- the WeightLayout

bool SplitLayout::splits(DType type) const noexcept { return has_split_layout(type); }

size_t SplitLayout::alloc_size(const Tensor& t) const {
  size_t bytes = t.nbytes();
  if (row_padding_ > 1 && is_quantized(t.type) && t.ne[0] % row_padding_ != 0)
    bytes += row_bytes(t.type, row_padding_ - t.ne[0] % row_padding_);
  return bytes;
}

bool SplitLayout::encodes(const Tensor& root) const { return splits(root.type); }

std::vector<ImageSpan> SplitLayout::spans(const Tensor& root, size_t offset, size_t size) const {
  const LayoutRange r = layout_range(root, offset, size);
  return {{r.quant_offset, r.quant_size}, {r.scale_offset, r.scale_size}};
}

void SplitLayout::encode(const Tensor& root, size_t offset, size_t size, const void* ggml,
                         const ImageWindow& image) const {
  const LayoutRange r = layout_range(root, offset, size);
  if (r.nblocks == 0) return;
  to_device_layout(root.type, ggml, r.nblocks, image.at(r.quant_offset), image.at(r.scale_offset));
}

void SplitLayout::decode(const Tensor& root, size_t offset, size_t size, const ImageWindow& image,
                         void* ggml) const {
  const LayoutRange r = layout_range(root, offset, size);
  if (r.nblocks == 0) return;
  from_device_layout(root.type, image.at(r.quant_offset), image.at(r.scale_offset), r.nblocks, ggml);
}

}  // namespace tessera::device
