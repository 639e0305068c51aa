#include "host/register.h"

#include "core/env.h"
#include "device/device.h"
#include "host/oplib.h"
#include "host/runtime.h"

namespace tessera::host {

void register_devices(std::vector<std::unique_ptr<Device>>& devices) {
  const auto count = env_int_or("TESSERA_HOST_DEVICES", 0, 0, kMaxHostDevices);
  if (count == 0) return;
  RuntimeOptions options;
  options.devices = static_cast<int>(count);
  auto runtime = std::make_shared<HostRuntime>(options);
  auto ops = make_op_library();
  for (int i = 0; i < runtime->device_count(); ++i)
    devices.push_back(std::make_unique<device::AcceleratorDevice>(runtime, i, ops));
}

}  // namespace tessera::host
