#include "cuda/runtime.h"

#include <algorithm>
#include <exception>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "device/error_slot.h"
#include "tessera/log.h"

namespace tessera::cuda {
namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

CUdeviceptr dptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
void* vptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// What a stream's host functions leave behind: the first error one threw (kept until
// stream_synchronize takes it; events recorded after it see it too), and the jobs enqueued but not
// yet run. The driver does not call a host function once its context has failed, so the stream
// frees those when it goes.
struct HostJob;
struct StreamState {
  device::ErrorSlot errors;
  std::mutex mutex;  // guards pending
  std::unordered_map<HostJob*, std::unique_ptr<HostJob>> pending;
};

struct HostJob {
  std::function<void()> fn;
  std::shared_ptr<StreamState> state;
};

void run_host_job(void* data) {
  auto* job = static_cast<HostJob*>(data);
  std::shared_ptr<StreamState> state = job->state;
  try {
    job->fn();
  } catch (...) {
    state->errors.set(std::current_exception());
  }
  // The job (and fn's captures) goes before the stream's later work, and any waiter, resumes.
  std::unique_ptr<HostJob> done;
  {
    std::lock_guard lock(state->mutex);
    auto it = state->pending.find(job);
    if (it != state->pending.end()) {
      done = std::move(it->second);
      state->pending.erase(it);
    }
  }
}

class CudaStream final : public device::Stream {
 public:
  CudaStream(int device, const Driver& driver, CUcontext context, CUstream stream, std::string where)
      : Stream(device), driver(&driver), context(context), stream(stream), where(std::move(where)) {}
  ~CudaStream() override {
    driver->cuCtxSetCurrent(context);
    const CUresult r = driver->cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS)
      log(LogLevel::Warn, fmt::format("{}: cuStreamSynchronize failed while destroying a stream: {}", where,
                                      driver->describe(r)));
    driver->cuStreamDestroy(stream);
    std::lock_guard lock(state->mutex);
    state->pending.clear();  // host functions the driver will never run
  }
  const Driver* driver;
  CUcontext context;
  CUstream stream;
  std::string where;  // "CUDA0"
  std::shared_ptr<StreamState> state = std::make_shared<StreamState>();
};

class CudaEvent final : public device::StreamEvent {
 public:
  explicit CudaEvent(const Driver& driver, std::string where) : driver(&driver), where(std::move(where)) {}
  ~CudaEvent() override {
    if (event != nullptr) {
      driver->cuCtxSetCurrent(context);
      driver->cuEventDestroy(event);
    }
  }
  const Driver* driver;
  std::string where;
  CUcontext context = nullptr;  // the context the event was created in (its stream's)
  CUevent event = nullptr;      // created at the first record
  std::shared_ptr<StreamState> state;
};

CudaStream& cu(device::Stream& s) { return static_cast<CudaStream&>(s); }
CudaEvent& cu(device::StreamEvent& e) { return static_cast<CudaEvent&>(e); }

}  // namespace

// ---------------------------------------------------------------- virtual memory

class CudaPhysicalMemory final : public device::PhysicalMemory {
 public:
  CudaPhysicalMemory(const Driver& driver, CUmemGenericAllocationHandle handle, size_t size)
      : PhysicalMemory(size), driver_(&driver), handle_(handle) {}
  ~CudaPhysicalMemory() override { driver_->cuMemRelease(handle_); }
  CUmemGenericAllocationHandle handle() const noexcept { return handle_; }

 private:
  const Driver* driver_;
  CUmemGenericAllocationHandle handle_;
};

class CudaVirtualMemory final : public device::VirtualMemory {
 public:
  CudaVirtualMemory(CudaRuntime& runtime, int device) : rt_(&runtime), device_(device) {
    const CudaRuntime::Device& d = rt_->dev(device_);
    rt_->bind(device_);
    const CUmemAllocationProp prop = properties();
    check(drv(),
          drv().cuMemGetAllocationGranularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          d.props.name, "cuMemGetAllocationGranularity");
    if (granularity_ == 0)
      raise(ErrorCode::DeviceError, "{}: cuMemGetAllocationGranularity gave 0", d.props.name);
  }
  size_t granularity() const override { return granularity_; }

  void* reserve(size_t size) override {
    const auto& d = rt_->dev(device_);
    rt_->bind(device_);
    CUdeviceptr p = 0;
    check(drv(), drv().cuMemAddressReserve(&p, size, granularity_, 0, 0), d.props.name, "cuMemAddressReserve",
          fmt::format("{:.1f} MiB of addresses", mib(size)));
    return vptr(p);
  }

