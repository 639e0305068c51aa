#pragma once
// The split layout (OPS.md, from CANN's design), one WeightLayout (backend/weight_layout.h) a
// runtime may give its op library: a Q4_0 / Q8_0 tensor is stored as all its quant bytes, then
// all its fp16 scales in block order. Q8_0 quants are the 32 int8 of each block unchanged; Q4_0
// quants pair elements (2k, 2k+1) as low/high nibble, elements 0..15 then 16..31, xor 0x88
// (signed int4). Any byte range of whole blocks of a tensor or a view maps to one quant range and
// one scale range of its root. Every other type keeps ggml's blocks. Row slack: a quantized
// tensor whose rows are not a multiple of `row_padding` elements gets, after its last byte, the
// bytes of the elements that would pad one row to that multiple (zeroed at init_tensor); rows keep
// ggml's strides. The device layer itself names no layout: OpenCL uses this one.
#include <cstddef>
#include <cstdint>

#include "backend/weight_layout.h"
#include "tessera/tensor.h"

namespace tessera::device {

class SplitLayout final : public WeightLayout {
 public:
  // row_padding 512: OpenCL's kernels read whole 512-element pieces of a row.
  explicit SplitLayout(int64_t row_padding = 512) noexcept : row_padding_(row_padding) {}
  std::string name() const override { return "split Q4_0/Q8_0"; }
  size_t alloc_size(const Tensor& t) const override;
  bool encodes(const Tensor& root) const override;
  std::vector<ImageSpan> spans(const Tensor& root, size_t offset, size_t size) const override;
  void encode(const Tensor& root, size_t offset, size_t size, const void* ggml,
              const ImageWindow& image) const override;
  void decode(const Tensor& root, size_t offset, size_t size, const ImageWindow& image,
              void* ggml) const override;
  // True for the types this layout splits (what kernels read through quant_addresses).
  bool splits(DType type) const noexcept;

 private:
  int64_t row_padding_;
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
