#pragma once
// Device weight layouts (OPS.md): a Q4_0 / Q8_0 tensor is stored as all its quant bytes, then
// all its fp16 scales in block order. Q8_0 quants are the 32 int8 of each block unchanged; Q4_0
// quants pair elements (2k, 2k+1) as low/high nibble, elements 0..15 then 16..31, xor 0x88
// (signed int4). The layout belongs to the tensor that owns the memory (a view's root), so any
// byte range of whole blocks of a tensor or a view maps to one quant range and one scale range.
#include <cstddef>
#include <cstdint>

#include "tessera/tensor.h"

namespace tessera::device {

// True for types stored in a device layout (Q4_0, Q8_0).
bool has_device_layout(DType type) noexcept;
// Quant bytes per block in the device layout (16 for Q4_0, 32 for Q8_0).
size_t layout_quant_bytes(DType type) noexcept;

// nblocks ggml blocks -> quants (nblocks * quant bytes) and scales (nblocks * 2 bytes), and back.
// Exact inverses; large conversions use several threads.
void to_device_layout(DType type, const void* blocks, int64_t nblocks, void* quants, void* scales);
void from_device_layout(DType type, const void* quants, const void* scales, int64_t nblocks, void* blocks);

// Where bytes [offset, offset + size) of tensor t's ggml image live in its root's device layout,
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

// Device addresses of t's first block's quants and scale (t may be a view of a laid-out root);
// block b of t (its ggml byte offset / block bytes) is at quants + b * quant bytes, scales + 2b.
struct QuantAddresses {
  char* quants = nullptr;
  char* scales = nullptr;
};
QuantAddresses quant_addresses(const Tensor& t);

}  // namespace tessera::device
