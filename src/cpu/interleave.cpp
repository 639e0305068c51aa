// The interleaved weight layout (interleave.h) and the CPU buffer type that stores it.
#include "cpu/interleave.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "backend/weight_layout.h"
#include "core/check.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"

namespace tessera::cpu {
namespace {

constexpr size_t kScaleBytes = 2 * kInterleaveRows;  // the group's fp16 scales before each block's quants

struct Geometry {
  size_t block_bytes;  // ggml's block
  size_t words;        // 32-bit quant words per block and row
  size_t row_bytes;
  int64_t blocks_per_row;
  int64_t rows;  // interleaved rows
};

Geometry geometry(const Tensor& t) {
  const size_t bb = traits(t.type).block_bytes;
  return {bb, (bb - 2) / 4, t.row_size(), t.ne[0] / traits(t.type).block_size, interleaved_rows(t)};
}

void check_blocks(const Tensor& t, size_t offset, size_t size, const char* what) {
  const size_t bb = traits(t.type).block_bytes;
  if (offset % bb != 0 || size % bb != 0)
    raise(ErrorCode::InvalidArgument, "{}: bytes [{}, {}) of {} split its {}-byte blocks", what, offset,
          offset + size, t.describe(), bb);
}

// Where block j of interleaved row r starts in the layout (from the tensor's start).
inline size_t group_block(const Geometry& g, int64_t r, int64_t j) {
  return static_cast<size_t>(r / kInterleaveRows) * kInterleaveRows * g.row_bytes +
         static_cast<size_t>(j) * kInterleaveRows * g.block_bytes;
}

bool is_half(DType type) noexcept { return type == DType::F16 || type == DType::BF16; }

// F16 / BF16: bytes [offset, offset + size) of t's ggml image (at `bytes`) into the layout through
// `image` (into_layout), or from the layout into `bytes`. One copy per piece (kHalfPiece elements
// of a row); a range may begin or end inside one, at any whole element.
void copy_halves(const Tensor& t, char* bytes, size_t offset, size_t size, const ImageWindow& image,
                 bool into_layout) {
  if (offset % 2 != 0 || size % 2 != 0)
    raise(ErrorCode::InvalidArgument, "{}: bytes [{}, {}) of {} split its 2-byte elements",
          into_layout ? "to_interleaved" : "from_interleaved", offset, offset + size, t.describe());
  const size_t row_bytes = t.row_size(), piece_bytes = 2 * kHalfPiece;
  const size_t grouped = static_cast<size_t>(interleaved_rows(t)) * row_bytes;
  // n bytes at layout_at in the layout <-> at image_at in the caller's bytes.
  const auto copy = [&](size_t layout_at, size_t image_at, size_t n) {
    if (into_layout)
      std::memcpy(image.at(layout_at), bytes + image_at, n);
    else
      std::memcpy(bytes + image_at, image.at(layout_at), n);
  };
  for (size_t o = offset, end = offset + size; o < end;) {
    if (o >= grouped) {  // rows after the last group: ggml's image
      copy(o, o - offset, end - o);
      break;
    }
    const size_t r = o / row_bytes, in_row = o % row_bytes;
    const size_t n = std::min(piece_bytes - in_row % piece_bytes, end - o);  // to the piece's end
    const size_t group = (r / kInterleaveRows) * kInterleaveRows * row_bytes;
    copy(group + half_offset_in_group(static_cast<int64_t>(r % kInterleaveRows),
                                      static_cast<int64_t>(in_row / 2)),
         o - offset, n);
    o += n;
  }
}

constexpr size_t kHugePage = size_t{2} << 20;

class InterleavedBuffer final : public Buffer {
 public:
  InterleavedBuffer(BufferType& type, size_t size) : Buffer(type, size) {
    memory_ = static_cast<char*>(::operator new (size, std::align_val_t{kHugePage}, std::nothrow));
    if (memory_ == nullptr)
      raise(ErrorCode::OutOfMemory, "CPU: cannot allocate {} bytes of interleaved weight memory", size);
      // Weights stream through once per token: 2 MiB pages spare the page walks (and let the hardware
      // prefetcher run past what would be 4 KiB page ends). Only advice: the kernel may say no.
#ifdef MADV_HUGEPAGE
    if (size >= kHugePage) madvise(memory_, (size + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  }
  ~InterleavedBuffer() override { ::operator delete (memory_, std::align_val_t{kHugePage}); }
  void* base() const override { return memory_; }
  // A view is a byte range of its root's ggml image (when contiguous), which the root's layout maps.
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    const Tensor& root = layout_root(t);
    if (!interleaved_layout().encodes(root)) {
      std::memcpy(static_cast<char*>(t.data) + offset, src, size);
      return;
    }
    interleaved_layout().encode(root, offset_in_root(t, offset, size), size, src,
                                ImageWindow::whole(static_cast<char*>(root.data)));
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    const Tensor& root = layout_root(t);
    if (!interleaved_layout().encodes(root)) {
      std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
      return;
    }
    interleaved_layout().decode(root, offset_in_root(t, offset, size), size,
                                ImageWindow::whole(static_cast<char*>(root.data)), dst);
  }
  void clear(uint8_t value) override { std::memset(memory_, value, size()); }

 private:
  char* memory_ = nullptr;
};

class InterleavedBufferType final : public BufferType {
 public:
  std::string name() const override { return "CPU_INTERLEAVED"; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    return std::make_unique<InterleavedBuffer>(*this, size);
  }
  size_t alignment() const override { return 64; }
  // Not ggml's blocks: kernels other than MUL_MAT's and other devices read the tensors through
  // Buffer::get (tensor_get), which gives ggml's image back.
  bool is_host() const override { return false; }
  Device* device() const override { return &cpu_device(); }
};

}  // namespace

bool has_interleaved_layout(DType type) noexcept {
  return type == DType::Q4_0 || type == DType::Q8_0 || is_half(type);
}

int64_t interleaved_rows(const Tensor& t) noexcept {
  if (!has_interleaved_layout(t.type) || t.view_src != nullptr || t.ne[3] != 1 || !t.is_contiguous() ||
      (is_half(t.type) && t.ne[0] % kHalfPiece != 0))
    return 0;
  if (t.ne[2] != 1)  // experts: whole groups in every matrix, or none
    return t.ne[1] % kInterleaveRows == 0 ? t.ne[1] * t.ne[2] : 0;
  return t.ne[1] / kInterleaveRows * kInterleaveRows;
}

namespace {

// Bytes [offset, offset + size) of t's ggml image (whole blocks) into / out of its layout.
void encode_blocks(const Tensor& t, const char* in, size_t offset, size_t size, const ImageWindow& image) {
  check_blocks(t, offset, size, "to_interleaved");
  const Geometry g = geometry(t);
  for (size_t o = 0; o < size; o += g.block_bytes) {
    const int64_t b = static_cast<int64_t>((offset + o) / g.block_bytes);
    const int64_t r = b / g.blocks_per_row, j = b % g.blocks_per_row;
    const char* blk = in + o;
    if (r >= g.rows) {
      std::memcpy(image.at(offset + o), blk, g.block_bytes);
      continue;
    }
    char* at = image.at(group_block(g, r, j));
    const size_t lane = static_cast<size_t>(r % kInterleaveRows);
    std::memcpy(at + 2 * lane, blk, 2);
    for (size_t v = 0; v < g.words; ++v)
      std::memcpy(at + kScaleBytes + 32 * v + 4 * lane, blk + 2 + 4 * v, 4);
  }
}

void decode_blocks(const Tensor& t, const ImageWindow& image, size_t offset, size_t size, char* out) {
  check_blocks(t, offset, size, "from_interleaved");
  const Geometry g = geometry(t);
  for (size_t o = 0; o < size; o += g.block_bytes) {
    const int64_t b = static_cast<int64_t>((offset + o) / g.block_bytes);
    const int64_t r = b / g.blocks_per_row, j = b % g.blocks_per_row;
    char* blk = out + o;
    if (r >= g.rows) {
      std::memcpy(blk, image.at(offset + o), g.block_bytes);
      continue;
    }
    const char* at = image.at(group_block(g, r, j));
    const size_t lane = static_cast<size_t>(r % kInterleaveRows);
    std::memcpy(blk, at + 2 * lane, 2);
    for (size_t v = 0; v < g.words; ++v)
      std::memcpy(blk + 2 + 4 * v, at + kScaleBytes + 32 * v + 4 * lane, 4);
  }
}

// The layout as a WeightLayout: what the interleaved buffer stores, through the same interface as
// the device layer's buffers use.
class InterleavedLayout final : public WeightLayout {
 public:
  std::string name() const override { return "CPU interleaved by 8 rows"; }
  bool encodes(const Tensor& root) const override { return interleaved_rows(root) > 0; }
  size_t unit(const Tensor& root) const override {
    return is_half(root.type) ? 2 : traits(root.type).block_bytes;
  }
  // The whole groups of 8 rows the range touches (a group's rows share its bytes), and the range
  // itself past the last group.
  std::vector<ImageSpan> spans(const Tensor& root, size_t offset, size_t size) const override {
    if (size == 0 || !encodes(root)) return {{offset, size}};
    const size_t group_bytes = kInterleaveRows * root.row_size();
    const size_t grouped = static_cast<size_t>(interleaved_rows(root)) * root.row_size();
    const size_t end = offset + size;
    const size_t begin = offset < grouped ? offset / group_bytes * group_bytes : offset;
    const size_t stop =
        end > grouped ? end : std::min(grouped, (end - 1) / group_bytes * group_bytes + group_bytes);
    return {{begin, stop - begin}};
  }
  bool encode_fills_spans() const override { return false; }
  void encode(const Tensor& root, size_t offset, size_t size, const void* ggml,
              const ImageWindow& image) const override {
    auto* in = const_cast<char*>(static_cast<const char*>(ggml));
    if (is_half(root.type)) return copy_halves(root, in, offset, size, image, true);
    encode_blocks(root, in, offset, size, image);
  }
  void decode(const Tensor& root, size_t offset, size_t size, const ImageWindow& image,
              void* ggml) const override {
    if (is_half(root.type)) return copy_halves(root, static_cast<char*>(ggml), offset, size, image, false);
    decode_blocks(root, image, offset, size, static_cast<char*>(ggml));
  }
};

}  // namespace

const WeightLayout& interleaved_layout() {
  static const InterleavedLayout layout;
  return layout;
}

void to_interleaved(const Tensor& t, const void* src, size_t offset, size_t size, void* base) {
  interleaved_layout().encode(t, offset, size, src, ImageWindow::whole(static_cast<char*>(base)));
}

void from_interleaved(const Tensor& t, const void* base, size_t offset, size_t size, void* dst) {
  interleaved_layout().decode(t, offset, size,
                              ImageWindow::whole(const_cast<char*>(static_cast<const char*>(base))), dst);
}

bool is_interleaved(const Tensor& t) noexcept {
  return t.buffer != nullptr && &t.buffer->type() == &interleaved_buffer_type() && interleaved_rows(t) > 0;
}

bool in_interleaved_layout(const Tensor& t) noexcept { return is_interleaved(layout_root(t)); }

BufferType& interleaved_buffer_type() {
  static InterleavedBufferType type;
  return type;
}

}  // namespace tessera::cpu
