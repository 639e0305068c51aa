#pragma once
// The CUDA runtime behind the device seam, on the driver API loaded at run time (loader.h).
// Devices CUDA0, CUDA1, ... are the driver's ordinals. Each device's primary context is retained
// at first use (not at discovery, so listing devices creates no context) and made current on the
// calling thread before every driver call. All work runs on streams created non-blocking, never on
// the legacy default stream: the synchronous seam calls are the async ones on a per-device
// internal stream, then a wait on it. Device addresses are real device pointers (unified
// addressing), checked against this runtime's table of allocations and mappings before every copy
// or fill, so a range outside device memory is an Error rather than a fault. Virtual memory is the
// driver's (cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess) where the device
// supports it; the device pool then is the VMM pool.
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "cuda/loader.h"
#include "device/runtime.h"

namespace tessera::cuda {

struct CudaDeviceInfo {
  int compute_major = 0, compute_minor = 0;  // 9, 0 for sm_90
  int multiprocessors = 0;
  bool virtual_memory = false;  // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  std::string model;            // cuDeviceGetName: "NVIDIA H100 80GB HBM3"
  std::string pci;              // "0000:01:00.0"
  int arch() const noexcept { return compute_major * 10 + compute_minor; }  // 90
};

class CudaRuntime final : public device::Runtime {
 public:
  // Describes the driver's `device_count` devices (names, memory, compute capability); throws an
  // Error naming the call and the device when a query fails.
  CudaRuntime(std::shared_ptr<const Driver> driver, int device_count);
  ~CudaRuntime() override;

  std::string name() const override { return "CUDA"; }
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

  device::VirtualMemory* virtual_memory(int device) override;

  // ---- for the op library ----
  const Driver& driver() const noexcept { return *driver_; }
  const CudaDeviceInfo& info(int device) const;
  // The stream's driver handle (its device's context is made current on this thread).
  CUstream native(device::Stream& stream);
  // Retains the device's primary context (first time) and makes it current on this thread.
  CUcontext bind(int device) const;

 private:
  friend class CudaVirtualMemory;
  enum class Region { Allocation, Mapping };
  struct Device {
    CUdevice handle = 0;
    device::DeviceProperties props;
    CudaDeviceInfo info;
    std::mutex context_mutex;
    CUcontext context = nullptr;     // retained primary context, or null before first use
    CUstream sync_stream = nullptr;  // the synchronous calls' stream (non-blocking)
    mutable std::shared_mutex mutex;
    std::map<uintptr_t, std::pair<size_t, Region>> regions;  // device memory by start address
    std::mutex host_mutex;
    std::map<void*, size_t> host_allocations;
    std::vector<signed char> peer;  // can_access_peer from each device: -1 unknown, 0, 1
    std::mutex vm_mutex;
    std::unique_ptr<device::VirtualMemory> vm;  // made at first virtual_memory()
  };

  Device& dev(int device) const;
  // Throws unless [ptr, ptr + size) lies in one allocation or mapping of the device.
  void check_range(const Device& d, const void* ptr, size_t size, std::string_view call) const;
  void add_region(Device& d, uintptr_t start, size_t size, Region kind);
  void wait(const Device& d, std::string_view call) const;

  std::shared_ptr<const Driver> driver_;
  std::vector<std::unique_ptr<Device>> devices_;  // stable addresses: Device holds mutexes
};

}  // namespace tessera::cuda
