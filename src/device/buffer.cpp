#include "device/buffer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"

namespace tessera::device {
namespace {

// Layout conversions go through host memory in pieces of about this many ggml bytes.
constexpr size_t kChunkBytes = size_t{64} << 20;

char* at(void* base, size_t offset) { return static_cast<char*>(base) + offset; }
const char* at(const void* base, size_t offset) { return static_cast<const char*>(base) + offset; }

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (t.data == nullptr) raise(ErrorCode::InvalidArgument, "{}: tensor {} has no memory", what, t.describe());
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    raise(ErrorCode::InvalidArgument, "{}: range [{}, {}) is outside tensor {} of {} bytes", what, offset,
          offset + size, t.describe(), t.nbytes());
}

// The root tensor's data (the stored image's origin).
char* root_data(const Tensor& t) { return static_cast<char*>(layout_root(t).data); }

class PinnedBuffer final : public Buffer {
 public:
  PinnedBuffer(BufferType& type, size_t size, Runtime& runtime, int device, void* memory)
      : Buffer(type, size), runtime_(&runtime), device_(device), memory_(memory) {}
  ~PinnedBuffer() override { runtime_->host_free(device_, memory_); }
  void* base() const override { return memory_; }
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    std::memcpy(at(t.data, offset), src, size);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    std::memcpy(dst, at(t.data, offset), size);
  }
  bool copy_from(const Tensor& src, Tensor& dst) override {
    if (src.buffer != nullptr && !src.buffer->type().is_host()) return false;
    if (src.data == nullptr || src.nbytes() != dst.nbytes()) return false;
    std::memcpy(dst.data, src.data, src.nbytes());
    return true;
  }
  void clear(uint8_t value) override { std::memset(memory_, value, size()); }

 private:
  Runtime* runtime_;
  int device_;
  void* memory_;
};

}  // namespace

// ---------------------------------------------------------------- device buffer type

DeviceBufferType::DeviceBufferType(Runtime& runtime, int device, Device* owner, const WeightLayout& layout)
    : runtime_(&runtime), device_(device), owner_(owner), layout_(&layout) {}

std::string DeviceBufferType::name() const { return runtime_->properties(device_).name; }

std::unique_ptr<Buffer> DeviceBufferType::allocate(size_t size) {
  void* memory = runtime_->allocate(device_, std::max<size_t>(size, 1));
  return std::make_unique<DeviceBuffer>(*this, size, memory);
}

size_t DeviceBufferType::alignment() const {
  return std::max<size_t>(128, runtime_->properties(device_).base_alignment);
}

size_t DeviceBufferType::max_size() const { return runtime_->properties(device_).max_allocation; }

size_t DeviceBufferType::alloc_size(const Tensor& t) const { return layout_->alloc_size(t); }

// ---------------------------------------------------------------- device buffer

DeviceBuffer::DeviceBuffer(DeviceBufferType& type, size_t size, void* memory)
    : Buffer(type, size),
      runtime_(&type.runtime()),
      device_(type.device_index()),
      layout_(&type.weight_layout()),
      memory_(memory) {}

DeviceBuffer::~DeviceBuffer() { runtime_->free(device_, memory_); }

void DeviceBuffer::init_tensor(Tensor& t) {
  if (t.view_src != nullptr) return;
  const size_t bytes = t.nbytes(), padded = type().alloc_size(t);
  if (padded > bytes) runtime_->fill(device_, at(t.data, bytes), 0, padded - bytes);
}

void DeviceBuffer::set(Tensor& t, const void* src, size_t offset, size_t size) {
  check_range(t, offset, size, "set");
  if (size == 0) return;
  const Tensor& root = layout_root(t);
  if (!layout_->encodes(root)) {
    runtime_->copy_h2d(device_, at(t.data, offset), src, size);
    return;
  }
  const size_t start = offset_in_root(t, offset, size);
  const size_t unit = layout_->unit(root), chunk = std::max(unit, kChunkBytes / unit * unit);
  char* base = root_data(t);
  std::vector<char> staging;
  for (size_t done = 0; done < size; done += chunk) {
    const size_t n = std::min(chunk, size - done);
    const auto spans = layout_->spans(root, start + done, n);
    staging.resize(span_bytes(spans));
    size_t pos = 0;
    if (!layout_->encode_fills_spans())  // the rest of the spans' bytes stay as they are
      for (const ImageSpan& sp : spans) {
        runtime_->copy_d2h(device_, staging.data() + pos, base + sp.offset, sp.size);
        pos += sp.size;
      }
    layout_->encode(root, start + done, n, at(src, done), ImageWindow(spans, staging.data()));
    pos = 0;
    for (const ImageSpan& sp : spans) {
      runtime_->copy_h2d(device_, base + sp.offset, staging.data() + pos, sp.size);
      pos += sp.size;
    }
  }
}

