#include "opencl/runtime.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <utility>

#include "core/binary_cache.h"
#include "core/check.h"
#include "core/env.h"
#include "device/error_slot.h"
#include "tessera/log.h"

namespace tessera::opencl {
namespace {

constexpr cl_uint kAmdFreeMemory = 0x4039;  // CL_DEVICE_GLOBAL_FREE_MEMORY_AMD: KiB, from cl_ext.h
constexpr uintptr_t kAddressSpace = uintptr_t{1} << 42;  // per device, for the address table
constexpr size_t kAddressAlign = 4096;

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string device_string(cl_device_id id, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(id, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetDeviceInfo(id, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id id, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(id, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetPlatformInfo(id, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id id, cl_device_info what) {
  T v{};
  clGetDeviceInfo(id, what, sizeof v, &v, nullptr);
  return v;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "OpenCL 1.2 ..." -> 102
int version_of(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor;
}

// The filter's comma-separated entries, trimmed, empty ones dropped.
std::vector<std::string> filter_entries(const std::string& filter) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start <= filter.size()) {
    size_t end = filter.find(',', start);
    if (end == std::string::npos) end = filter.size();
    std::string token = filter.substr(start, end - start);
    token.erase(0, token.find_first_not_of(' '));
    token.erase(token.find_last_not_of(' ') + 1);
    if (!token.empty()) entries.push_back(std::move(token));
    start = end + 1;
  }
  return entries;
}

// Whether this process can still map `size` bytes (what an OpenCL CPU device will malloc), with
// room for the driver's own bookkeeping. PoCL asserts (SIGABRT) when its allocation fails.
bool address_space_left(size_t size) {
  const size_t probe = size + (size_t{16} << 20);
  void* p = mmap(nullptr, probe, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  munmap(p, probe);
  return true;
}

// An entry is a device index (enumeration order over all platforms) or part of its name.
bool matches(const std::string& entry, int index, const std::string& label) {
  const bool numeric = std::all_of(entry.begin(), entry.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  return numeric ? std::atoi(entry.c_str()) == index : lower(label).find(lower(entry)) != std::string::npos;
}

bool selected(const std::string& filter, int index, const std::string& label) {
  if (filter.empty()) return true;
  for (const std::string& entry : filter_entries(filter))
    if (matches(entry, index, label)) return true;
  return false;
}

// "none" asks for no OpenCL device; any other entry that matches no device is a mistake worth a
// warning, or the user only learns later that "OpenCL0" is unknown.
void warn_unmatched(const std::string& filter, const std::vector<std::string>& labels) {
  if (filter.empty() || lower(filter) == "none") return;
  std::string devices;
  for (size_t i = 0; i < labels.size(); ++i) devices += fmt::format("{}{}: {}", i ? "; " : "", i, labels[i]);
  for (const std::string& entry : filter_entries(filter)) {
    bool any = false;
    for (size_t i = 0; i < labels.size() && !any; ++i) any = matches(entry, static_cast<int>(i), labels[i]);
    if (!any)
      log(LogLevel::Warn,
          fmt::format(
              "OpenCL: TESSERA_OPENCL_DEVICES entry '{}' matches no device (an index or part of a name; {})",
              entry, labels.empty() ? std::string("no OpenCL device is present") : "devices: " + devices));
  }
}

using device::ErrorSlot;

struct HostJob {
  std::function<void()> fn;
  std::shared_ptr<ErrorSlot> errors;
  cl_event done;  // user event the queue's later work waits for
  std::string where;
};

void CL_CALLBACK run_host_job(cl_event event, cl_int status, void* data) {
  std::unique_ptr<HostJob> job(static_cast<HostJob*>(data));
  if (status < 0) {
    job->errors->set(std::make_exception_ptr(
        Error(ErrorCode::DeviceError,
              fmt::format("{}: earlier work on the queue failed: {}", job->where, cl_error_name(status)))));
  } else {
    try {
      job->fn();
    } catch (...) {
      job->errors->set(std::current_exception());
    }
  }
  job->fn = nullptr;  // its captures go before anyone waiting on the stream resumes
  clSetUserEventStatus(job->done, CL_COMPLETE);
  clReleaseEvent(job->done);
  clReleaseEvent(event);
}

struct Bridge {
  cl_event target;  // user event in the waiting queue's context
};

void CL_CALLBACK complete_bridge(cl_event event, cl_int /*status*/, void* data) {
  std::unique_ptr<Bridge> b(static_cast<Bridge*>(data));
  clSetUserEventStatus(b->target, CL_COMPLETE);
  clReleaseEvent(b->target);
  clReleaseEvent(event);
}

}  // namespace

class ClStream final : public device::Stream {
 public:
  ClStream(int device, cl_context context, cl_command_queue queue, std::string where)
      : Stream(device), context(context), queue(queue), where(std::move(where)) {}
  ~ClStream() override {
    clFinish(queue);
    for (auto& [name, k] : kernels) clReleaseKernel(k);
    clReleaseCommandQueue(queue);
  }
  cl_context context;
  cl_command_queue queue;
  std::string where;  // "OpenCL0"
  std::shared_ptr<ErrorSlot> errors = std::make_shared<ErrorSlot>();
  std::unordered_map<std::string, cl_kernel> kernels;  // per stream: clSetKernelArg is not thread-safe
};

namespace {

class ClEvent final : public device::StreamEvent {
 public:
  ~ClEvent() override {
    if (event != nullptr) clReleaseEvent(event);
  }
  cl_event event = nullptr;
  cl_context context = nullptr;
  std::string where;
  std::shared_ptr<ErrorSlot> errors;
};

ClStream& cl(device::Stream& s) { return static_cast<ClStream&>(s); }
ClEvent& cl(device::StreamEvent& e) { return static_cast<ClEvent&>(e); }

}  // namespace

RuntimeOptions default_options() {
  RuntimeOptions o;
  o.devices = env_string("TESSERA_OPENCL_DEVICES").value_or("");
  o.cache_dir = BinaryCache::default_dir("TESSERA_OPENCL_CACHE_DIR", "opencl");
  return o;
}

OpenClRuntime::OpenClRuntime(RuntimeOptions options) : options_(std::move(options)) { enumerate(); }

OpenClRuntime::~OpenClRuntime() {
  for (auto& d : devices_) {
    for (auto& [name, p] : d->programs) clReleaseProgram(p);
    for (auto& [addr, a] : d->allocations) clReleaseMemObject(a.mem);
  }
  for (auto& [ptr, a] : host_allocations_) clReleaseMemObject(a.mem);
  for (auto& d : devices_)
    if (d->queue != nullptr) clReleaseCommandQueue(d->queue);
  for (cl_context c : contexts_) clReleaseContext(c);
}

void OpenClRuntime::enumerate() {
  cl_uint n_platforms = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &n_platforms);
  if (err != CL_SUCCESS || n_platforms == 0) {
    log(LogLevel::Debug, fmt::format("OpenCL: no platform ({})", cl_error_name(err)));
    return;
  }
  std::vector<cl_platform_id> platforms(n_platforms);
  check(clGetPlatformIDs(n_platforms, platforms.data(), nullptr), "OpenCL", "clGetPlatformIDs");
  int index = 0;  // enumeration order over all platforms, what TESSERA_OPENCL_DEVICES indexes
  std::vector<std::string> labels;  // every device by index, for the filter's warning
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> ids(n);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
    const std::string platform_name = platform_string(platform, CL_PLATFORM_NAME);
    const std::string platform_version = platform_string(platform, CL_PLATFORM_VERSION);
    std::vector<cl_device_id> chosen;
    for (cl_device_id id : ids) {
      const int i = index++;
      const auto type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
      const std::string vendor = device_string(id, CL_DEVICE_VENDOR);
      const std::string model = device_string(id, CL_DEVICE_NAME);
      const std::string driver = device_string(id, CL_DRIVER_VERSION);
      const std::string version = device_string(id, CL_DEVICE_VERSION);
      labels.push_back(platform_name + " " + vendor + " " + model);
      if (!(type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_ACCELERATOR))) continue;
      if (!selected(options_.devices, i, platform_name + " " + vendor + " " + model)) continue;
      if (!device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) || version_of(version) < 102) {
        log(LogLevel::Info, fmt::format("OpenCL: skipping {} {} ({}: unavailable or before OpenCL 1.2)",
                                        vendor, model, version));
        continue;
      }
      auto d = std::make_unique<Device>();
      d->platform = platform;
      d->id = id;
      auto& p = d->props;
      p.name = fmt::format("OpenCL{}", devices_.size());
      p.description = fmt::format("{} {} ({})", vendor, model, driver);
      // An OpenCL CPU device is still driven as an accelerator: its own queue and memory.
      p.kind = (type & CL_DEVICE_TYPE_GPU) ? DeviceKind::Gpu : DeviceKind::Accelerator;
      p.total_memory = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      p.base_alignment = std::max<size_t>(1, device_value<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
      p.max_allocation = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      const std::string extensions = device_string(id, CL_DEVICE_EXTENSIONS);
      d->amd_free_memory = extensions.find("cl_amd_device_attribute_query") != std::string::npos;
      d->memory_is_the_process = (type & CL_DEVICE_TYPE_CPU) != 0;
      // Exact f32 division where the device offers it (the quantizers divide).
      const auto fp = device_value<cl_device_fp_config>(id, CL_DEVICE_SINGLE_FP_CONFIG);
      d->build_options = "-cl-std=CL1.2";
      if (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)
        d->build_options += " -cl-fp32-correctly-rounded-divide-sqrt";
      d->cache_key = platform_name + "|" + platform_version + "|" + vendor + "|" + model + "|" + driver +
                     "|" + version + "|" + d->build_options;
      d->next_address = kAddressSpace * (devices_.size() + 1);
      chosen.push_back(id);
      devices_.push_back(std::move(d));
    }
    // One context for the platform's devices (buffers and events shared), or one per device.
    const size_t first = devices_.size() - chosen.size();
    const size_t groups = options_.context_per_device ? chosen.size() : (chosen.empty() ? 0 : 1);
    for (size_t g = 0; g < groups; ++g) {
      const cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                             reinterpret_cast<cl_context_properties>(platform), 0};
      const cl_uint count = options_.context_per_device ? 1 : static_cast<cl_uint>(chosen.size());
      const cl_device_id* list = options_.context_per_device ? &chosen[g] : chosen.data();
      cl_int e = CL_SUCCESS;
      cl_context context = clCreateContext(props, count, list, nullptr, nullptr, &e);
      check(e, platform_name, "clCreateContext");
      contexts_.push_back(context);
      for (size_t k = 0; k < count; ++k) devices_[first + g + k]->context = context;
    }
  }
  warn_unmatched(options_.devices, labels);
  for (auto& d : devices_) {
    cl_int e = CL_SUCCESS;
    d->queue = clCreateCommandQueue(d->context, d->id, 0, &e);
    check(e, d->props.name, "clCreateCommandQueue");
    log(LogLevel::Debug, fmt::format("OpenCL: {} = {}", d->props.name, d->props.description));
  }
}

OpenClRuntime::Device& OpenClRuntime::dev(int device) {
  TESSERA_ASSERT(device >= 0 && device < device_count());
  return *devices_[static_cast<size_t>(device)];
}

const OpenClRuntime::Device& OpenClRuntime::dev(int device) const {
  TESSERA_ASSERT(device >= 0 && device < device_count());
  return *devices_[static_cast<size_t>(device)];
}

const device::DeviceProperties& OpenClRuntime::properties(int device) const { return dev(device).props; }

size_t OpenClRuntime::free_memory(int device) const {
  const Device& d = dev(device);
  if (d.amd_free_memory) {
    size_t kib[2] = {0, 0};
    if (clGetDeviceInfo(d.id, kAmdFreeMemory, sizeof kib, kib, nullptr) == CL_SUCCESS && kib[0] > 0)
      return kib[0] * 1024;
  }
  // No standard query: what this process has not allocated.
  const size_t used = d.allocated.load();
  return d.props.total_memory > used ? d.props.total_memory - used : 0;
}

bool OpenClRuntime::can_access_peer(int dst, int src) const { return dev(dst).context == dev(src).context; }

// ---------------------------------------------------------------- memory

void* OpenClRuntime::allocate(int device, size_t size) {
  Device& d = dev(device);
  size = std::max<size_t>(size, 1);
  const auto fail = [&](std::string_view why) {
    raise(ErrorCode::OutOfMemory, "{} ({}): cannot allocate {:.1f} MiB ({} bytes): {}; {:.1f} MiB free",
          d.props.name, d.props.description, mib(size), size, why, mib(free_memory(device)));
  };
  if (size > d.props.max_allocation)
    fail(fmt::format("larger than the device's largest allocation of {:.1f} MiB",
                     mib(d.props.max_allocation)));
  if (size > free_memory(device)) fail("not enough free memory");
  if (d.memory_is_the_process && !address_space_left(size))
    fail(
        "the device takes its memory from this process, which has no address space left for it (ulimit -v?)");
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(d.context, CL_MEM_READ_WRITE, size, nullptr, &err);
  if (err != CL_SUCCESS) fail(fmt::format("clCreateBuffer failed: {}", cl_error_name(err)));
  // Drivers allocate at first use: touch the last byte now so a failure is reported here.
  const uint8_t zero = 0;
  cl_event ev = nullptr;
  err = clEnqueueFillBuffer(d.queue, mem, &zero, 1, size - 1, 1, 0, nullptr, &ev);
  if (err == CL_SUCCESS) {
    err = clWaitForEvents(1, &ev);
    cl_int status = CL_COMPLETE;
    clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    if (err == CL_SUCCESS && status < 0) err = status;
    clReleaseEvent(ev);
  }
  if (err != CL_SUCCESS) {
    clReleaseMemObject(mem);
    fail(fmt::format("the device could not back it ({})", cl_error_name(err)));
  }
  std::unique_lock lock(d.mutex);
  const uintptr_t addr = d.next_address;
  d.next_address += (size + kAddressAlign - 1) / kAddressAlign * kAddressAlign;
  TESSERA_ASSERT(d.next_address < kAddressSpace * (static_cast<uintptr_t>(device) + 2));
  d.allocations.emplace(addr, Allocation{mem, size});
  d.allocated += size;
  return reinterpret_cast<void*>(addr);
}

void OpenClRuntime::free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  Device& d = dev(device);
  std::unique_lock lock(d.mutex);
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  TESSERA_ASSERT(it != d.allocations.end());
  // The driver keeps the buffer alive until queued commands that use it are done.
  clReleaseMemObject(it->second.mem);
  d.allocated -= it->second.size;
  d.allocations.erase(it);
}

void* OpenClRuntime::host_alloc(int device, size_t size) {
  Device& d = dev(device);
  if (!address_space_left(size))
    raise(ErrorCode::OutOfMemory,
          "{}: cannot allocate {:.1f} MiB of pinned host memory: no address space left (ulimit -v?)",
          d.props.name, mib(size));
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr, &err);
  check(err, d.props.name, "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)",
        fmt::format("{:.1f} MiB of pinned host memory", mib(size)));
  void* p = clEnqueueMapBuffer(d.queue, mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, nullptr,
                               nullptr, &err);
  if (err != CL_SUCCESS) {
    clReleaseMemObject(mem);
    check(err, d.props.name, "clEnqueueMapBuffer",
          fmt::format("{:.1f} MiB of pinned host memory", mib(size)));
  }
  std::lock_guard lock(host_mutex_);
  host_allocations_.emplace(p, Allocation{mem, size});
  return p;
}

