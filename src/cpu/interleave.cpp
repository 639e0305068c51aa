// The interleaved weight layout (interleave.h) and the CPU buffer type that stores it.
#include "cpu/interleave.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

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

// Where block j of interleaved row r starts in the layout, and that row's lane in it.
inline char* group_block(char* base, const Geometry& g, int64_t r, int64_t j) {
  return base + static_cast<size_t>(r / kInterleaveRows) * kInterleaveRows * g.row_bytes +
         static_cast<size_t>(j) * kInterleaveRows * g.block_bytes;
}

bool is_half(DType type) noexcept { return type == DType::F16 || type == DType::BF16; }

// F16 / BF16: bytes [offset, offset + size) of t's ggml image from `from` (those bytes) into the
// layout at `to` (into_layout), or from the layout at `from` to `to`. One copy per piece
// (kHalfPiece elements of a row); a range may begin or end inside one, at any whole element.
void copy_halves(const Tensor& t, const char* from, size_t offset, size_t size, char* to, bool into_layout) {
  if (offset % 2 != 0 || size % 2 != 0)
    raise(ErrorCode::InvalidArgument, "{}: bytes [{}, {}) of {} split its 2-byte elements",
          into_layout ? "to_interleaved" : "from_interleaved", offset, offset + size, t.describe());
  const size_t row_bytes = t.row_size(), piece_bytes = 2 * kHalfPiece;
  const size_t grouped = static_cast<size_t>(interleaved_rows(t)) * row_bytes;
  // n bytes at layout_at in the layout <-> at image_at in the caller's bytes.
  const auto copy = [&](size_t layout_at, size_t image_at, size_t n) {
    if (into_layout)
      std::memcpy(to + layout_at, from + image_at, n);
    else
      std::memcpy(to + image_at, from + layout_at, n);
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

const Tensor& root_of(const Tensor& t) {
  const Tensor* r = &t;
  while (r->view_src != nullptr) r = r->view_src;
  return *r;
}

size_t offset_in_root(const Tensor& t, size_t offset, size_t size) {
  const Tensor& root = root_of(t);
  if (&root != &t && !t.is_contiguous())
    raise(ErrorCode::Unsupported, "CPU: bytes [{}, {}) of the strided view {} of interleaved weights", offset,
          offset + size, t.describe());
  return static_cast<size_t>(static_cast<const char*>(t.data) - static_cast<const char*>(root.data)) + offset;
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
    const Tensor& root = root_of(t);
    if (interleaved_rows(root) == 0) {
      std::memcpy(static_cast<char*>(t.data) + offset, src, size);
      return;
    }
    to_interleaved(root, src, offset_in_root(t, offset, size), size, root.data);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    const Tensor& root = root_of(t);
    if (interleaved_rows(root) == 0) {
      std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
      return;
    }
    from_interleaved(root, root.data, offset_in_root(t, offset, size), size, dst);
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
  if (!has_interleaved_layout(t.type) || t.view_src != nullptr || t.ne[2] != 1 || t.ne[3] != 1 ||
      !t.is_contiguous() || (is_half(t.type) && t.ne[0] % kHalfPiece != 0))
    return 0;
  return t.ne[1] / kInterleaveRows * kInterleaveRows;
}

void to_interleaved(const Tensor& t, const void* src, size_t offset, size_t size, void* base) {
  if (is_half(t.type))
    return copy_halves(t, static_cast<const char*>(src), offset, size, static_cast<char*>(base), true);
  check_blocks(t, offset, size, "to_interleaved");
  const Geometry g = geometry(t);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(base);
  for (size_t o = 0; o < size; o += g.block_bytes) {
    const int64_t b = static_cast<int64_t>((offset + o) / g.block_bytes);
    const int64_t r = b / g.blocks_per_row, j = b % g.blocks_per_row;
    const char* blk = in + o;
    if (r >= g.rows) {
      std::memcpy(out + offset + o, blk, g.block_bytes);
      continue;
    }
    char* at = group_block(out, g, r, j);
    const size_t lane = static_cast<size_t>(r % kInterleaveRows);
    std::memcpy(at + 2 * lane, blk, 2);
    for (size_t v = 0; v < g.words; ++v)
      std::memcpy(at + kScaleBytes + 32 * v + 4 * lane, blk + 2 + 4 * v, 4);
  }
}

void from_interleaved(const Tensor& t, const void* base, size_t offset, size_t size, void* dst) {
  if (is_half(t.type))
    return copy_halves(t, static_cast<const char*>(base), offset, size, static_cast<char*>(dst), false);
  check_blocks(t, offset, size, "from_interleaved");
  const Geometry g = geometry(t);
  auto* in = const_cast<char*>(static_cast<const char*>(base));
  auto* out = static_cast<char*>(dst);
  for (size_t o = 0; o < size; o += g.block_bytes) {
    const int64_t b = static_cast<int64_t>((offset + o) / g.block_bytes);
    const int64_t r = b / g.blocks_per_row, j = b % g.blocks_per_row;
    char* blk = out + o;
    if (r >= g.rows) {
      std::memcpy(blk, in + offset + o, g.block_bytes);
      continue;
    }
    const char* at = group_block(in, g, r, j);
    const size_t lane = static_cast<size_t>(r % kInterleaveRows);
    std::memcpy(blk, at + 2 * lane, 2);
    for (size_t v = 0; v < g.words; ++v)
      std::memcpy(blk + 2 + 4 * v, at + kScaleBytes + 32 * v + 4 * lane, 4);
  }
}

bool is_interleaved(const Tensor& t) noexcept {
  return t.buffer != nullptr && &t.buffer->type() == &interleaved_buffer_type() && interleaved_rows(t) > 0;
}

bool in_interleaved_layout(const Tensor& t) noexcept { return is_interleaved(root_of(t)); }

BufferType& interleaved_buffer_type() {
  static InterleavedBufferType type;
  return type;
}

}  // namespace tessera::cpu
