#pragma once
// The CPU's interleaved weight layout (rows interleaved by 8), what the buffer type of
// cpu::interleaved_buffer_type() stores: a matrix-vector pass then reads eight rows' blocks as one
// contiguous stream (and the Q4_0 / Q8_0 kernels get eight rows' dot products in the lanes of one
// register).
//
// For Q4_0 and Q8_0 2-D weights, each group of 8 consecutive rows keeps its 8 * row_size bytes, laid
// out block by block: block j of the group is the 8 rows' fp16 scales d (row l at byte 2l), then
// the quant bytes as 32-bit words, word v of row l at byte 16 + 32v + 4l (row l's qs[4v..4v + 3]:
// Q4_0 bytes keep their nibbles, element i low and i + 16 high).
// For F16 and BF16 2-D weights whose rows are a whole number of kHalfPiece-element pieces, piece j
// (elements 8j..8j + 7) of row l of a group is at byte 128j + 16l of the group: the same 8-lane
// loads as from ggml's rows, one stream instead of eight.
// Rows after the last whole group stay in ggml's blocks at their usual offsets. Same size as
// ggml's image; exact inverses. The layout is a WeightLayout (backend/weight_layout.h), the
// interface device buffers use too; the interleaved buffer type stores through it.
#include <cstddef>
#include <cstdint>

#include "tessera/tensor.h"

namespace tessera {
class WeightLayout;
}

namespace tessera::cpu {

inline constexpr int kInterleaveRows = 8;
inline constexpr int kHalfPiece = 8;  // F16 / BF16 elements of a row kept together

// F16 / BF16: the byte of element i of row l (0..7) of a group, from the group's start.
inline constexpr size_t half_offset_in_group(int64_t l, int64_t i) noexcept {
  constexpr size_t kPieceBytes = 2 * kHalfPiece;
  return static_cast<size_t>(i / kHalfPiece) * kInterleaveRows * kPieceBytes +
         static_cast<size_t>(l) * kPieceBytes + static_cast<size_t>(i % kHalfPiece) * 2;
}

// The types with an interleaved layout.
bool has_interleaved_layout(DType type) noexcept;

// Rows of t that the layout interleaves (whole groups of 8, counted over all its matrices); 0 for
// tensors it leaves in ggml's blocks: other types, views, tensors that are not contiguous, fewer
// than 8 rows. A 3-D tensor (a mixture of experts' matrices, one per i2) is interleaved whole when
// each matrix's rows are whole groups, so that every matrix starts a group at its ggml offset
// (i2 * nb[2]) and reads as a 2-D interleaved matrix from there; otherwise not at all.
int64_t interleaved_rows(const Tensor& t) noexcept;
// The rows of each matrix of t that are interleaved (the first ones; the rest are in ggml's blocks).
inline int64_t interleaved_rows_per_matrix(const Tensor& t) noexcept {
  return t.ne[2] > 1 ? (interleaved_rows(t) > 0 ? t.ne[1] : 0) : interleaved_rows(t);
}

// The interleaved layout: encodes exactly the tensors interleaved_rows() says.
const WeightLayout& interleaved_layout();

// Bytes [offset, offset + size) of t's ggml image (whole blocks) into / out of its layout at base.
void to_interleaved(const Tensor& t, const void* src, size_t offset, size_t size, void* base);
void from_interleaved(const Tensor& t, const void* base, size_t offset, size_t size, void* dst);

// True when t's data are in the interleaved layout (t lives in an interleaved buffer and the layout
// applies to it).
bool is_interleaved(const Tensor& t) noexcept;
// True when t or the tensor it views is: bytes other kernels cannot read as ggml's blocks.
bool in_interleaved_layout(const Tensor& t) noexcept;

}  // namespace tessera::cpu
