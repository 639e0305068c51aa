#pragma once
// Adds the host runtime's devices (Host0, Host1, ...) to the registry's device list when
// TESSERA_HOST_DEVICES=N asks for them (unset or 0: none; anything but a count from 0 to 64: a
// warning naming the value, and none).
#include <memory>
#include <vector>

#include "tessera/device.h"

namespace tessera::host {

inline constexpr int kMaxHostDevices = 64;

void register_devices(std::vector<std::unique_ptr<Device>>& devices);

}  // namespace tessera::host
