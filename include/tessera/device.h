#pragma once
// Device: one piece of hardware (the CPU, an OpenCL GPU, ...), its memory and buffer types.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera {

class Backend;
class BufferType;

enum class DeviceKind { Cpu, Gpu, Accelerator };
const char* to_string(DeviceKind kind) noexcept;

struct DeviceMemory {
  size_t free = 0;
  size_t total = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;         // "CPU", "OpenCL0", ...
  virtual std::string description() const = 0;  // vendor, model, driver
  virtual DeviceKind kind() const = 0;
  virtual DeviceMemory memory() const = 0;
  // Where this device's tensors live.
  virtual BufferType& buffer_type() = 0;
  // Host memory the device reads fast (pinned), or nullptr.
  virtual BufferType* host_buffer_type() { return nullptr; }
  virtual std::unique_ptr<Backend> make_backend() = 0;
};

// Every device of every runtime, discovered once: the CPU first, then each runtime the build
// includes, in the order its CMake file registered it (tessera_add_runtime; README).
class Registry {
 public:
  // Adds a runtime's devices (e.g. tessera::opencl::register_devices); none when it finds none.
  using Factory = void (*)(std::vector<std::unique_ptr<Device>>& devices);

  static Registry& instance();  // defined by the build, above every runtime
  const std::vector<Device*>& devices() const noexcept { return devices_; }
  Device* find(const std::string& name) const noexcept;
  // Like find, but throws Error(InvalidArgument) listing the known devices.
  Device& get(const std::string& name) const;
  void add(std::unique_ptr<Device> device);

 private:
  Registry(Device& cpu, std::span<const Factory> factories);
  std::vector<std::unique_ptr<Device>> owned_;  // every device but the CPU (a static of its own)
  std::vector<Device*> devices_;
};

}  // namespace tessera
