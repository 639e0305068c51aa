#include "host/register.h"

#include <cstdlib>

#include "core/check.h"
#include "device/device.h"
#include "host/oplib.h"
#include "host/runtime.h"
#include "tessera/error.h"
#include "tessera/log.h"

namespace tessera::host {

std::optional<int> parse_device_count(const char* value, std::string* why) {
  if (value == nullptr || *value == '\0') return 0;
  int n = 0;
  for (const char* c = value; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || n > kMaxHostDevices) {
      *why =
          fmt::format("TESSERA_HOST_DEVICES='{}' is not a device count from 0 to {}", value, kMaxHostDevices);
      return std::nullopt;
    }
    n = n * 10 + (*c - '0');
  }
  if (n > kMaxHostDevices) {
    *why =
        fmt::format("TESSERA_HOST_DEVICES='{}' is not a device count from 0 to {}", value, kMaxHostDevices);
    return std::nullopt;
  }
  return n;
}

void register_devices(std::vector<std::unique_ptr<Device>>& devices) {
  std::string why;
  const auto count = parse_device_count(std::getenv("TESSERA_HOST_DEVICES"), &why);
  if (!count) {
    log(LogLevel::Warn, why + "; no host devices");
    return;
  }
  if (*count == 0) return;
  RuntimeOptions options;
  options.devices = *count;
  auto runtime = std::make_shared<HostRuntime>(options);
  auto ops = make_op_library();
  for (int i = 0; i < runtime->device_count(); ++i)
    devices.push_back(std::make_unique<device::AcceleratorDevice>(runtime, i, ops));
}

}  // namespace tessera::host
