#include "cuda/loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <initializer_list>

#include "core/check.h"
#include "core/env.h"

namespace tessera::cuda {
namespace {

// The CUDA version whose ABI driver_api.h declares: cuGetProcAddress returns each function's
// variant as of this version (or the driver's own version, if older).
constexpr int kApiVersion = 12000;

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown error");
}

// Our names for the codes a driver without cuGetErrorName (never a real one) returns.
const char* known_error_name(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
      return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
      return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_PERMITTED:
      return "CUDA_ERROR_NOT_PERMITTED";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

// The folder holding the loaded library that defines `symbol_address` ("" when unknown).
std::string folder_of(const void* symbol_address) {
  Dl_info info{};
  if (symbol_address == nullptr || dladdr(symbol_address, &info) == 0 || info.dli_fname == nullptr) return {};
  const std::string file = info.dli_fname;
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash);
}

// dlopen of the first candidate that loads; `tried` lists what failed and why.
void* open_first(std::initializer_list<std::string> candidates, std::string& loaded, std::string& tried) {
  for (const std::string& name : candidates) {
    if (name.empty()) continue;
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      loaded = name;
      return h;
    }
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", dl_error());
  }
  return nullptr;
}

template <typename Fn>
bool resolve(void* handle, const char* symbol, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return fn != nullptr;
}

}  // namespace

std::string version_string(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::string Driver::error_name(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr)
    return name;
  if (const char* ours = known_error_name(result)) return ours;
  return fmt::format("CUDA error {}", result);
}

std::string Driver::describe(CUresult result) const {
  const char* text = nullptr;
  std::string name = error_name(result);
  if (cuGetErrorString != nullptr && cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr)
    return fmt::format("{} ({})", name, text);
  return name;
}

void check(const Driver& driver, CUresult result, std::string_view where, std::string_view call,
           std::string_view detail) {
  if (result == CUDA_SUCCESS) return;
  raise(result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::OutOfMemory : ErrorCode::DeviceError,
        "{}: {} failed: {}{}{}", where, call, driver.describe(result), detail.empty() ? "" : ": ", detail);
}

DriverLoad load_driver(const std::string& path) {
  DriverLoad out;
  const std::string file = !path.empty() ? path : env_string("TESSERA_CUDA_DRIVER").value_or("libcuda.so.1");
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    out.reason = file == "libcuda.so.1"
                     ? fmt::format("libcuda.so.1 not found: no NVIDIA driver ({})", dl_error())
                     : fmt::format("{} cannot be loaded: {}", file, dl_error());
    return out;
  }
  // From here on the library stays loaded whatever happens: a driver may have started threads.
  auto d = std::make_shared<Driver>();
  d->path = file;
  for (auto [symbol, ok] :
       {std::pair{"cuInit", resolve(handle, "cuInit", d->cuInit)},
        std::pair{"cuDriverGetVersion", resolve(handle, "cuDriverGetVersion", d->cuDriverGetVersion)},
        std::pair{"cuGetErrorName", resolve(handle, "cuGetErrorName", d->cuGetErrorName)},
        std::pair{"cuGetErrorString", resolve(handle, "cuGetErrorString", d->cuGetErrorString)}}) {
    if (!ok) {
      out.reason = fmt::format("symbol {} missing from {}: not a CUDA driver, or one too old", symbol, file);
      return out;
    }
  }
  CUresult r = d->cuDriverGetVersion(&d->version);
  if (r != CUDA_SUCCESS) {
    out.reason = fmt::format("cuDriverGetVersion failed: {}", d->describe(r));
    return out;
  }
  // The unversioned cuGetProcAddress keeps its CUDA 11.3 signature (drivers export the 12.0 one
  // as cuGetProcAddress_v2); it may be called before cuInit.
  PFN_cuGetProcAddress get_proc = nullptr;
  resolve(handle, "cuGetProcAddress", get_proc);
  const int want = std::min(d->version, kApiVersion);
  const auto lookup = [&](const char* base, const char* symbol, auto& fn) {
    void* p = nullptr;
    if (get_proc != nullptr && get_proc(base, &p, want, CU_GET_PROC_ADDRESS_DEFAULT) == CUDA_SUCCESS &&
        p != nullptr) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
      return true;
    }
    return resolve(handle, symbol, fn);
  };
#define TESSERA_CUDA_LOOKUP(name, symbol)                                                               \
  if (!lookup(#name, symbol, d->name)) {                                                                \
    out.reason =                                                                                        \
        fmt::format("symbol {} missing: driver too old (CUDA {})", symbol, version_string(d->version)); \
    return out;                                                                                         \
  }
  TESSERA_CUDA_DRIVER_FUNCTIONS(TESSERA_CUDA_LOOKUP)
#undef TESSERA_CUDA_LOOKUP
  r = d->cuInit(0);
  if (r != CUDA_SUCCESS) {
    out.reason = fmt::format("cuInit failed: {}", d->describe(r));
    return out;
  }
  int count = 0;
  r = d->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    out.reason = fmt::format("cuDeviceGetCount failed: {}", d->describe(r));
    return out;
  }
  if (count <= 0) {
    out.reason = fmt::format("the driver (CUDA {}) reports no device", version_string(d->version));
    return out;
  }
  out.driver = std::move(d);
  out.device_count = count;
  return out;
}

