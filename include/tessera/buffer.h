#pragma once
// BufferType (an allocator of one kind of memory) and Buffer (one block of it holding tensors).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/tensor.h"

namespace tessera {

class Buffer;
class Device;

class BufferType {
 public:
  virtual ~BufferType() = default;
  virtual std::string name() const = 0;
  // Throws Error(OutOfMemory) naming the size and the device when it cannot be satisfied.
  virtual std::unique_ptr<Buffer> allocate(size_t size) = 0;
  virtual size_t alignment() const = 0;
  virtual size_t max_size() const { return SIZE_MAX; }
  // Bytes a tensor occupies in this kind of memory (may exceed nbytes: device padding).
  virtual size_t alloc_size(const Tensor& t) const { return t.nbytes(); }
  // True when tensor data are plain host addresses a CPU kernel can read.
  virtual bool is_host() const = 0;
  virtual Device* device() const { return nullptr; }
};

class Buffer {
 public:
  Buffer(BufferType& type, size_t size) : type_(&type), size_(size) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  BufferType& type() const noexcept { return *type_; }
  size_t size() const noexcept { return size_; }
  // Base address: a host pointer for host buffers, an opaque device address otherwise.
  virtual void* base() const = 0;

  // Places a (non-view) tensor at a byte offset in this buffer and initializes it.
  void place(Tensor& t, size_t offset);
  // Device hook after placement (e.g. zero quantized row padding).
  virtual void init_tensor(Tensor& /*t*/) {}
  // Byte range [offset, offset + size) of the tensor's (ggml) byte image.
  virtual void set(Tensor& t, const void* src, size_t offset, size_t size) = 0;
  virtual void get(const Tensor& t, void* dst, size_t offset, size_t size) const = 0;
  // Copies src into dst (dst lives here); returns false when this buffer cannot do it directly.
  virtual bool copy_from(const Tensor& /*src*/, Tensor& /*dst*/) { return false; }
  virtual void clear(uint8_t value) = 0;

 private:
  BufferType* type_;
  size_t size_;
};

// Host memory (64-byte aligned); tensor data are plain pointers.
BufferType& host_buffer_type();

// Convenience: write/read a whole tensor or a byte range through its buffer (or memcpy when it
// has host data but no buffer, as in an allocating Context).
void tensor_set(Tensor& t, const void* src, size_t offset, size_t size);
void tensor_get(const Tensor& t, void* dst, size_t offset, size_t size);

}  // namespace tessera