void OpenClRuntime::host_free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  Allocation a{};
  {
    std::lock_guard lock(host_mutex_);
    auto it = host_allocations_.find(ptr);
    TESSERA_ASSERT(it != host_allocations_.end());
    a = it->second;
    host_allocations_.erase(it);
  }
  Device& d = dev(device);
  clEnqueueUnmapMemObject(d.queue, a.mem, ptr, 0, nullptr, nullptr);
  clReleaseMemObject(a.mem);
}

ClAddress OpenClRuntime::resolve_locked(const Device& d, const void* ptr, size_t size) const {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = d.allocations.upper_bound(addr);
  if (it != d.allocations.begin()) {
    --it;
    const size_t offset = addr - it->first;
    if (offset < it->second.size && size <= it->second.size - offset) return {it->second.mem, offset};
  }
  raise(ErrorCode::InvalidArgument, "{}: address {} (+{} bytes) is not in a buffer of this device",
        d.props.name, ptr, size);
}

ClAddress OpenClRuntime::resolve(int device, const void* ptr, size_t size) const {
  const Device& d = dev(device);
  std::shared_lock lock(d.mutex);
  return resolve_locked(d, ptr, size);
}

// ---------------------------------------------------------------- synchronous transfers

void OpenClRuntime::wait_and_release(const Device& d, cl_event event, std::string_view call) const {
  cl_int err = clWaitForEvents(1, &event);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  clReleaseEvent(event);
  check(err, d.props.name, call);
  check(status < 0 ? status : CL_SUCCESS, d.props.name, call);
}

