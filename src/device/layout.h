#pragma once
// Weight formats: how a runtime's kernels want quantized weights in device memory. Each runtime's
// op library declares one (WeightFormat): per type either ggml's native blocks, or the split
// device layout (OPS.md, from CANN), where a Q4_0 / Q8_0 tensor is stored as all its quant bytes,
// then all its fp16 scales in block order. Q8_0 quants are the 32 int8 of each block unchanged; Q4_0
// quants pair elements (2k, 2k+1) as low/high nibble, elements 0..15 then 16..31, xor 0x88
// (signed int4). The layout belongs to the tensor that owns the memory (a view's root), so any
// byte range of whole blocks of a tensor or a view maps to one quant range and one scale range.
#include <array>
#include <cstddef>
#include <cstdint>

#include "tessera/tensor.h"

namespace tessera::device {

enum class BlockLayout : uint8_t {
  Native,  // ggml's blocks, byte for byte
  Split,   // the device layout: all quants, then all scales (Q4_0 and Q8_0 only)
};

// What a runtime's kernels read. Row padding: a quantized tensor whose rows are not a multiple of
// `row_padding` elements gets, after its last byte (after the scales in the split layout), the
// bytes of the elements that would pad one row to that multiple, zeroed at init_tensor. Rows keep
// ggml's strides: this is slack after the tensor, not padding inside each row.
struct WeightFormat {
  std::array<BlockLayout, kDTypeCount> layout{};  // Native for every type unless set
  int64_t row_padding = 1;                        // 1 = no slack

  BlockLayout of(DType type) const noexcept { return layout[static_cast<size_t>(type)]; }
  bool split(DType type) const noexcept { return of(type) == BlockLayout::Split; }
  // Bytes a tensor of this shape and type takes in this format (its ggml bytes plus the slack).
  size_t alloc_size(const Tensor& t) const noexcept;

  // ggml blocks as they are, no slack: what CPU kernels read.
  static WeightFormat native() noexcept { return {}; }
  // The CANN design's: Q4_0 and Q8_0 split, slack to a multiple of 512 elements; every other type
  // (Q4_1 .. IQ4_XS) in native blocks, which kernels decode 32 elements at a time: their scales
  // sit inside groups of 16 or 32 within a block, so splitting them off would not give the
  // contiguous quant runs that make the split layout pay for Q4_0 / Q8_0.
  static WeightFormat split_q4_q8() noexcept;
};

// True for the types the split layout is defined for (Q4_0, Q8_0).
bool has_split_layout(DType type) noexcept;
// Quant bytes per block in the split layout (16 for Q4_0, 32 for Q8_0).
size_t layout_quant_bytes(DType type) noexcept;

// nblocks ggml blocks -> quants (nblocks * quant bytes) and scales (nblocks * 2 bytes), and back.
// Exact inverses; large conversions use several threads.
void to_device_layout(DType type, const void* blocks, int64_t nblocks, void* quants, void* scales);
void from_device_layout(DType type, const void* quants, const void* scales, int64_t nblocks, void* blocks);

// Where bytes [offset, offset + size) of tensor t's ggml image live in its root's split layout,
// as byte offsets from the root's data. Throws Error when the range splits a block.
struct LayoutRange {
  int64_t first_block = 0;
  int64_t nblocks = 0;
  size_t quant_offset = 0;
  size_t quant_size = 0;
  size_t scale_offset = 0;
  size_t scale_size = 0;
};
LayoutRange layout_range(const Tensor& t, size_t offset, size_t size);

// Device addresses of t's first block's quants and scale in the split layout (t may be a view of a
// laid-out root);
// block b of t (its ggml byte offset / block bytes) is at quants + b * quant bytes, scales + 2b.
struct QuantAddresses {
  char* quants = nullptr;
  char* scales = nullptr;
};
QuantAddresses quant_addresses(const Tensor& t);

}  // namespace tessera::device
