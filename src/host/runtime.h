#pragma once
// The host runtime: a runtime behind the device seam that needs no vendor. Device memory is host
// memory (addresses are host pointers, checked against each device's allocations), each stream
// is a worker thread running its queue in order, events are completion points that carry the
// recording stream's errors to whoever waits, and virtual memory is the host's (mmap). Its op
// library runs the CPU backend's kernels on the workers, on native ggml blocks.
//
// It lets the whole device layer (buffers, pools, DeviceBackend, the scheduler's device paths)
// run and be tested without OpenCL, as devices Host0, Host1, ... (TESSERA_HOST_DEVICES=N).
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "device/runtime.h"

namespace tessera::cpu {
class ThreadPool;
}

namespace tessera::host {

struct RuntimeOptions {
  int devices = 2;
  size_t memory_per_device = 0;  // what each device reports and allocates at most; 0 = the host's RAM
  size_t vmm_granularity = size_t{2} << 20;
};

// What the kernels of one stream share, used only on its worker thread.
struct KernelWorkspace {
  std::vector<char> scratch;
  std::unique_ptr<cpu::ThreadPool> threads;  // created at the first kernel
  ~KernelWorkspace();
};

class HostStream;
class HostVirtualMemoryOfDevice;

// Fault injection, for tests of every error path above the seam: what kind of call fails.
enum class FaultSite {
  Allocation,    // allocate, host_alloc, VMM physical memory
  Copy,          // copies and fills, synchronous or in stream order
  KernelLaunch,  // launch_kernel and launch_host_func
  EventWait,     // stream_wait_event, event_synchronize
};
inline constexpr int kFaultSiteCount = 4;
const char* fault_site_name(FaultSite site) noexcept;

class HostRuntime final : public device::Runtime {
 public:
  explicit HostRuntime(RuntimeOptions options = {});
  ~HostRuntime() override;

  std::string name() const override { return "Host"; }
  int device_count() const override { return static_cast<int>(devices_.size()); }
  const device::DeviceProperties& properties(int device) const override;
  size_t free_memory(int device) const override;
  // Every pair: all devices share the host's memory.
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
  // The stream's later work waits for the event; an error the event carries becomes the stream's.
  void stream_wait_event(device::Stream& stream, device::StreamEvent& event) override;
  void event_synchronize(device::StreamEvent& event) override;
  device::EventStatus event_query(device::StreamEvent& event) override;

  device::VirtualMemory* virtual_memory(int device) override;

  // ---- for the op library ----
  // Runs kernel on the stream's worker in stream order, with the stream's workspace.
  void launch_kernel(device::Stream& stream, std::function<void(KernelWorkspace&)> kernel);
  // Throws Error(InvalidArgument) unless [ptr, ptr + size) lies in memory of `device`.
  void check_address(int device, const void* ptr, size_t size, const char* call) const;

  // ---- fault injection (tests) ----
  // The nth call of `site` from now on (1 = the next; 0 disarms) fails with Error(DeviceError)
  // "HostN: injected fault: <site> #n (<call>)"; it does nothing else. Calls in stream order fail
  // when they run, as a driver's would: the error reaches stream_synchronize and events. Each
  // call restarts the count of every site.
  void inject_fault(FaultSite site, int64_t nth);
  // Calls of the site since the last inject_fault.
  int64_t fault_calls(FaultSite site) const noexcept;

 private:
  friend class HostVirtualMemoryOfDevice;
  struct Device {
    device::DeviceProperties props;
    mutable std::shared_mutex mutex;
    std::map<uintptr_t, size_t> regions;  // device memory by start: allocations and mapped VMM chunks
    size_t allocated = 0;
    std::unique_ptr<HostVirtualMemoryOfDevice> vm;
  };
  Device& dev(int device);
  const Device& dev(int device) const;
  HostStream& host_stream(device::Stream& stream) const;
  void add_region(int device, void* ptr, size_t size);
  void remove_region(int device, void* ptr) noexcept;
  // Counts a call of `site`; the error to raise when it is the one armed to fail, else null.
  std::exception_ptr fault(FaultSite site, int device, const char* call);

  RuntimeOptions options_;
  std::atomic<int64_t> fault_calls_[kFaultSiteCount] = {};
  std::atomic<int> fault_site_{-1};
  std::atomic<int64_t> fault_nth_{0};
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace tessera::host