void OpenClRuntime::copy_h2d(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  const ClAddress a = resolve(device, dst, size);
  check(clEnqueueWriteBuffer(d.queue, a.mem, CL_TRUE, a.offset, size, src, 0, nullptr, nullptr), d.props.name,
        "clEnqueueWriteBuffer");
}

void OpenClRuntime::copy_d2h(int device, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  const ClAddress a = resolve(device, src, size);
  check(clEnqueueReadBuffer(d.queue, a.mem, CL_TRUE, a.offset, size, dst, 0, nullptr, nullptr), d.props.name,
        "clEnqueueReadBuffer");
}

void OpenClRuntime::copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t size) {
  if (size == 0) return;
  const Device& d = dev(dst_device);
  if (!can_access_peer(dst_device, src_device))
    raise(ErrorCode::Unsupported, "{}: no device-to-device copy from {} (different OpenCL contexts)",
          d.props.name, dev(src_device).props.name);
  const ClAddress to = resolve(dst_device, dst, size);
  const ClAddress from = resolve(src_device, src, size);
  cl_event ev = nullptr;
  check(clEnqueueCopyBuffer(d.queue, from.mem, to.mem, from.offset, to.offset, size, 0, nullptr, &ev),
        d.props.name, "clEnqueueCopyBuffer");
  wait_and_release(d, ev, "clEnqueueCopyBuffer");
}

