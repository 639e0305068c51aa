#pragma once
// The OpenCL runtime behind the device seam. Every platform's GPU, CPU and accelerator devices
// (OpenCL 1.2 or later) become OpenCL0, OpenCL1, ...; TESSERA_OPENCL_DEVICES filters them by
// enumeration index or name substring ("0,2", "NVIDIA", "pthread"). Devices of one platform share a
// context, so they copy device-to-device and wait for each other's events directly.
//
// OpenCL has buffers, not pointers: allocate() returns an address in a per-device table
// (addresses never dereferenced on the host), and kernels get the (cl_mem, byte offset) that
// resolve() finds for it. Programs are built once per device per process from embedded .cl
// sources and cached on disk by device, driver, options and source hash.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/runtime.h"
#include "opencl/cl.h"

namespace tessera::opencl {

struct RuntimeOptions {
  // Device filter; empty = all (the default comes from TESSERA_OPENCL_DEVICES).
  std::string devices;
  // One context per device instead of per platform: no peer copies, events bridged by the host
  // (as between devices of different vendors).
  bool context_per_device = false;
  // Program binary cache; empty = none (the default: TESSERA_OPENCL_CACHE_DIR, else
  // $XDG_CACHE_HOME/tessera/opencl or ~/.cache/tessera/opencl; "off" disables it).
  std::string cache_dir;
};

// Options from the environment.
RuntimeOptions default_options();

struct ProgramStats {
  int compiled = 0;  // built from source
  int loaded = 0;    // built from a cached binary
};

// (buffer, byte offset) for a device address.
struct ClAddress {
  cl_mem mem = nullptr;
  size_t offset = 0;
};

class ClStream;

class OpenClRuntime final : public device::Runtime {
 public:
  // Enumerates devices; no platform (no ICD) gives a runtime with no devices.
  explicit OpenClRuntime(RuntimeOptions options);
  ~OpenClRuntime() override;

  std::string name() const override { return "OpenCL"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  const device::DeviceProperties& properties(int device) const override;
  size_t free_memory(int device) const override;
  bool can_access_peer(int dst, int src) const override;

  void* allocate(int device, size_t size) override;
  void free(int device, void* ptr) noexcept override;
  void* host_alloc(int device, size_t size) override;
  void host_free(int device, void* ptr) noexcept override;

  void copy_h2d(int device, void* dst, const void* src, size_t size) override;
  void copy_d2h(int device, void* dst, const void* src, size_t size) override;
  void copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t size) override;
  void fill(int device, void* dst, uint8_t value, size_t size) override;

  std::unique_ptr<device::Stream> create_stream(int device) override;
  void copy_h2d_async(device::Stream& stream, void* dst, const void* src, size_t size) override;
  void copy_d2h_async(device::Stream& stream, void* dst, const void* src, size_t size) override;
  void copy_d2d_async(device::Stream& stream, void* dst, int src_device, const void* src,
                      size_t size) override;
  void fill_async(device::Stream& stream, void* dst, uint8_t value, size_t size) override;
  void launch_host_func(device::Stream& stream, std::function<void()> fn) override;
  void stream_synchronize(device::Stream& stream) override;

  std::unique_ptr<device::StreamEvent> create_event(int device) override;
  void event_record(device::StreamEvent& event, device::Stream& stream) override;
  void stream_wait_event(device::Stream& stream, device::StreamEvent& event) override;
  void event_synchronize(device::StreamEvent& event) override;
  device::EventStatus event_query(device::StreamEvent& event) override;

  // ---- for the op library ----
  // The buffer and offset holding [ptr, ptr + size) on `device`; throws if it is not there.
  ClAddress resolve(int device, const void* ptr, size_t size = 0) const;
  cl_command_queue queue(device::Stream& stream) const;
  // A kernel of program `program` for the stream's device (built and cached on first use).
  cl_kernel kernel(device::Stream& stream, std::string_view program, std::string_view kernel);
  cl_device_id device_id(int device) const { return devices_.at(static_cast<size_t>(device))->id; }
  ProgramStats program_stats() const { return {compiled_.load(), loaded_.load()}; }
  const RuntimeOptions& options() const noexcept { return options_; }

 private:
  struct Allocation {
    cl_mem mem;
    size_t size;
  };
  struct Device {
    cl_platform_id platform = nullptr;
    cl_device_id id = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;  // synchronous transfers and mapping
    device::DeviceProperties props;
    std::string cache_key;  // platform, device, driver, build options
    std::string build_options;
    bool amd_free_memory = false;
    // A CPU device (PoCL's) whose "device memory" is this process's: under `ulimit -v` the driver
    // asserts instead of failing, so allocations first check the address space is there.
    bool memory_is_the_process = false;
    uintptr_t next_address = 0;
    mutable std::shared_mutex mutex;
    std::map<uintptr_t, Allocation> allocations;  // by start address
    std::atomic<size_t> allocated{0};
    std::mutex program_mutex;
    std::unordered_map<std::string, cl_program> programs;
  };

  Device& dev(int device);
  const Device& dev(int device) const;
  void enumerate();
  cl_program program(int device, std::string_view name);
  cl_program build_program(Device& d, std::string_view name, const std::string& source);
  ClAddress resolve_locked(const Device& d, const void* ptr, size_t size) const;
  void wait_and_release(const Device& d, cl_event event, std::string_view call) const;

  RuntimeOptions options_;
  std::vector<std::unique_ptr<Device>> devices_;  // stable addresses: Device holds a mutex
  std::vector<cl_context> contexts_;
  mutable std::mutex host_mutex_;
  std::unordered_map<void*, Allocation> host_allocations_;
  std::atomic<int> compiled_{0}, loaded_{0};
};

// The embedded source of a kernel program (src/opencl/kernels/<name>.cl, after common.cl).
std::string program_source(std::string_view name);

}  // namespace tessera::opencl