void DeviceBuffer::get(const Tensor& t, void* dst, size_t offset, size_t size) const {
  check_range(t, offset, size, "get");
  if (size == 0) return;
  const Tensor& root = layout_root(t);
  if (!layout_->encodes(root)) {
    runtime_->copy_d2h(device_, dst, at(t.data, offset), size);
    return;
  }
  const size_t start = offset_in_root(t, offset, size);
  const size_t unit = layout_->unit(root), chunk = std::max(unit, kChunkBytes / unit * unit);
  const char* base = root_data(t);
  std::vector<char> staging;
  for (size_t done = 0; done < size; done += chunk) {
    const size_t n = std::min(chunk, size - done);
    const auto spans = layout_->spans(root, start + done, n);
    staging.resize(span_bytes(spans));
    size_t pos = 0;
    for (const ImageSpan& sp : spans) {
      runtime_->copy_d2h(device_, staging.data() + pos, base + sp.offset, sp.size);
      pos += sp.size;
    }
    layout_->decode(root, start + done, n, ImageWindow(spans, staging.data()), at(dst, done));
  }
}

bool DeviceBuffer::copy_from(const Tensor& src, Tensor& dst) {
  if (src.type != dst.type || src.nbytes() != dst.nbytes() || src.data == nullptr) return false;
  const size_t n = src.nbytes();
  if (n == 0) return true;
  if (src.buffer == nullptr || src.buffer->type().is_host()) {
    set(dst, src.data, 0, n);
    return true;
  }
  DeviceBuffer* from = device_buffer_of(src);
  if (from == nullptr || &from->runtime() != runtime_) return false;

  const int sdev = from->device_index();
  if (layout_->encodes(layout_root(src)) && (src.view_src != nullptr || dst.view_src != nullptr)) {
    // A view's blocks are not one byte range of the layout: convert through the host.
    std::vector<char> staging(n);
    from->get(src, staging.data(), 0, n);
    set(dst, staging.data(), 0, n);
    return true;
  }
  // Same type and byte size: the images (ggml or device layout) are byte-identical.
  if (sdev == device_ || runtime_->can_access_peer(device_, sdev)) {
    runtime_->copy_d2d(device_, dst.data, sdev, src.data, n);
    return true;
  }
  void* pinned = runtime_->host_alloc(sdev, n);
  try {
    runtime_->copy_d2h(sdev, pinned, src.data, n);
    runtime_->copy_h2d(device_, dst.data, pinned, n);
  } catch (...) {
    runtime_->host_free(sdev, pinned);
    throw;
  }
  runtime_->host_free(sdev, pinned);
  return true;
}

void DeviceBuffer::clear(uint8_t value) { runtime_->fill(device_, memory_, value, size()); }

DeviceBuffer* device_buffer_of(const Tensor& t) noexcept {
  const Tensor& root = t.view_src != nullptr ? *t.view_src : t;
  return dynamic_cast<DeviceBuffer*>(root.buffer);
}

// ---------------------------------------------------------------- pinned host buffers

PinnedBufferType::PinnedBufferType(Runtime& runtime, int device, Device* owner)
    : runtime_(&runtime), device_(device), owner_(owner) {}

std::string PinnedBufferType::name() const { return runtime_->properties(device_).name + "_Host"; }

std::unique_ptr<Buffer> PinnedBufferType::allocate(size_t size) {
  void* memory = runtime_->host_alloc(device_, std::max<size_t>(size, 1));
  return std::make_unique<PinnedBuffer>(*this, size, *runtime_, device_, memory);
}

}  // namespace tessera::device