void OpenClRuntime::fill(int device, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  const Device& d = dev(device);
  const ClAddress a = resolve(device, dst, size);
  cl_event ev = nullptr;
  check(clEnqueueFillBuffer(d.queue, a.mem, &value, 1, a.offset, size, 0, nullptr, &ev), d.props.name,
        "clEnqueueFillBuffer");
  wait_and_release(d, ev, "clEnqueueFillBuffer");
}

// ---------------------------------------------------------------- streams

std::unique_ptr<device::Stream> OpenClRuntime::create_stream(int device) {
  Device& d = dev(device);
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueue(d.context, d.id, 0, &err);
  check(err, d.props.name, "clCreateCommandQueue");
  return std::make_unique<ClStream>(device, d.context, q, d.props.name);
}

cl_command_queue OpenClRuntime::queue(device::Stream& stream) const { return cl(stream).queue; }

void OpenClRuntime::copy_h2d_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  ClStream& s = cl(stream);
  const ClAddress a = resolve(s.device(), dst, size);
  check(clEnqueueWriteBuffer(s.queue, a.mem, CL_FALSE, a.offset, size, src, 0, nullptr, nullptr), s.where,
        "clEnqueueWriteBuffer");
}

void OpenClRuntime::copy_d2h_async(device::Stream& stream, void* dst, const void* src, size_t size) {
  if (size == 0) return;
  ClStream& s = cl(stream);
  const ClAddress a = resolve(s.device(), src, size);
  check(clEnqueueReadBuffer(s.queue, a.mem, CL_FALSE, a.offset, size, dst, 0, nullptr, nullptr), s.where,
        "clEnqueueReadBuffer");
}

