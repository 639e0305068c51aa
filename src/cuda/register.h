#pragma once
// Adds every CUDA device (CUDA0, CUDA1, ...) to the registry's device list. Without a usable
// driver it adds none and records why (tessera/runtime_notes.h), which `tessera devices` prints.
#include <memory>
#include <vector>

#include "tessera/device.h"

namespace tessera::cuda {
void register_devices(std::vector<std::unique_ptr<Device>>& devices);
}