  void release(void* base, size_t size) noexcept override {
    rt_->bind(device_);
    drv().cuMemAddressFree(dptr(base), size);
  }

  std::unique_ptr<device::PhysicalMemory> create_physical(size_t size) override {
    const auto& d = rt_->dev(device_);
    rt_->bind(device_);
    const CUmemAllocationProp prop = properties();
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r = drv().cuMemCreate(&handle, size, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      raise(ErrorCode::OutOfMemory, "{}: cuMemCreate failed: cannot back {:.1f} MiB: {}; {:.1f} MiB free",
            d.props.name, mib(size), drv().describe(r), mib(rt_->free_memory(device_)));
    check(drv(), r, d.props.name, "cuMemCreate", fmt::format("{:.1f} MiB", mib(size)));
    return std::make_unique<CudaPhysicalMemory>(drv(), handle, size);
  }

  void map(void* addr, device::PhysicalMemory& memory) override {
    auto& d = rt_->dev(device_);
    rt_->bind(device_);
    const auto& phys = static_cast<CudaPhysicalMemory&>(memory);
    check(drv(), drv().cuMemMap(dptr(addr), memory.size(), 0, phys.handle(), 0), d.props.name, "cuMemMap");
    // A mapping starts inaccessible: this device reads and writes it (peers are not granted).
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = d.handle;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    const CUresult r = drv().cuMemSetAccess(dptr(addr), memory.size(), &access, 1);
    if (r != CUDA_SUCCESS) {
      drv().cuMemUnmap(dptr(addr), memory.size());
      check(drv(), r, d.props.name, "cuMemSetAccess");
    }
    rt_->add_region(d, reinterpret_cast<uintptr_t>(addr), memory.size(), CudaRuntime::Region::Mapping);
  }

  void unmap(void* addr, size_t size) noexcept override {
    // cuMemUnmap takes whole mappings only: unmap each one the range covers.
    auto& d = rt_->dev(device_);
    rt_->bind(device_);
    const auto begin = reinterpret_cast<uintptr_t>(addr);
    std::unique_lock lock(d.mutex);
    auto it = d.regions.lower_bound(begin);
    while (it != d.regions.end() && it->first < begin + size) {
      if (it->second.second == CudaRuntime::Region::Mapping) {
        const CUresult r = drv().cuMemUnmap(it->first, it->second.first);
        if (r != CUDA_SUCCESS)
          log(LogLevel::Warn, fmt::format("{}: cuMemUnmap failed: {}", d.props.name, drv().describe(r)));
        it = d.regions.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  const Driver& drv() const { return rt_->driver(); }
  CUmemAllocationProp properties() const {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = rt_->dev(device_).handle;
    return prop;
  }

  CudaRuntime* rt_;
  int device_;
  size_t granularity_ = 0;
};

// ---------------------------------------------------------------- devices

CudaRuntime::CudaRuntime(std::shared_ptr<const Driver> driver, int device_count)
    : driver_(std::move(driver)) {
  const Driver& drv = *driver_;
  for (int i = 0; i < device_count; ++i) {
    auto d = std::make_unique<Device>();
    const std::string where = fmt::format("CUDA{}", i);
    check(drv, drv.cuDeviceGet(&d->handle, i), where, "cuDeviceGet");
    char model[256] = {};
    check(drv, drv.cuDeviceGetName(model, sizeof model - 1, d->handle), where, "cuDeviceGetName");
    size_t total = 0;
    check(drv, drv.cuDeviceTotalMem(&total, d->handle), where, "cuDeviceTotalMem");
    const auto attribute = [&](int what, const char* name) {
      int v = 0;
      check(drv, drv.cuDeviceGetAttribute(&v, what, d->handle), where, "cuDeviceGetAttribute", name);
      return v;
    };
    auto& info = d->info;
    info.model = model;
    info.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
    info.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
    info.multiprocessors = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
    info.virtual_memory =
        attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "virtual memory management") != 0;
    info.pci =
        fmt::format("{:04x}:{:02x}:{:02x}.0", attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI domain"),
                    attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI bus"),
                    attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI device"));
    // Device pointers are used as plain addresses, and peer copies take them as they are.
    if (attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified addressing") == 0)
      raise(ErrorCode::Unsupported, "{}: {} has no unified addressing, which Tessera's CUDA runtime needs",
            where, info.model);
    auto& p = d->props;
    p.name = where;
    p.description = fmt::format("{} (sm_{}, {} SMs, PCI {}, CUDA driver {})", info.model, info.arch(),
                                info.multiprocessors, info.pci, version_string(drv.version));
    p.kind = DeviceKind::Gpu;
    p.total_memory = total;
    p.base_alignment = 256;  // cuMemAlloc's guarantee
    p.max_allocation = total;
    d->peer.assign(static_cast<size_t>(device_count), -1);
    log(LogLevel::Debug, fmt::format("CUDA: {} = {}", p.name, p.description));
    devices_.push_back(std::move(d));
  }
}

CudaRuntime::~CudaRuntime() {
  const Driver& drv = *driver_;
  for (auto& d : devices_) {
    d->vm.reset();
    if (d->context == nullptr) continue;
    drv.cuCtxSetCurrent(d->context);
    for (auto& [addr, region] : d->regions)
      if (region.second == Region::Allocation) drv.cuMemFree(addr);
    for (auto& [ptr, size] : d->host_allocations) drv.cuMemFreeHost(ptr);
    if (d->sync_stream != nullptr) drv.cuStreamDestroy(d->sync_stream);
    drv.cuCtxSetCurrent(nullptr);
    drv.cuDevicePrimaryCtxRelease(d->handle);
  }
}

CudaRuntime::Device& CudaRuntime::dev(int device) const {
  TESSERA_ASSERT(device >= 0 && device < device_count());
  return *devices_[static_cast<size_t>(device)];
}

const device::DeviceProperties& CudaRuntime::properties(int device) const { return dev(device).props; }

const CudaDeviceInfo& CudaRuntime::info(int device) const { return dev(device).info; }

CUcontext CudaRuntime::bind(int device) const {
  Device& d = dev(device);
  const Driver& drv = *driver_;
  CUcontext context = nullptr;
  {
    std::lock_guard lock(d.context_mutex);
    if (d.context == nullptr) {
      CUcontext c = nullptr;
      check(drv, drv.cuDevicePrimaryCtxRetain(&c, d.handle), d.props.name, "cuDevicePrimaryCtxRetain");
      const char* call = "cuCtxSetCurrent";
      CUresult r = drv.cuCtxSetCurrent(c);
      CUstream s = nullptr;
      if (r == CUDA_SUCCESS) {
        call = "cuStreamCreate";
        r = drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
      }
      if (r != CUDA_SUCCESS) {
        drv.cuDevicePrimaryCtxRelease(d.handle);
        check(drv, r, d.props.name, call);
      }
      d.sync_stream = s;
      d.context = c;
    }
    context = d.context;
  }
  check(drv, drv.cuCtxSetCurrent(context), d.props.name, "cuCtxSetCurrent");
  return context;
}

size_t CudaRuntime::free_memory(int device) const {
  const Device& d = dev(device);
  bind(device);
  size_t free = 0, total = 0;
  check(*driver_, driver_->cuMemGetInfo(&free, &total), d.props.name, "cuMemGetInfo");
  return free;
}

bool CudaRuntime::can_access_peer(int dst, int src) const {
  if (dst == src) return true;
  Device& d = dev(dst);
  const Device& s = dev(src);
  {
    std::shared_lock lock(d.mutex);
    if (d.peer[static_cast<size_t>(src)] >= 0) return d.peer[static_cast<size_t>(src)] == 1;
  }
  const Driver& drv = *driver_;
  int can = 0;
  check(drv, drv.cuDeviceCanAccessPeer(&can, d.handle, s.handle), d.props.name, "cuDeviceCanAccessPeer",
        s.props.name);
  if (can != 0) {
    const CUcontext peer = bind(src);
    bind(dst);
    const CUresult r = drv.cuCtxEnablePeerAccess(peer, 0);
    if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
      check(drv, r, d.props.name, "cuCtxEnablePeerAccess", s.props.name);
  }
  std::unique_lock lock(d.mutex);
  d.peer[static_cast<size_t>(src)] = can != 0 ? 1 : 0;
  return can != 0;
}

// ---------------------------------------------------------------- memory

void CudaRuntime::add_region(Device& d, uintptr_t start, size_t size, Region kind) {
  std::unique_lock lock(d.mutex);
  d.regions[start] = {size, kind};
}

void CudaRuntime::check_range(const Device& d, const void* ptr, size_t size, std::string_view call) const {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock lock(d.mutex);
  auto it = d.regions.upper_bound(addr);
  if (it != d.regions.begin()) {
    --it;
    // The range may run on through regions that follow each other with no gap (the VMM pool's
    // chunks, mapped one after another in one reservation).
    uintptr_t end = it->first + it->second.first;
    while (addr < end && end - addr < size) {
      auto next = std::next(it);
      if (next == d.regions.end() || next->first != end) break;
      it = next;
      end = it->first + it->second.first;
    }
    if (addr < end && size <= end - addr) return;
  }
  raise(ErrorCode::InvalidArgument, "{}: {}: address {} (+{} bytes) is not in device memory of this device",
        d.props.name, call, ptr, size);
}

void* CudaRuntime::allocate(int device, size_t size) {
  Device& d = dev(device);
  size = std::max<size_t>(size, 1);
  bind(device);
  if (size > d.props.max_allocation)
    raise(ErrorCode::OutOfMemory,
          "{} ({}): cannot allocate {:.1f} MiB ({} bytes): larger than the device; {:.1f} MiB free",
          d.props.name, d.info.model, mib(size), size, mib(free_memory(device)));
  CUdeviceptr p = 0;
  const CUresult r = driver_->cuMemAlloc(&p, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    raise(ErrorCode::OutOfMemory,
          "{} ({}): cuMemAlloc failed: cannot allocate {:.1f} MiB ({} bytes): {}; {:.1f} MiB free",
          d.props.name, d.info.model, mib(size), size, driver_->describe(r), mib(free_memory(device)));
  check(*driver_, r, d.props.name, "cuMemAlloc", fmt::format("{:.1f} MiB", mib(size)));
  add_region(d, static_cast<uintptr_t>(p), size, Region::Allocation);
  return vptr(p);
}

void CudaRuntime::free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  Device& d = dev(device);
  {
    std::unique_lock lock(d.mutex);
    auto it = d.regions.find(reinterpret_cast<uintptr_t>(ptr));
    TESSERA_ASSERT(it != d.regions.end() && it->second.second == Region::Allocation);
    d.regions.erase(it);
  }
  try {
    bind(device);
  } catch (const Error& e) {
    log(LogLevel::Warn, e.what());
    return;
  }
  // cuMemFree waits for the device's queued work before it frees (the driver's implicit
  // synchronization), so work still reading the memory completes first.
  const CUresult r = driver_->cuMemFree(dptr(ptr));
  if (r != CUDA_SUCCESS)
    log(LogLevel::Warn, fmt::format("{}: cuMemFree failed: {}", d.props.name, driver_->describe(r)));
}

void* CudaRuntime::host_alloc(int device, size_t size) {
  Device& d = dev(device);
  bind(device);
  void* p = nullptr;
  // Portable: pinned for every context, so any device's stream copies from it at full speed.
  const CUresult r = driver_->cuMemHostAlloc(&p, std::max<size_t>(size, 1), CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    raise(ErrorCode::OutOfMemory, "{}: cuMemHostAlloc failed: cannot pin {:.1f} MiB of host memory: {}",
          d.props.name, mib(size), driver_->describe(r));
  check(*driver_, r, d.props.name, "cuMemHostAlloc",
        fmt::format("{:.1f} MiB of pinned host memory", mib(size)));
  std::lock_guard lock(d.host_mutex);
  d.host_allocations.emplace(p, size);
  return p;
}

void CudaRuntime::host_free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  Device& d = dev(device);
  {
    std::lock_guard lock(d.host_mutex);
    auto it = d.host_allocations.find(ptr);
    TESSERA_ASSERT(it != d.host_allocations.end());
    d.host_allocations.erase(it);
  }
  try {
    bind(device);
  } catch (const Error& e) {
    log(LogLevel::Warn, e.what());
    return;
  }
  const CUresult r = driver_->cuMemFreeHost(ptr);
  if (r != CUDA_SUCCESS)
    log(LogLevel::Warn, fmt::format("{}: cuMemFreeHost failed: {}", d.props.name, driver_->describe(r)));
}

// ---------------------------------------------------------------- synchronous transfers

void CudaRuntime::wait(const Device& d, std::string_view call) const {
  const CUresult r = driver_->cuStreamSynchronize(d.sync_stream);
  if (r != CUDA_SUCCESS) check(*driver_, r, d.props.name, fmt::format("cuStreamSynchronize after {}", call));
}

void CudaRuntime::copy_h2d(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  check_range(d, dst, size, "cuMemcpyHtoDAsync");
  bind(device);
  check(*driver_, driver_->cuMemcpyHtoDAsync(dptr(dst), src, size, d.sync_stream), d.props.name,
        "cuMemcpyHtoDAsync");
  wait(d, "cuMemcpyHtoDAsync");
}

void CudaRuntime::copy_d2h(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  check_range(d, src, size, "cuMemcpyDtoHAsync");
  bind(device);
  check(*driver_, driver_->cuMemcpyDtoHAsync(dst, dptr(src), size, d.sync_stream), d.props.name,
        "cuMemcpyDtoHAsync");
  wait(d, "cuMemcpyDtoHAsync");
}

void CudaRuntime::copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(dst_device);
  const Device& s = dev(src_device);
  if (!can_access_peer(dst_device, src_device))
    raise(ErrorCode::Unsupported, "{}: no peer access to {} (cuDeviceCanAccessPeer said no)", d.props.name,
          s.props.name);
  check_range(d, dst, size, "copy_d2d");
  check_range(s, src, size, "copy_d2d");
  if (dst_device == src_device) {
    bind(dst_device);
    check(*driver_, driver_->cuMemcpyDtoDAsync(dptr(dst), dptr(src), size, d.sync_stream), d.props.name,
          "cuMemcpyDtoDAsync");
    wait(d, "cuMemcpyDtoDAsync");
    return;
  }
  const CUcontext from = bind(src_device);
  const CUcontext to = bind(dst_device);
  check(*driver_, driver_->cuMemcpyPeerAsync(dptr(dst), to, dptr(src), from, size, d.sync_stream),
        d.props.name, "cuMemcpyPeerAsync", fmt::format("from {}", s.props.name));
  wait(d, "cuMemcpyPeerAsync");
}

void CudaRuntime::fill(int device, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  check_range(d, dst, size, "cuMemsetD8Async");
  bind(device);
  check(*driver_, driver_->cuMemsetD8Async(dptr(dst), value, size, d.sync_stream), d.props.name,
        "cuMemsetD8Async");
  wait(d, "cuMemsetD8Async");
}

// ---------------------------------------------------------------- streams

std::unique_ptr<device::Stream> CudaRuntime::create_stream(int device) {
  const Device& d = dev(device);
  const CUcontext context = bind(device);
  CUstream s = nullptr;
  check(*driver_, driver_->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), d.props.name, "cuStreamCreate");
  return std::make_unique<CudaStream>(device, *driver_, context, s, d.props.name);
}

CUstream CudaRuntime::native(device::Stream& stream) {
  bind(stream.device());
  return cu(stream).stream;
}

void CudaRuntime::copy_h2d_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  CudaStream& s = cu(stream);
  check_range(dev(s.device()), dst, size, "cuMemcpyHtoDAsync");
  bind(s.device());
  check(*driver_, driver_->cuMemcpyHtoDAsync(dptr(dst), src, size, s.stream), s.where, "cuMemcpyHtoDAsync");
}

void CudaRuntime::copy_d2h_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  CudaStream& s = cu(stream);
  check_range(dev(s.device()), src, size, "cuMemcpyDtoHAsync");
  bind(s.device());
  check(*driver_, driver_->cuMemcpyDtoHAsync(dst, dptr(src), size, s.stream), s.where, "cuMemcpyDtoHAsync");
}

void CudaRuntime::copy_d2d_async(device::Stream& stream, void* dst, int src_device, const void* src,
                                 size_t size) {
  if (size == 0) return;
  CudaStream& s = cu(stream);
  const Device& d = dev(s.device());
  const Device& from = dev(src_device);
  if (!can_access_peer(s.device(), src_device))
    raise(ErrorCode::Unsupported, "{}: no peer access to {} (cuDeviceCanAccessPeer said no)", s.where,
          from.props.name);
  check_range(d, dst, size, "copy_d2d_async");
  check_range(from, src, size, "copy_d2d_async");
  if (src_device == s.device()) {
    bind(s.device());
    check(*driver_, driver_->cuMemcpyDtoDAsync(dptr(dst), dptr(src), size, s.stream), s.where,
          "cuMemcpyDtoDAsync");
    return;
  }
  const CUcontext src_context = bind(src_device);
  const CUcontext dst_context = bind(s.device());
  check(*driver_, driver_->cuMemcpyPeerAsync(dptr(dst), dst_context, dptr(src), src_context, size, s.stream),
        s.where, "cuMemcpyPeerAsync", fmt::format("from {}", from.props.name));
}

void CudaRuntime::fill_async(device::Stream& stream, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  CudaStream& s = cu(stream);
  check_range(dev(s.device()), dst, size, "cuMemsetD8Async");
  bind(s.device());
  check(*driver_, driver_->cuMemsetD8Async(dptr(dst), value, size, s.stream), s.where, "cuMemsetD8Async");
}

void CudaRuntime::launch_host_func(device::Stream& stream, std::function<void()> fn) {
  CudaStream& s = cu(stream);
  auto job = std::make_unique<HostJob>();
  job->fn = std::move(fn);
  job->state = s.state;
  HostJob* raw = job.get();
  {
    std::lock_guard lock(s.state->mutex);
    s.state->pending.emplace(raw, std::move(job));
  }
  bind(s.device());
  const CUresult r = driver_->cuLaunchHostFunc(s.stream, &run_host_job, raw);
  if (r != CUDA_SUCCESS) {
    {
      std::lock_guard lock(s.state->mutex);
      s.state->pending.erase(raw);
    }
    check(*driver_, r, s.where, "cuLaunchHostFunc");
  }
}

void CudaRuntime::stream_synchronize(device::Stream& stream) {
  CudaStream& s = cu(stream);
  bind(s.device());
  const CUresult r = driver_->cuStreamSynchronize(s.stream);
  if (auto e = s.state->errors.take()) std::rethrow_exception(e);
  check(*driver_, r, s.where, "cuStreamSynchronize");
}

// ---------------------------------------------------------------- events

std::unique_ptr<device::StreamEvent> CudaRuntime::create_event(int device) {
  // The driver event is made at the first record, in the recording stream's context.
  return std::make_unique<CudaEvent>(*driver_, dev(device).props.name);
}

void CudaRuntime::event_record(device::StreamEvent& event, device::Stream& stream) {
  CudaEvent& e = cu(event);
  CudaStream& s = cu(stream);
  bind(s.device());
  if (e.event != nullptr && e.context != s.context) {
    driver_->cuCtxSetCurrent(e.context);
    driver_->cuEventDestroy(e.event);
    e.event = nullptr;
    bind(s.device());
  }
  if (e.event == nullptr) {
    check(*driver_, driver_->cuEventCreate(&e.event, CU_EVENT_DISABLE_TIMING), s.where, "cuEventCreate");
    e.context = s.context;
  }
  check(*driver_, driver_->cuEventRecord(e.event, s.stream), s.where, "cuEventRecord");
  e.where = s.where;
  e.state = s.state;
}

void CudaRuntime::stream_wait_event(device::Stream& stream, device::StreamEvent& event) {
  CudaEvent& e = cu(event);
  CudaStream& s = cu(stream);
  if (e.event == nullptr) return;
  bind(s.device());
  // Events wait across contexts (devices) directly.
  check(*driver_, driver_->cuStreamWaitEvent(s.stream, e.event, 0), s.where, "cuStreamWaitEvent",
        fmt::format("an event of {}", e.where));
}

void CudaRuntime::event_synchronize(device::StreamEvent& event) {
  CudaEvent& e = cu(event);
  if (e.event == nullptr) return;
  driver_->cuCtxSetCurrent(e.context);
  const CUresult r = driver_->cuEventSynchronize(e.event);
  if (e.state)
    if (auto error = e.state->errors.peek()) std::rethrow_exception(error);
  check(*driver_, r, e.where, "cuEventSynchronize");
}

device::EventStatus CudaRuntime::event_query(device::StreamEvent& event) {
  CudaEvent& e = cu(event);
  if (e.event == nullptr) return device::EventStatus::NotRecorded;
  driver_->cuCtxSetCurrent(e.context);
  const CUresult r = driver_->cuEventQuery(e.event);
  if (r == CUDA_ERROR_NOT_READY) return device::EventStatus::Pending;
  if (r != CUDA_SUCCESS || (e.state && e.state->errors.peek())) return device::EventStatus::Failed;
  return device::EventStatus::Complete;
}

// ---------------------------------------------------------------- virtual memory

device::VirtualMemory* CudaRuntime::virtual_memory(int device) {
  Device& d = dev(device);
  if (!d.info.virtual_memory) return nullptr;
  std::lock_guard lock(d.vm_mutex);
  if (!d.vm) d.vm = std::make_unique<CudaVirtualMemory>(*this, device);
  return d.vm.get();
}

}  // namespace tessera::cuda