void OpenClRuntime::copy_d2d_async(device::Stream& stream, void* dst, int src_device, const void* src,
                                   size_t size) {
  if (size == 0) return;
  ClStream& s = cl(stream);
  if (!can_access_peer(s.device(), src_device))
    raise(ErrorCode::Unsupported, "{}: no device-to-device copy from {} (different OpenCL contexts)", s.where,
          dev(src_device).props.name);
  const ClAddress to = resolve(s.device(), dst, size);
  const ClAddress from = resolve(src_device, src, size);
  check(clEnqueueCopyBuffer(s.queue, from.mem, to.mem, from.offset, to.offset, size, 0, nullptr, nullptr),
        s.where, "clEnqueueCopyBuffer");
}

void OpenClRuntime::fill_async(device::Stream& stream, void* dst, uint8_t value, size_t size) {
  if (size == 0) return;
  ClStream& s = cl(stream);
  const ClAddress a = resolve(s.device(), dst, size);
  check(clEnqueueFillBuffer(s.queue, a.mem, &value, 1, a.offset, size, 0, nullptr, nullptr), s.where,
        "clEnqueueFillBuffer");
}

void OpenClRuntime::launch_host_func(device::Stream& stream, std::function<void()> fn) {
  // A marker completes when the queue's earlier work has; its callback runs fn and then sets a
  // user event that a barrier holds the queue's later work behind.
  ClStream& s = cl(stream);
  cl_int err = CL_SUCCESS;
  cl_event done = clCreateUserEvent(s.context, &err);
  check(err, s.where, "clCreateUserEvent");
  cl_event marker = nullptr;
  err = clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker);
  if (err != CL_SUCCESS) {
    clReleaseEvent(done);
    check(err, s.where, "clEnqueueMarkerWithWaitList");
  }
  err = clEnqueueBarrierWithWaitList(s.queue, 1, &done, nullptr);
  if (err != CL_SUCCESS) {
    clReleaseEvent(marker);
    clReleaseEvent(done);
    check(err, s.where, "clEnqueueBarrierWithWaitList");
  }
  auto* job = new HostJob{std::move(fn), s.errors, done, s.where};
  err = clSetEventCallback(marker, CL_COMPLETE, &run_host_job, job);
  if (err != CL_SUCCESS) {
    // The barrier is already queued: release it without running fn, and report.
    delete job;
    clSetUserEventStatus(done, CL_COMPLETE);
    clReleaseEvent(done);
    clReleaseEvent(marker);
    check(err, s.where, "clSetEventCallback");
  }
  check(clFlush(s.queue), s.where, "clFlush");
}

