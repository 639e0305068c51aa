#include "device/device.h"

#include "device/backend.h"

namespace tessera::device {

AcceleratorDevice::AcceleratorDevice(std::shared_ptr<Runtime> runtime, int index,
                                     std::shared_ptr<const OpLibrary> ops)
    : runtime_(std::move(runtime)),
      index_(index),
      ops_(std::move(ops)),
      buffer_type_(*runtime_, index, this, ops_->weight_layout()),
      pinned_type_(*runtime_, index, this) {}

std::string AcceleratorDevice::name() const { return runtime_->properties(index_).name; }

std::string AcceleratorDevice::description() const { return runtime_->properties(index_).description; }

DeviceKind AcceleratorDevice::kind() const { return runtime_->properties(index_).kind; }

DeviceMemory AcceleratorDevice::memory() const {
  DeviceMemory m;
  m.total = runtime_->properties(index_).total_memory;
  m.free = runtime_->free_memory(index_);
  return m;
}

std::unique_ptr<Backend> AcceleratorDevice::make_backend() {
  return std::make_unique<DeviceBackend>(*this, *runtime_, index_, *ops_);
}

}  // namespace tessera::device
