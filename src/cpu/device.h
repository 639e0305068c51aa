#pragma once
#include <memory>

#include "tessera/device.h"

namespace tessera::cpu {
std::unique_ptr<Device> make_cpu_device();
}