void OpenClRuntime::stream_synchronize(device::Stream& stream) {
  ClStream& s = cl(stream);
  check(clFinish(s.queue), s.where, "clFinish");
  if (auto e = s.errors->take()) std::rethrow_exception(e);
}

// ---------------------------------------------------------------- events

std::unique_ptr<device::StreamEvent> OpenClRuntime::create_event(int device) {
  auto e = std::make_unique<ClEvent>();
  e->where = dev(device).props.name;
  return e;
}

void OpenClRuntime::event_record(device::StreamEvent& event, device::Stream& stream) {
  ClEvent& e = cl(event);
  ClStream& s = cl(stream);
  cl_event marker = nullptr;
  check(clEnqueueMarkerWithWaitList(s.queue, 0, nullptr, &marker), s.where, "clEnqueueMarkerWithWaitList");
  if (e.event != nullptr) clReleaseEvent(e.event);
  e.event = marker;
  e.context = s.context;
  e.where = s.where;
  e.errors = s.errors;
  // Waiters on other queues (and the host) need this queue's work submitted.
  check(clFlush(s.queue), s.where, "clFlush");
}

void OpenClRuntime::stream_wait_event(device::Stream& stream, device::StreamEvent& event) {
  ClEvent& e = cl(event);
  ClStream& s = cl(stream);
  if (e.event == nullptr) return;
  if (e.context == s.context) {
    check(clEnqueueBarrierWithWaitList(s.queue, 1, &e.event, nullptr), s.where,
          "clEnqueueBarrierWithWaitList");
    return;
  }
  // Events do not cross contexts: a user event in ours is completed by a callback on theirs.
  cl_int err = CL_SUCCESS;
  cl_event target = clCreateUserEvent(s.context, &err);
  check(err, s.where, "clCreateUserEvent");
  err = clEnqueueBarrierWithWaitList(s.queue, 1, &target, nullptr);
  if (err != CL_SUCCESS) {
    clReleaseEvent(target);
    check(err, s.where, "clEnqueueBarrierWithWaitList");
  }
  clRetainEvent(e.event);
  err = clSetEventCallback(e.event, CL_COMPLETE, &complete_bridge, new Bridge{target});
  if (err != CL_SUCCESS) {
    clReleaseEvent(e.event);
    clSetUserEventStatus(target, CL_COMPLETE);
    clReleaseEvent(target);
    check(err, s.where, "clSetEventCallback");
  }
}

