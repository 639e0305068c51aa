#pragma once
// Adds the host runtime's devices (Host0, Host1, ...) to the registry's device list when
// TESSERA_HOST_DEVICES=N asks for them (unset or 0: none; anything but a count: a warning, none).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/device.h"

namespace tessera::host {

inline constexpr int kMaxHostDevices = 64;

// The device count TESSERA_HOST_DEVICES asks for: nullopt (and the reason in *why) for junk.
std::optional<int> parse_device_count(const char* value, std::string* why);

void register_devices(std::vector<std::unique_ptr<Device>>& devices);

}  // namespace tessera::host
