#include "tessera/device.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "cpu/ops/mul_mat_kernels.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"

namespace tessera::cpu {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "CPU"; }
  std::string description() const override {
    return cpu_model_name() + " (" + std::to_string(hardware_threads()) + " threads, " +
           mm::active_kernels().isa + " kernels)";
  }
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  DeviceMemory memory() const override {
    const long page = sysconf(_SC_PAGESIZE);
    DeviceMemory m;
    m.total = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(page);
    m.free = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(page);
    return m;
  }
  BufferType& buffer_type() override { return tessera::host_buffer_type(); }
  std::unique_ptr<Backend> make_backend() override { return std::make_unique<CpuBackend>(); }
};

}  // namespace

Device& cpu_device() {
  // Its own static, not the Registry's: a CPU backend never enumerates the other runtimes.
  static CpuDevice device;
  return device;
}

}  // namespace tessera::cpu
