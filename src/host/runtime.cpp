#include "host/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "core/check.h"
#include "cpu/thread_pool.h"
#include "device/host_vmm.h"
#include "tessera/log.h"

namespace tessera::host {
namespace {

constexpr size_t kAlignment = 256;  // of allocate()'s addresses, as CUDA's

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{1} << 32;
}

// A point in a stream's work: complete once the work before it is, failed when that work raised.
struct Point {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

  void complete(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(e);
    }
    cv.notify_all();
  }
  std::exception_ptr wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return done; });
    return error;
  }
};

class HostEvent final : public device::StreamEvent {
 public:
  std::shared_ptr<Point> point() {
    std::lock_guard lock(mutex_);
    return point_;
  }
  void set(std::shared_ptr<Point> p) {
    std::lock_guard lock(mutex_);
    point_ = std::move(p);
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<Point> point_;  // the latest recording (earlier waits keep theirs)
};

HostEvent& host_event(device::StreamEvent& e) { return static_cast<HostEvent&>(e); }

}  // namespace

KernelWorkspace::~KernelWorkspace() = default;

// A worker thread running its queue in order. The first error a task raises is kept until
// stream_synchronize takes it; later tasks still run (they may release memory).
class HostStream final : public device::Stream {
 public:
  HostStream(int device, std::string where) : Stream(device), where_(std::move(where)) {
    worker_ = std::thread([this] { run(); });
  }
  ~HostStream() override {
    drain();
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }

  const std::string& where() const noexcept { return where_; }

  void push(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
      ++submitted_;
    }
    work_cv_.notify_one();
  }

  // Waits for the work submitted so far; returns (and clears) the first error it raised.
  std::exception_ptr drain() {
    std::unique_lock lock(mutex_);
    const uint64_t target = submitted_;
    done_cv_.wait(lock, [&] { return completed_ >= target; });
    return std::exchange(error_, nullptr);
  }

  // On the worker: the first error not yet taken.
  std::exception_ptr current_error() {
    std::lock_guard lock(mutex_);
    return error_;
  }

  KernelWorkspace& workspace() noexcept { return workspace_; }  // worker thread only

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr failure;
      try {
        task();
      } catch (...) {
        failure = std::current_exception();
      }
      task = nullptr;  // its captures go before anyone waiting on the stream resumes
      {
        std::lock_guard lock(mutex_);
        if (failure && !error_) error_ = std::move(failure);
        ++completed_;
      }
      done_cv_.notify_all();
    }
  }

  std::string where_;
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  KernelWorkspace workspace_;
  std::thread worker_;  // last: starts after every member above exists
};

// Host virtual memory whose mapped chunks count as the device's memory.
class HostVirtualMemoryOfDevice final : public device::VirtualMemory {
 public:
  HostVirtualMemoryOfDevice(HostRuntime& runtime, int device, size_t granularity)
      : runtime_(&runtime), device_(device), vm_(granularity) {}
  size_t granularity() const override { return vm_.granularity(); }
  void* reserve(size_t size) override { return vm_.reserve(size); }
  void release(void* base, size_t size) noexcept override { vm_.release(base, size); }
  std::unique_ptr<device::PhysicalMemory> create_physical(size_t size) override {
    if (auto e = runtime_->fault(FaultSite::Allocation, device_, "create_physical"))
      std::rethrow_exception(e);
    const size_t free = runtime_->free_memory(device_);
    if (size > free)
      raise(ErrorCode::OutOfMemory, "{}: cannot create {:.1f} MiB of physical memory; {:.1f} MiB free",
            runtime_->properties(device_).name, mib(size), mib(free));
    return vm_.create_physical(size);
  }
  void map(void* addr, device::PhysicalMemory& memory) override {
    vm_.map(addr, memory);
    runtime_->add_region(device_, addr, memory.size());
  }
  void unmap(void* addr, size_t size) noexcept override {
    auto& d = runtime_->dev(device_);
    {
      std::unique_lock lock(d.mutex);
      const auto begin = reinterpret_cast<uintptr_t>(addr);
      auto it = d.regions.lower_bound(begin);
      while (it != d.regions.end() && it->first < begin + size) {
        d.allocated -= it->second;
        it = d.regions.erase(it);
      }
    }
    vm_.unmap(addr, size);
  }

