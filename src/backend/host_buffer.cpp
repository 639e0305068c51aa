#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "tessera/buffer.h"
#include "tessera/context.h"

namespace tessera {
namespace {

constexpr size_t kHostAlignment = 64;

class HostBuffer final : public Buffer {
 public:
  HostBuffer(BufferType& type, size_t size, void* memory) : Buffer(type, size), memory_(memory) {}
  ~HostBuffer() override { std::free(memory_); }
  void* base() const override { return memory_; }
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    std::memcpy(static_cast<char*>(t.data) + offset, src, size);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
  }
  bool copy_from(const Tensor& src, Tensor& dst) override {
    if (src.buffer != nullptr && !src.buffer->type().is_host()) return false;
    std::memcpy(dst.data, src.data, src.nbytes());
    return true;
  }
  void clear(uint8_t value) override { std::memset(memory_, value, size()); }

 private:
  void* memory_;
};

class HostBufferType final : public BufferType {
 public:
  std::string name() const override { return "CPU"; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    const size_t bytes =
        std::max<size_t>((size + kHostAlignment - 1) / kHostAlignment * kHostAlignment, kHostAlignment);
    void* p = std::aligned_alloc(kHostAlignment, bytes);
    if (p == nullptr)
      raise(ErrorCode::OutOfMemory, "CPU: cannot allocate a buffer of {:.1f} MiB of host memory",
            static_cast<double>(size) / (1024.0 * 1024.0));
    return std::make_unique<HostBuffer>(*this, size, p);
  }
  size_t alignment() const override { return kHostAlignment; }
  bool is_host() const override { return true; }
};

}  // namespace

BufferType& host_buffer_type() {
  static HostBufferType type;
  return type;
}

void Buffer::place(Tensor& t, size_t offset) {
  // A public entry point: a view (whose memory is its source's) is the caller's mistake, not ours.
  if (t.view_src != nullptr)
    raise(ErrorCode::InvalidArgument, "{}: tensor {} is a view of {}; place its source instead",
          type().name(), t.describe(), t.view_src->describe());
  const size_t bytes = type().alloc_size(t);
  if (offset > size() || bytes > size() - offset)
    raise(ErrorCode::InvalidArgument, "{}: tensor {} at offset {} does not fit in a buffer of {} bytes",
          type().name(), t.describe(), offset, size());
  t.buffer = this;
  t.data = static_cast<char*>(base()) + offset;
  init_tensor(t);
}

static void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (t.data == nullptr) raise(ErrorCode::InvalidArgument, "{}: tensor {} has no memory", what, t.describe());
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    raise(ErrorCode::InvalidArgument, "{}: range [{}, {}) is outside tensor {} of {} bytes", what, offset,
          offset + size, t.describe(), t.nbytes());
}

void tensor_set(Tensor& t, const void* src, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_set");
  if (size == 0) return;
  if (t.buffer != nullptr)
    t.buffer->set(t, src, offset, size);
  else
    std::memcpy(static_cast<char*>(t.data) + offset, src, size);
}

void tensor_get(const Tensor& t, void* dst, size_t offset, size_t size) {
  check_range(t, offset, size, "tensor_get");
  if (size == 0) return;
  if (t.buffer != nullptr)
    t.buffer->get(t, dst, offset, size);
  else
    std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
}

}  // namespace tessera
