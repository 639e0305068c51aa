#include "opencl/register.h"

#include "device/device.h"
#include "opencl/oplib.h"
#include "opencl/runtime.h"
#include "tessera/error.h"
#include "tessera/log.h"

namespace tessera::opencl {

void register_devices(std::vector<std::unique_ptr<Device>>& devices) {
  try {
    auto runtime = std::make_shared<OpenClRuntime>(default_options());
    if (runtime->device_count() == 0) return;
    // Never destroyed: drivers may already be gone when static destructors run at exit.
    static auto* keep_alive = new std::shared_ptr<OpenClRuntime>(runtime);
    (void)keep_alive;
    auto ops = make_op_library();
    for (int i = 0; i < runtime->device_count(); ++i)
      devices.push_back(std::make_unique<device::AcceleratorDevice>(runtime, i, ops));
  } catch (const Error& e) {
    log(LogLevel::Warn, std::string("OpenCL devices unavailable: ") + e.what());
  }
}

}  // namespace tessera::opencl
