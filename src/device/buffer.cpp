#include "device/buffer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "device/layout.h"

namespace tessera::device {
namespace {

// Layout conversions go through host memory in pieces of this many blocks (bounded temporaries).
constexpr int64_t kChunkBlocks = int64_t{1} << 20;

char* at(void* base, size_t offset) { return static_cast<char*>(base) + offset; }
const char* at(const void* base, size_t offset) { return static_cast<const char*>(base) + offset; }

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (t.data == nullptr) raise(ErrorCode::InvalidArgument, "{}: tensor {} has no memory", what, t.describe());
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    raise(ErrorCode::InvalidArgument, "{}: range [{}, {}) is outside tensor {} of {} bytes", what, offset,
          offset + size, t.describe(), t.nbytes());
}

// The root tensor's data (the device layout's origin).
char* root_data(const Tensor& t) {
  return static_cast<char*>(t.view_src != nullptr ? t.view_src->data : t.data);
}

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

DeviceBufferType::DeviceBufferType(Runtime& runtime, int device, Device* owner, const WeightFormat& format)
    : runtime_(&runtime), device_(device), owner_(owner), format_(format) {}

std::string DeviceBufferType::name() const { return runtime_->properties(device_).name; }

std::unique_ptr<Buffer> DeviceBufferType::allocate(size_t size) {
  void* memory = runtime_->allocate(device_, std::max<size_t>(size, 1));
  return std::make_unique<DeviceBuffer>(*this, size, memory);
}

size_t DeviceBufferType::alignment() const {
  return std::max<size_t>(128, runtime_->properties(device_).base_alignment);
}

size_t DeviceBufferType::max_size() const { return runtime_->properties(device_).max_allocation; }

size_t DeviceBufferType::alloc_size(const Tensor& t) const { return format_.alloc_size(t); }

// ---------------------------------------------------------------- device buffer

DeviceBuffer::DeviceBuffer(DeviceBufferType& type, size_t size, void* memory)
    : Buffer(type, size),
      runtime_(&type.runtime()),
      device_(type.device_index()),
      format_(&type.weight_format()),
      memory_(memory) {}

DeviceBuffer::~DeviceBuffer() { runtime_->free(device_, memory_); }

void DeviceBuffer::init_tensor(Tensor& t) {
  if (t.view_src != nullptr || !is_quantized(t.type)) return;
  const size_t bytes = t.nbytes(), padded = type().alloc_size(t);
  if (padded > bytes) runtime_->fill(device_, at(t.data, bytes), 0, padded - bytes);
}

void DeviceBuffer::set(Tensor& t, const void* src, size_t offset, size_t size) {
  check_range(t, offset, size, "set");
  if (size == 0) return;
  if (!format_->split(t.type)) {
    runtime_->copy_h2d(device_, at(t.data, offset), src, size);
    return;
  }
  const LayoutRange r = layout_range(t, offset, size);
  const size_t bb = traits(t.type).block_bytes, qb = layout_quant_bytes(t.type);
  char* base = root_data(t);
  std::vector<char> quants, scales;
  for (int64_t b = 0; b < r.nblocks; b += kChunkBlocks) {
    const int64_t n = std::min(kChunkBlocks, r.nblocks - b);
    quants.resize(static_cast<size_t>(n) * qb);
    scales.resize(static_cast<size_t>(n) * 2);
    to_device_layout(t.type, at(src, static_cast<size_t>(b) * bb), n, quants.data(), scales.data());
    runtime_->copy_h2d(device_, base + r.quant_offset + static_cast<size_t>(b) * qb, quants.data(),
                       quants.size());
    runtime_->copy_h2d(device_, base + r.scale_offset + static_cast<size_t>(b) * 2, scales.data(),
                       scales.size());
  }
}

void DeviceBuffer::get(const Tensor& t, void* dst, size_t offset, size_t size) const {
  check_range(t, offset, size, "get");
  if (size == 0) return;
  if (!format_->split(t.type)) {
    runtime_->copy_d2h(device_, dst, at(t.data, offset), size);
    return;
  }
  const LayoutRange r = layout_range(t, offset, size);
  const size_t bb = traits(t.type).block_bytes, qb = layout_quant_bytes(t.type);
  const char* base = root_data(t);
  std::vector<char> quants, scales;
  for (int64_t b = 0; b < r.nblocks; b += kChunkBlocks) {
    const int64_t n = std::min(kChunkBlocks, r.nblocks - b);
    quants.resize(static_cast<size_t>(n) * qb);
    scales.resize(static_cast<size_t>(n) * 2);
    runtime_->copy_d2h(device_, quants.data(), base + r.quant_offset + static_cast<size_t>(b) * qb,
                       quants.size());
    runtime_->copy_d2h(device_, scales.data(), base + r.scale_offset + static_cast<size_t>(b) * 2,
                       scales.size());
    from_device_layout(t.type, quants.data(), scales.data(), n, at(dst, static_cast<size_t>(b) * bb));
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
  if (format_->split(src.type) && (src.view_src != nullptr || dst.view_src != nullptr)) {
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
