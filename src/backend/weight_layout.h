#pragma once
// Weight layouts: how a kind of memory stores tensors when its kernels want something other than
// ggml's blocks. A layout says how many bytes a tensor takes (slack after it), which tensors it
// re-lays, where a byte range of a tensor's ggml image lives in the stored image (its spans), and
// converts ranges both ways, exactly (decode(encode(x)) == x for any range of whole units, e.g.
// blocks). Buffers that store a layout (the device layer's device buffers, the CPU's interleaved
// buffer type) only call this interface, so a runtime adds a layout without editing them: the
// OpenCL runtime's split Q4_0/Q8_0 layout (device/split_layout.h), the CPU's rows interleaved by 8
// (cpu/interleave.h). A layout belongs to the tensor that owns the memory (a view's root): a
// view's bytes are a range of its root's ggml image.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

// Bytes [offset, offset + size) of a root tensor's stored image, from the root's data.
struct ImageSpan {
  size_t offset = 0;
  size_t size = 0;
};

// Host memory through which a layout reads or writes a stored image: the image itself (a buffer
// in host memory), or copies of some of its spans placed back to back (a device's staging).
class ImageWindow {
 public:
  static ImageWindow whole(char* base) noexcept {
    ImageWindow w;
    w.base_ = base;
    return w;
  }
  ImageWindow(std::span<const ImageSpan> spans, char* staging) noexcept : spans_(spans), staging_(staging) {}
  // The host address of stored byte `image_offset`; a write or read from there stays inside the
  // span that holds it.
  char* at(size_t image_offset) const noexcept;

 private:
  ImageWindow() = default;
  char* base_ = nullptr;
  std::span<const ImageSpan> spans_;
  char* staging_ = nullptr;
};

class WeightLayout {
 public:
  virtual ~WeightLayout() = default;
  virtual std::string name() const = 0;
  // Bytes tensor t takes in memory of this layout: its ggml bytes plus any slack after them.
  virtual size_t alloc_size(const Tensor& t) const { return t.nbytes(); }
  // True when root's stored bytes differ from its ggml image (else they are copied as they are).
  virtual bool encodes(const Tensor& root) const = 0;
  // The smallest range a conversion of root takes, in bytes of its ggml image (its block).
  virtual size_t unit(const Tensor& root) const;
  // The stored spans holding ggml bytes [offset, offset + size) of root, ascending and disjoint.
  // Throws Error when the range splits a unit.
  virtual std::vector<ImageSpan> spans(const Tensor& root, size_t offset, size_t size) const = 0;
  // True when encoding a range writes every byte of its spans; else a partial range shares them
  // with other bytes, which must be in the window (read first) when it is encoded.
  virtual bool encode_fills_spans() const { return true; }
  // ggml bytes [offset, offset + size) of root, from `ggml`, into the stored image through `image`
  // (which holds the range's spans), and back. Exact inverses.
  virtual void encode(const Tensor& root, size_t offset, size_t size, const void* ggml,
                      const ImageWindow& image) const = 0;
  virtual void decode(const Tensor& root, size_t offset, size_t size, const ImageWindow& image,
                      void* ggml) const = 0;
};

// ggml's bytes as they are, no slack.
const WeightLayout& native_layout();

// The tensor whose memory t is (t, or the one it views).
const Tensor& layout_root(const Tensor& t) noexcept;
// Where bytes [offset, offset + size) of t's ggml image are in its root's: a contiguous view of the
// root's type (its bytes are a range of the root's image). Throws Error for any other view.
size_t offset_in_root(const Tensor& t, size_t offset, size_t size);
// The total bytes of spans.
size_t span_bytes(std::span<const ImageSpan> spans) noexcept;

}  // namespace tessera
