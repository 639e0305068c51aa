#pragma once
// An accelerator Device for any Runtime: its buffer types and backends.
#include <memory>

#include "device/buffer.h"
#include "device/oplib.h"
#include "device/runtime.h"
#include "tessera/device.h"

namespace tessera::device {

class AcceleratorDevice final : public Device {
 public:
  AcceleratorDevice(std::shared_ptr<Runtime> runtime, int index, std::shared_ptr<const OpLibrary> ops);
  std::string name() const override;
  std::string description() const override;
  DeviceKind kind() const override;
  DeviceMemory memory() const override;
  BufferType& buffer_type() override { return buffer_type_; }
  BufferType* host_buffer_type() override { return &pinned_type_; }
  std::unique_ptr<Backend> make_backend() override;
  Runtime& runtime() const noexcept { return *runtime_; }
  int index() const noexcept { return index_; }
  const OpLibrary& ops() const noexcept { return *ops_; }
  // How this device stores weights (its op library's layout).
  const WeightLayout& weight_layout() const noexcept { return ops_->weight_layout(); }

 private:
  std::shared_ptr<Runtime> runtime_;
  int index_;
  std::shared_ptr<const OpLibrary> ops_;
  DeviceBufferType buffer_type_;
  PinnedBufferType pinned_type_;
};

}  // namespace tessera::device
