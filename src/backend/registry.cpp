#include <algorithm>

#include "core/check.h"
#include "tessera/device.h"

namespace tessera {

const char* to_string(DeviceKind kind) noexcept {
  switch (kind) {
    case DeviceKind::Cpu:
      return "cpu";
    case DeviceKind::Gpu:
      return "gpu";
    case DeviceKind::Accelerator:
      return "accelerator";
  }
  return "?";
}

Registry::Registry(Device& cpu, std::span<const Factory> factories) {
  devices_.push_back(&cpu);
  for (Factory add_devices : factories) {
    std::vector<std::unique_ptr<Device>> found;
    add_devices(found);
    for (auto& device : found) add(std::move(device));
  }
}

Device* Registry::find(const std::string& name) const noexcept {
  for (Device* d : devices_)
    if (d->name() == name) return d;
  return nullptr;
}

Device& Registry::get(const std::string& name) const {
  if (Device* d = find(name)) return *d;
  std::string known;
  for (const Device* d : devices_) known += (known.empty() ? "" : ", ") + d->name();
  raise(ErrorCode::InvalidArgument, "unknown device '{}' (devices: {})", name, known);
}

void Registry::add(std::unique_ptr<Device> device) {
  if (find(device->name()) != nullptr)
    raise(ErrorCode::InvalidArgument, "device '{}' is already registered", device->name());
  devices_.push_back(device.get());
  owned_.push_back(std::move(device));
}

}  // namespace tessera
