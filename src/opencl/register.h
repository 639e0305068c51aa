#pragma once
// Adds every OpenCL device (OpenCL0, OpenCL1, ...) to the registry's device list; nothing when
// there is no OpenCL platform.
#include <memory>
#include <vector>

#include "tessera/device.h"

namespace tessera::opencl {
void register_devices(std::vector<std::unique_ptr<Device>>& devices);
}