 private:
  HostRuntime* runtime_;
  int device_;
  device::HostVirtualMemory vm_;
};

const char* fault_site_name(FaultSite site) noexcept {
  switch (site) {
    case FaultSite::Allocation:
      return "allocation";
    case FaultSite::Copy:
      return "copy";
    case FaultSite::KernelLaunch:
      return "kernel launch";
    case FaultSite::EventWait:
      return "event wait";
  }
  return "?";
}

void HostRuntime::inject_fault(FaultSite site, int64_t nth) {
  for (auto& calls : fault_calls_) calls.store(0);
  fault_nth_.store(nth);
  fault_site_.store(nth > 0 ? static_cast<int>(site) : -1);
}

int64_t HostRuntime::fault_calls(FaultSite site) const noexcept {
  return fault_calls_[static_cast<int>(site)].load();
}

std::exception_ptr HostRuntime::fault(FaultSite site, int device, const char* call) {
  const int64_t n = ++fault_calls_[static_cast<int>(site)];
  if (fault_site_.load() != static_cast<int>(site) || n != fault_nth_.load()) return nullptr;
  return std::make_exception_ptr(
      Error(ErrorCode::DeviceError, fmt::format("{}: injected fault: {} #{} ({})", dev(device).props.name,
                                                fault_site_name(site), n, call)));
}

HostRuntime::HostRuntime(RuntimeOptions options) : options_(options) {
  const size_t memory = options_.memory_per_device > 0 ? options_.memory_per_device : physical_memory();
  for (int i = 0; i < options_.devices; ++i) {
    auto d = std::make_unique<Device>();
    d->props.name = fmt::format("Host{}", i);
    d->props.description = "host memory, a worker thread per stream (Tessera host runtime)";
    d->props.kind = DeviceKind::Accelerator;
    d->props.total_memory = memory;
    d->props.base_alignment = kAlignment;
    d->props.max_allocation = memory;
    d->vm = std::make_unique<HostVirtualMemoryOfDevice>(*this, i, options_.vmm_granularity);
    devices_.push_back(std::move(d));
  }
}

HostRuntime::~HostRuntime() {
  for (auto& d : devices_) {
    // Allocations left behind by their owners (the VMM chunks are released by their pools).
    if (!d->regions.empty())
      log(LogLevel::Debug,
          fmt::format("{}: {} allocations still live at exit", d->props.name, d->regions.size()));
  }
}

HostRuntime::Device& HostRuntime::dev(int device) {
  TESSERA_ASSERT(device >= 0 && device < device_count());
  return *devices_[static_cast<size_t>(device)];
}

const HostRuntime::Device& HostRuntime::dev(int device) const {
  TESSERA_ASSERT(device >= 0 && device < device_count());
  return *devices_[static_cast<size_t>(device)];
}

const device::DeviceProperties& HostRuntime::properties(int device) const { return dev(device).props; }

size_t HostRuntime::free_memory(int device) const {
  const Device& d = dev(device);
  std::shared_lock lock(d.mutex);
  return d.props.total_memory - std::min(d.allocated, d.props.total_memory);
}

bool HostRuntime::can_access_peer(int dst, int src) const {
  dev(dst);
  dev(src);
  return true;
}

// ---------------------------------------------------------------- memory

void HostRuntime::add_region(int device, void* ptr, size_t size) {
  Device& d = dev(device);
  std::unique_lock lock(d.mutex);
  d.regions.emplace(reinterpret_cast<uintptr_t>(ptr), size);
  d.allocated += size;
}

void HostRuntime::remove_region(int device, void* ptr) noexcept {
  Device& d = dev(device);
  std::unique_lock lock(d.mutex);
  auto it = d.regions.find(reinterpret_cast<uintptr_t>(ptr));
  TESSERA_ASSERT(it != d.regions.end());
  d.allocated -= it->second;
  d.regions.erase(it);
}

