#include "opencl/register.h"

#include <new>

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
    // Never destroyed: drivers may already be gone when static destructors run at exit. The
    // shared_ptr lives in static storage (not behind a pointer the optimiser may drop), so the
    // runtime stays reachable and LeakSanitizer does not report it.
    alignas(std::shared_ptr<OpenClRuntime>) static unsigned char
        keep_alive[sizeof(std::shared_ptr<OpenClRuntime>)];
    static const bool kept = (new (keep_alive) std::shared_ptr<OpenClRuntime>(runtime), true);
    (void)kept;
    auto ops = make_op_library();
    for (int i = 0; i < runtime->device_count(); ++i)
      devices.push_back(std::make_unique<device::AcceleratorDevice>(runtime, i, ops));
  } catch (const Error& e) {
    log(LogLevel::Warn, std::string("OpenCL devices unavailable: ") + e.what());
  }
}

}  // namespace tessera::opencl
