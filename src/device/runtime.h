#pragma once
// The runtime seam: what a vendor runtime (OpenCL, CUDA, CANN, ...) provides to the device layer,
// and nothing more. Device memory is addressed by opaque device addresses (void*): real device
// pointers where the vendor has them, or addresses in a per-device table the runtime translates
// (OpenCL buffers). An address inside an allocation plus a byte offset is again a valid address.
// Every failure is a tessera::Error naming the call, the device and the vendor's error.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tessera/device.h"

namespace tessera::device {

struct DeviceProperties {
  std::string name;         // "OpenCL0"
  std::string description;  // "vendor device (driver version)"
  DeviceKind kind = DeviceKind::Gpu;
  size_t total_memory = 0;
  size_t base_alignment = 128;       // alignment of allocate()'s result, in bytes
  size_t max_allocation = SIZE_MAX;  // largest single allocation
};

// An in-order queue on one device (RAII: destroying it waits for its work).
class Stream {
 public:
  explicit Stream(int device) : device_(device) {}
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  int device() const noexcept { return device_; }

 private:
  int device_;
};

enum class EventStatus { NotRecorded, Pending, Complete, Failed };

// A point in a stream's work (RAII). Recording again moves the point.
class StreamEvent {
 public:
  virtual ~StreamEvent() = default;
};

// Physical device memory for virtual-memory mapping (RAII).
class PhysicalMemory {
 public:
  explicit PhysicalMemory(size_t size) : size_(size) {}
  virtual ~PhysicalMemory() = default;
  PhysicalMemory(const PhysicalMemory&) = delete;
  PhysicalMemory& operator=(const PhysicalMemory&) = delete;
  size_t size() const noexcept { return size_; }

 private:
  size_t size_;
};

// Optional virtual memory: reserve an address range once, back it with physical memory piecewise.
class VirtualMemory {
 public:
  virtual ~VirtualMemory() = default;
  // Sizes and addresses passed below are multiples of this.
  virtual size_t granularity() const = 0;
  // An address range with nothing behind it yet.
  virtual void* reserve(size_t size) = 0;
  virtual void release(void* base, size_t size) noexcept = 0;
  virtual std::unique_ptr<PhysicalMemory> create_physical(size_t size) = 0;
  // Maps `memory` (its whole size) at addr, readable and writable by the device.
  virtual void map(void* addr, PhysicalMemory& memory) = 0;
  virtual void unmap(void* addr, size_t size) noexcept = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;  // "OpenCL"

  // ---- devices ----
  virtual int device_count() const = 0;
  virtual const DeviceProperties& properties(int device) const = 0;
  virtual size_t free_memory(int device) const = 0;
  // True when device `dst` can copy from device `src` directly (copy_d2d, copy_d2d_async) with no
  // further setup: a vendor that must enable peer access does so before answering true.
  virtual bool can_access_peer(int dst, int src) const = 0;

  // ---- memory ----
  // Throws Error(OutOfMemory) naming the size in MiB, the device and its free memory. allocate(0)
  // returns a distinct address that free accepts (as allocate(1) would).
  virtual void* allocate(int device, size_t size) = 0;
  virtual void free(int device, void* ptr) noexcept = 0;
  // Pinned host memory (a plain host pointer) that `device` transfers from and to fast.
  virtual void* host_alloc(int device, size_t size) = 0;
  virtual void host_free(int device, void* ptr) noexcept = 0;

  // ---- synchronous transfers (complete on return) ----
  virtual void copy_h2d(int device, void* dst, const void* src, size_t size) = 0;
  virtual void copy_d2h(int device, void* dst, const void* src, size_t size) = 0;
  // Needs dst_device == src_device or can_access_peer(dst_device, src_device).
  virtual void copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t size) = 0;
  virtual void fill(int device, void* dst, uint8_t value, size_t size) = 0;

  // ---- streams (host memory must stay valid until the work completes) ----
  virtual std::unique_ptr<Stream> create_stream(int device) = 0;
  virtual void copy_h2d_async(Stream& stream, void* dst, const void* src, size_t size) = 0;
  virtual void copy_d2h_async(Stream& stream, void* dst, const void* src, size_t size) = 0;
  // dst is on the stream's device; src on src_device (same device or a peer).
  virtual void copy_d2d_async(Stream& stream, void* dst, int src_device, const void* src, size_t size) = 0;
  virtual void fill_async(Stream& stream, void* dst, uint8_t value, size_t size) = 0;
  // Runs fn on some host thread once the stream's earlier work is done; later work waits for it.
  // fn must not call the runtime. An exception it throws is kept and rethrown by the next
  // stream_synchronize (or event_synchronize of an event recorded after it).
  virtual void launch_host_func(Stream& stream, std::function<void()> fn) = 0;
  // Waits for the stream's work; throws the first error its async work raised.
  virtual void stream_synchronize(Stream& stream) = 0;

  // ---- events ----
  virtual std::unique_ptr<StreamEvent> create_event(int device) = 0;
  virtual void event_record(StreamEvent& event, Stream& stream) = 0;
  // Makes the stream's later work wait for the event (which may be another device's) without
  // blocking the caller.
  virtual void stream_wait_event(Stream& stream, StreamEvent& event) = 0;
  // Blocks until the event's work is done; throws errors its stream's async work raised before it.
  virtual void event_synchronize(StreamEvent& event) = 0;
  virtual EventStatus event_query(StreamEvent& event) = 0;

  // ---- optional virtual memory (nullptr = none) ----
  virtual VirtualMemory* virtual_memory(int /*device*/) { return nullptr; }
};

}  // namespace tessera::device