void* HostRuntime::allocate(int device, size_t size) {
  const Device& d = dev(device);
  size = std::max<size_t>(size, 1);
  const auto fail = [&](std::string_view why) {
    raise(ErrorCode::OutOfMemory, "{}: cannot allocate {:.1f} MiB ({} bytes): {}; {:.1f} MiB free",
          d.props.name, mib(size), size, why, mib(free_memory(device)));
  };
  if (auto e = fault(FaultSite::Allocation, device, "allocate")) std::rethrow_exception(e);
  if (size > free_memory(device)) fail("not enough free memory");
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) fail("the host has no memory for it");
  add_region(device, p, size);
  return p;
}

void HostRuntime::free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  remove_region(device, ptr);
  std::free(ptr);
}

void* HostRuntime::host_alloc(int device, size_t size) {
  dev(device);
  if (auto e = fault(FaultSite::Allocation, device, "host_alloc")) std::rethrow_exception(e);
  // Plain memory: the host's own memory is what its devices "transfer" from.
  void* p =
      std::aligned_alloc(kAlignment, (std::max<size_t>(size, 1) + kAlignment - 1) / kAlignment * kAlignment);
  if (p == nullptr)
    raise(ErrorCode::OutOfMemory, "{}: cannot allocate {:.1f} MiB of host memory", dev(device).props.name,
          mib(size));
  return p;
}

void HostRuntime::host_free(int device, void* ptr) noexcept { std::free(ptr); }

void HostRuntime::check_address(int device, const void* ptr, size_t size, const char* call) const {
  const Device& d = dev(device);
  std::shared_lock lock(d.mutex);
  // [ptr, ptr + size) must be covered by regions that follow each other without a gap (adjacent
  // VMM chunks form one range).
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  auto it = d.regions.upper_bound(begin);
  if (it != d.regions.begin()) {
    --it;
    uintptr_t covered = begin, end = begin + std::max<size_t>(size, 1);
    while (it != d.regions.end() && it->first <= covered && covered < it->first + it->second) {
      covered = it->first + it->second;
      if (covered >= end) return;
      ++it;
    }
  }
  raise(ErrorCode::InvalidArgument, "{}: {}: address {} (+{} bytes) is not in memory of this device",
        d.props.name, call, ptr, size);
}

// ---------------------------------------------------------------- synchronous transfers

void HostRuntime::copy_h2d(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  check_address(device, dst, size, "copy_h2d");
  if (auto e = fault(FaultSite::Copy, device, "copy_h2d")) std::rethrow_exception(e);
  std::memcpy(dst, src, size);
}

void HostRuntime::copy_d2h(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  check_address(device, src, size, "copy_d2h");
  if (auto e = fault(FaultSite::Copy, device, "copy_d2h")) std::rethrow_exception(e);
  std::memcpy(dst, src, size);
}

void HostRuntime::copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t size) {
  if (size == 0) return;
  check_address(dst_device, dst, size, "copy_d2d");
  if (auto e = fault(FaultSite::Copy, dst_device, "copy_d2d")) std::rethrow_exception(e);
  check_address(src_device, src, size, "copy_d2d");
  std::memmove(dst, src, size);
}

void HostRuntime::fill(int device, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  check_address(device, dst, size, "fill");
  if (auto e = fault(FaultSite::Copy, device, "fill")) std::rethrow_exception(e);
  std::memset(dst, value, size);
}

// ---------------------------------------------------------------- streams

std::unique_ptr<device::Stream> HostRuntime::create_stream(int device) {
  const std::string& name = dev(device).props.name;
  try {
    return std::make_unique<HostStream>(device, name);
  } catch (const std::system_error& e) {
    raise(ErrorCode::DeviceError, "{}: cannot start a stream's worker thread: {}", name, e.what());
  }
}

HostStream& HostRuntime::host_stream(device::Stream& stream) const {
  dev(stream.device());
  return static_cast<HostStream&>(stream);
}

void HostRuntime::copy_h2d_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  HostStream& s = host_stream(stream);
  check_address(s.device(), dst, size, "copy_h2d_async");
  s.push([=, failure = fault(FaultSite::Copy, s.device(), "copy_h2d_async")] {
    if (failure) std::rethrow_exception(failure);
    std::memcpy(dst, src, size);
  });
}

