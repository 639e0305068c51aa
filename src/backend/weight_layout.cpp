#include "backend/weight_layout.h"

#include <cstring>

#include "core/check.h"
#include "tessera/error.h"

namespace tessera {
namespace {

class NativeLayout final : public WeightLayout {
 public:
  std::string name() const override { return "native"; }
  bool encodes(const Tensor&) const override { return false; }
  std::vector<ImageSpan> spans(const Tensor&, size_t offset, size_t size) const override {
    return {{offset, size}};
  }
  void encode(const Tensor&, size_t offset, size_t size, const void* ggml,
              const ImageWindow& image) const override {
    std::memcpy(image.at(offset), ggml, size);
  }
  void decode(const Tensor&, size_t offset, size_t size, const ImageWindow& image,
              void* ggml) const override {
    std::memcpy(ggml, image.at(offset), size);
  }
};

}  // namespace

char* ImageWindow::at(size_t image_offset) const noexcept {
  if (base_ != nullptr) return base_ + image_offset;
  size_t staged = 0;
  for (const ImageSpan& s : spans_) {
    if (image_offset >= s.offset && image_offset < s.offset + s.size)
      return staging_ + staged + (image_offset - s.offset);
    staged += s.size;
  }
  TESSERA_ASSERT(!"ImageWindow: the byte is in none of the window's spans");
  return nullptr;
}

size_t WeightLayout::unit(const Tensor& root) const { return traits(root.type).block_bytes; }

const WeightLayout& native_layout() {
  static const NativeLayout layout;
  return layout;
}

const Tensor& layout_root(const Tensor& t) noexcept {
  const Tensor* r = &t;
  while (r->view_src != nullptr) r = r->view_src;
  return *r;
}

size_t offset_in_root(const Tensor& t, size_t offset, size_t size) {
  const Tensor& root = layout_root(t);
  if (&root == &t) return offset;
  if (root.type != t.type)
    raise(ErrorCode::Unsupported, "weight layout: {} views {} memory of another type", t.describe(),
          root.describe());
  if (!t.is_contiguous())
    raise(ErrorCode::Unsupported, "weight layout: bytes [{}, {}) of the strided view {} of re-laid weights",
          offset, offset + size, t.describe());
  return static_cast<size_t>(static_cast<const char*>(t.data) - static_cast<const char*>(root.data)) + offset;
}

size_t span_bytes(std::span<const ImageSpan> spans) noexcept {
  size_t n = 0;
  for (const ImageSpan& s : spans) n += s.size;
  return n;
}

}  // namespace tessera
