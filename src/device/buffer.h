#pragma once
// Device buffers (tensors in device memory, weights in the op library's WeightLayout) and pinned
// host buffers (staging, and host-side tensors that feed the device), for any Runtime.
#include <cstddef>
#include <memory>
#include <string>

#include "backend/weight_layout.h"
#include "device/runtime.h"
#include "tessera/buffer.h"

namespace tessera::device {

// Weights are stored in the weight layout of the device's op library (backend/weight_layout.h): its
// alloc_size (slack after a tensor), and its encoding for the tensors it re-lays.
class DeviceBufferType final : public BufferType {
 public:
  DeviceBufferType(Runtime& runtime, int device, Device* owner, const WeightLayout& layout);
  std::string name() const override;
  // Throws Error(OutOfMemory) naming the size in MiB, the device and its free memory.
  std::unique_ptr<Buffer> allocate(size_t size) override;
  size_t alignment() const override;  // max(128, the device's base-address alignment)
  size_t max_size() const override;
  // The layout's: the tensor's bytes plus any slack after them.
  size_t alloc_size(const Tensor& t) const override;
  bool is_host() const override { return false; }
  Device* device() const override { return owner_; }
  Runtime& runtime() const noexcept { return *runtime_; }
  int device_index() const noexcept { return device_; }
  const WeightLayout& weight_layout() const noexcept { return *layout_; }

 private:
  Runtime* runtime_;
  int device_;
  Device* owner_;
  const WeightLayout* layout_;  // the op library's, which outlives the device
};

class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(DeviceBufferType& type, size_t size, void* memory);
  ~DeviceBuffer() override;
  void* base() const override { return memory_; }
  // Zeroes the layout's slack after a tensor.
  void init_tensor(Tensor& t) override;
  // Byte ranges of the ggml image; tensors the layout re-lays convert to and from it (whole units,
  // staged through host memory in pieces of at most 64 MiB).
  void set(Tensor& t, const void* src, size_t offset, size_t size) override;
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override;
  // From host memory, this device, a peer device, or (staged through pinned memory) another device
  // of the same runtime.
  bool copy_from(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;
  Runtime& runtime() const noexcept { return *runtime_; }
  int device_index() const noexcept { return device_; }
  const WeightLayout& weight_layout() const noexcept { return *layout_; }

 private:
  Runtime* runtime_;
  int device_;
  const WeightLayout* layout_;  // the buffer type's
  void* memory_;
};

// Pinned host memory of one device: plain host pointers the device transfers from fast.
class PinnedBufferType final : public BufferType {
 public:
  PinnedBufferType(Runtime& runtime, int device, Device* owner);
  std::string name() const override;
  std::unique_ptr<Buffer> allocate(size_t size) override;
  size_t alignment() const override { return 128; }
  bool is_host() const override { return true; }
  Device* device() const override { return owner_; }

 private:
  Runtime* runtime_;
  int device_;
  Device* owner_;
};

// The device buffer holding t's memory (through its view root), or nullptr.
DeviceBuffer* device_buffer_of(const Tensor& t) noexcept;

}  // namespace tessera::device