void HostRuntime::copy_d2h_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  HostStream& s = host_stream(stream);
  check_address(s.device(), src, size, "copy_d2h_async");
  s.push([=, failure = fault(FaultSite::Copy, s.device(), "copy_d2h_async")] {
    if (failure) std::rethrow_exception(failure);
    std::memcpy(dst, src, size);
  });
}

void HostRuntime::copy_d2d_async(device::Stream& stream, void* dst, int src_device, const void* src,
                                 size_t size) {
  if (size == 0) return;
  HostStream& s = host_stream(stream);
  check_address(s.device(), dst, size, "copy_d2d_async");
  check_address(src_device, src, size, "copy_d2d_async");
  s.push([=, failure = fault(FaultSite::Copy, s.device(), "copy_d2d_async")] {
    if (failure) std::rethrow_exception(failure);
    std::memmove(dst, src, size);
  });
}

void HostRuntime::fill_async(device::Stream& stream, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  HostStream& s = host_stream(stream);
  check_address(s.device(), dst, size, "fill_async");
  s.push([=, failure = fault(FaultSite::Copy, s.device(), "fill_async")] {
    if (failure) std::rethrow_exception(failure);
    std::memset(dst, value, size);
  });
}

void HostRuntime::launch_host_func(device::Stream& stream, std::function<void()> fn) {
  HostStream& s = host_stream(stream);
  s.push([fn = std::move(fn), failure = fault(FaultSite::KernelLaunch, s.device(), "launch_host_func")] {
    if (failure) std::rethrow_exception(failure);
    fn();
  });
}

void HostRuntime::launch_kernel(device::Stream& stream, std::function<void(KernelWorkspace&)> kernel) {
  HostStream& s = host_stream(stream);
  s.push([&s, kernel = std::move(kernel),
          failure = fault(FaultSite::KernelLaunch, s.device(), "launch_kernel")] {
    if (failure) std::rethrow_exception(failure);
    kernel(s.workspace());
  });
}

void HostRuntime::stream_synchronize(device::Stream& stream) {
  if (auto e = host_stream(stream).drain()) std::rethrow_exception(e);
}

// ---------------------------------------------------------------- events

std::unique_ptr<device::StreamEvent> HostRuntime::create_event(int device) {
  dev(device);
  return std::make_unique<HostEvent>();
}

void HostRuntime::event_record(device::StreamEvent& event, device::Stream& stream) {
  HostStream& s = host_stream(stream);
  auto point = std::make_shared<Point>();
  s.push([&s, point] { point->complete(s.current_error()); });
  host_event(event).set(std::move(point));
}

void HostRuntime::stream_wait_event(device::Stream& stream, device::StreamEvent& event) {
  HostStream& s = host_stream(stream);
  auto point = host_event(event).point();
  if (point == nullptr) return;
  s.push([point, failure = fault(FaultSite::EventWait, s.device(), "stream_wait_event")] {
    if (auto e = point->wait()) std::rethrow_exception(e);
    if (failure) std::rethrow_exception(failure);
  });
}

void HostRuntime::event_synchronize(device::StreamEvent& event) {
  auto point = host_event(event).point();
  if (point == nullptr) return;
  if (auto e = point->wait()) std::rethrow_exception(e);
  // Events know no device; the fault names the first (a test arms one runtime at a time).
  if (auto e = fault(FaultSite::EventWait, 0, "event_synchronize")) std::rethrow_exception(e);
}

device::EventStatus HostRuntime::event_query(device::StreamEvent& event) {
  auto point = host_event(event).point();
  if (point == nullptr) return device::EventStatus::NotRecorded;
  std::lock_guard lock(point->mutex);
  if (!point->done) return device::EventStatus::Pending;
  return point->error ? device::EventStatus::Failed : device::EventStatus::Complete;
}

device::VirtualMemory* HostRuntime::virtual_memory(int device) { return dev(device).vm.get(); }

}  // namespace tessera::host
