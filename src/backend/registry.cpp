#include <algorithm>

#include "core/check.h"
#include "cpu/device.h"
#include "host/register.h"
#include "opencl/register.h"
#include "tessera/cpu.h"
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

Registry::Registry() {
  // The CPU is always first; each vendor runtime adds the devices it discovers.
  devices_.push_back(cpu::make_cpu_device());
  opencl::register_devices(devices_);
  host::register_devices(devices_);  // only when TESSERA_HOST_DEVICES asks for them
}

Registry& Registry::instance() {
  static Registry registry;
  return registry;
}

Device* Registry::find(const std::string& name) const noexcept {
  for (const auto& d : devices_)
    if (d->name() == name) return d.get();
  return nullptr;
}

Device& Registry::get(const std::string& name) const {
  if (Device* d = find(name)) return *d;
  std::string known;
  for (const auto& d : devices_) known += (known.empty() ? "" : ", ") + d->name();
  raise(ErrorCode::InvalidArgument, "unknown device '{}' (devices: {})", name, known);
}

void Registry::add(std::unique_ptr<Device> device) {
  if (find(device->name()) != nullptr)
    raise(ErrorCode::InvalidArgument, "device '{}' is already registered", device->name());
  devices_.push_back(std::move(device));
}

}  // namespace tessera
