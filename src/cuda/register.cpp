#include "cuda/register.h"

#include <new>

#include "cuda/loader.h"
#include "cuda/oplib.h"
#include "cuda/runtime.h"
#include "device/device.h"
#include "tessera/error.h"
#include "tessera/log.h"
#include "tessera/runtime_notes.h"

namespace tessera::cuda {

void register_devices(std::vector<std::unique_ptr<Device>>& devices) {
  const DriverLoad load = load_driver();
  if (!load.driver) {
    log(LogLevel::Debug, "CUDA: no device: " + load.reason);
    note_runtime_unavailable("CUDA", load.reason);
    return;
  }
  try {
    auto runtime = std::make_shared<CudaRuntime>(load.driver, load.device_count);
    // Never destroyed: the driver may already be shutting down when static destructors run. The
    // shared_ptr lives in static storage, so the runtime stays reachable (no leak report).
    alignas(
        std::shared_ptr<CudaRuntime>) static unsigned char keep_alive[sizeof(std::shared_ptr<CudaRuntime>)];
    static const bool kept = (new (keep_alive) std::shared_ptr<CudaRuntime>(runtime), true);
    (void)kept;
    auto ops = make_op_library();
    for (int i = 0; i < runtime->device_count(); ++i)
      devices.push_back(std::make_unique<device::AcceleratorDevice>(runtime, i, ops));
  } catch (const Error& e) {
    log(LogLevel::Warn, std::string("CUDA devices unavailable: ") + e.what());
    note_runtime_unavailable("CUDA", e.what());
  }
}

}  // namespace tessera::cuda