void OpenClRuntime::event_synchronize(device::StreamEvent& event) {
  ClEvent& e = cl(event);
  if (e.event == nullptr) return;
  cl_int err = clWaitForEvents(1, &e.event);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(e.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  if (e.errors)
    if (auto error = e.errors->peek()) std::rethrow_exception(error);
  check(err, e.where, "clWaitForEvents");
  check(status < 0 ? status : CL_SUCCESS, e.where, "event");
}

device::EventStatus OpenClRuntime::event_query(device::StreamEvent& event) {
  ClEvent& e = cl(event);
  if (e.event == nullptr) return device::EventStatus::NotRecorded;
  cl_int status = CL_COMPLETE;
  check(clGetEventInfo(e.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr), e.where,
        "clGetEventInfo");
  if (status < 0) return device::EventStatus::Failed;
  return status == CL_COMPLETE ? device::EventStatus::Complete : device::EventStatus::Pending;
}

// ---------------------------------------------------------------- kernels

cl_kernel OpenClRuntime::kernel(device::Stream& stream, std::string_view program_name,
                                std::string_view name) {
  ClStream& s = cl(stream);
  std::string key = std::string(program_name) + "/" + std::string(name);
  if (auto it = s.kernels.find(key); it != s.kernels.end()) return it->second;
  cl_program p = program(s.device(), program_name);
  cl_int err = CL_SUCCESS;
  const std::string kname(name);
  cl_kernel k = clCreateKernel(p, kname.c_str(), &err);
  check(err, s.where, "clCreateKernel", kname);
  s.kernels.emplace(std::move(key), k);
  return k;
}

}  // namespace tessera::opencl