// ---------------------------------------------------------------- NVRTC

NvrtcLoad load_nvrtc(const std::string& path) {
  NvrtcLoad out;
  std::string file, tried;
  const std::string chosen = !path.empty() ? path : env_string("TESSERA_CUDA_NVRTC").value_or("");
  void* handle =
      chosen.empty()
          ? open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}, file, tried)
          : open_first({chosen}, file, tried);
  if (handle == nullptr) {
    out.reason = fmt::format("NVRTC not found, so no CUDA kernel can be compiled ({})", tried);
    return out;
  }
  auto n = std::make_shared<Nvrtc>();
  n->path = file;
#define TESSERA_NVRTC_LOOKUP(name)                                                     \
  if (!resolve(handle, #name, n->name)) {                                              \
    out.reason = fmt::format("symbol {} missing from {}: NVRTC too old", #name, file); \
    return out;                                                                        \
  }
  TESSERA_NVRTC_LOOKUP(nvrtcVersion)
  TESSERA_NVRTC_LOOKUP(nvrtcGetErrorString)
  TESSERA_NVRTC_LOOKUP(nvrtcCreateProgram)
  TESSERA_NVRTC_LOOKUP(nvrtcDestroyProgram)
  TESSERA_NVRTC_LOOKUP(nvrtcCompileProgram)
  TESSERA_NVRTC_LOOKUP(nvrtcGetProgramLogSize)
  TESSERA_NVRTC_LOOKUP(nvrtcGetProgramLog)
  TESSERA_NVRTC_LOOKUP(nvrtcGetCUBINSize)
  TESSERA_NVRTC_LOOKUP(nvrtcGetCUBIN)
#undef TESSERA_NVRTC_LOOKUP
  if (n->nvrtcVersion(&n->major, &n->minor) != NVRTC_SUCCESS) {
    out.reason = fmt::format("nvrtcVersion failed in {}", file);
    return out;
  }
  // NVRTC loads its builtins library by name when it first compiles; loading it now, from NVRTC's
  // own folder first (a toolkit or wheel folder need not be on the library path), makes that find
  // it already loaded, and a missing one is reported here rather than as a failed compile.
  const std::string builtins = fmt::format("libnvrtc-builtins.so.{}.{}", n->major, n->minor);
  const std::string folder = folder_of(reinterpret_cast<const void*>(n->nvrtcVersion));
  std::string loaded, builtins_tried;
  if (open_first({folder.empty() ? std::string() : folder + "/" + builtins, builtins}, loaded,
                 builtins_tried) == nullptr) {
    out.reason = fmt::format("{} not found beside {} (NVRTC {}.{} needs it to compile): {}", builtins, file,
                             n->major, n->minor, builtins_tried);
    return out;
  }
  n->builtins = loaded;
  out.nvrtc = std::move(n);
  return out;
}

// ---------------------------------------------------------------- cuBLAS

std::string Cublas::status_name(cublasStatus_t status) const {
  if (cublasGetStatusName != nullptr)
    if (const char* name = cublasGetStatusName(status)) return name;
  return fmt::format("cuBLAS status {}", status);
}

CublasLoad load_cublas(const std::string& path) {
  CublasLoad out;
  std::string file, tried;
  const std::string chosen = !path.empty() ? path : env_string("TESSERA_CUDA_CUBLAS").value_or("");
  void* handle = chosen.empty()
                     ? open_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}, file, tried)
                     : open_first({chosen}, file, tried);
  if (handle == nullptr) {
    out.reason = fmt::format("cuBLAS not found ({})", tried);
    return out;
  }
  auto c = std::make_shared<Cublas>();
  c->path = file;
  for (auto [symbol, ok] :
       {std::pair{"cublasCreate_v2", resolve(handle, "cublasCreate_v2", c->cublasCreate)},
        std::pair{"cublasDestroy_v2", resolve(handle, "cublasDestroy_v2", c->cublasDestroy)},
        std::pair{"cublasSetStream_v2", resolve(handle, "cublasSetStream_v2", c->cublasSetStream)},
        std::pair{"cublasGemmEx", resolve(handle, "cublasGemmEx", c->cublasGemmEx)}}) {
    if (!ok) {
      out.reason = fmt::format("symbol {} missing from {}: cuBLAS too old", symbol, file);
      return out;
    }
  }
  resolve(handle, "cublasGetStatusName", c->cublasGetStatusName);
  out.cublas = std::move(c);
  return out;
}

}  // namespace tessera::cuda
