#pragma once
// Loads the CUDA driver (libcuda.so.1), NVRTC and cuBLAS at run time, so that Tessera needs no
// CUDA toolkit to build and runs where there is no NVIDIA driver (it then has no CUDA device, and
// says why). Each load either resolves every entry point Tessera uses or gives a one-line reason:
//   "libcuda.so.1 not found: no NVIDIA driver (...)"
//   "symbol cuMemMap missing: driver too old (CUDA 10.1)"
//   "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
// Libraries stay loaded for the life of the process (drivers do not support being unloaded).
//
// Testing aid: TESSERA_CUDA_DRIVER, TESSERA_CUDA_NVRTC and TESSERA_CUDA_CUBLAS name the library
// files to load instead of the system's (tests/cuda/ points them at fake libraries).
#include <memory>
#include <string>
#include <string_view>

#include "cuda/driver_api.h"

namespace tessera::cuda {

// The driver entry points, each resolved at the ABI version driver_api.h declares:
// X(member, symbol to dlsym when the driver has no cuGetProcAddress).
#define TESSERA_CUDA_DRIVER_FUNCTIONS(X)                            \
  X(cuDeviceGetCount, "cuDeviceGetCount")                           \
  X(cuDeviceGet, "cuDeviceGet")                                     \
  X(cuDeviceGetName, "cuDeviceGetName")                             \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")                        \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                   \
  X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer")                 \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")           \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")      \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                             \
  X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess")                 \
  X(cuMemGetInfo, "cuMemGetInfo_v2")                                \
  X(cuMemAlloc, "cuMemAlloc_v2")                                    \
  X(cuMemFree, "cuMemFree_v2")                                      \
  X(cuMemHostAlloc, "cuMemHostAlloc")                               \
  X(cuMemFreeHost, "cuMemFreeHost")                                 \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                      \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                      \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                      \
  X(cuMemcpyPeerAsync, "cuMemcpyPeerAsync")                         \
  X(cuMemsetD8Async, "cuMemsetD8Async")                             \
  X(cuStreamCreate, "cuStreamCreate")                               \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                          \
  X(cuStreamSynchronize, "cuStreamSynchronize")                     \
  X(cuStreamWaitEvent, "cuStreamWaitEvent")                         \
  X(cuLaunchHostFunc, "cuLaunchHostFunc")                           \
  X(cuEventCreate, "cuEventCreate")                                 \
  X(cuEventDestroy, "cuEventDestroy_v2")                            \
  X(cuEventRecord, "cuEventRecord")                                 \
  X(cuEventQuery, "cuEventQuery")                                   \
  X(cuEventSynchronize, "cuEventSynchronize")                       \
  X(cuMemAddressReserve, "cuMemAddressReserve")                     \
  X(cuMemAddressFree, "cuMemAddressFree")                           \
  X(cuMemCreate, "cuMemCreate")                                     \
  X(cuMemRelease, "cuMemRelease")                                   \
  X(cuMemMap, "cuMemMap")                                           \
  X(cuMemUnmap, "cuMemUnmap")                                       \
  X(cuMemSetAccess, "cuMemSetAccess")                               \
  X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity") \
  X(cuModuleLoadData, "cuModuleLoadData")                           \
  X(cuModuleUnload, "cuModuleUnload")                               \
  X(cuModuleGetFunction, "cuModuleGetFunction")                     \
  X(cuLaunchKernel, "cuLaunchKernel")

struct Driver {
  std::string path;  // the file loaded ("libcuda.so.1")
  int version = 0;   // cuDriverGetVersion: 12040 for CUDA 12.4
  // Resolved with plain dlsym (present, unversioned, in every driver since CUDA 6).
  PFN_cuInit cuInit = nullptr;
  PFN_cuDriverGetVersion cuDriverGetVersion = nullptr;
  PFN_cuGetErrorName cuGetErrorName = nullptr;
  PFN_cuGetErrorString cuGetErrorString = nullptr;
#define TESSERA_CUDA_MEMBER(name, symbol) PFN_##name name = nullptr;
  TESSERA_CUDA_DRIVER_FUNCTIONS(TESSERA_CUDA_MEMBER)
#undef TESSERA_CUDA_MEMBER

  // "CUDA_ERROR_OUT_OF_MEMORY" (the driver's name, else ours, else "CUDA error 12345").
  std::string error_name(CUresult result) const;
  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult result) const;
};

// The CUDA version a driver version number stands for: 12040 -> "12.4".
std::string version_string(int version);

struct DriverLoad {
  std::shared_ptr<const Driver> driver;  // null when CUDA cannot be used here
  int device_count = 0;                  // > 0 whenever driver is set
  std::string reason;                    // why not, when driver is null
};

// Loads the driver at `path` (empty: $TESSERA_CUDA_DRIVER, else "libcuda.so.1"), resolves every
// entry point (through cuGetProcAddress where the driver has it, else the versioned symbols
// above), calls cuInit(0) and counts the devices. Never throws: a failure is the reason.
DriverLoad load_driver(const std::string& path = "");

// Throws Error(DeviceError, or OutOfMemory for CUDA_ERROR_OUT_OF_MEMORY) unless result is
// CUDA_SUCCESS: "<where>: <call> failed: CUDA_ERROR_X (text)<: detail>", where names the device.
void check(const Driver& driver, CUresult result, std::string_view where, std::string_view call,
           std::string_view detail = {});

// ---------------------------------------------------------------- NVRTC

struct Nvrtc {
  std::string path;          // "libnvrtc.so.12"
  std::string builtins;      // the builtins library loaded beside it
  int major = 0, minor = 0;  // nvrtcVersion
  PFN_nvrtcVersion nvrtcVersion = nullptr;
  PFN_nvrtcGetErrorString nvrtcGetErrorString = nullptr;
  PFN_nvrtcCreateProgram nvrtcCreateProgram = nullptr;
  PFN_nvrtcDestroyProgram nvrtcDestroyProgram = nullptr;
  PFN_nvrtcCompileProgram nvrtcCompileProgram = nullptr;
  PFN_nvrtcGetProgramLogSize nvrtcGetProgramLogSize = nullptr;
  PFN_nvrtcGetProgramLog nvrtcGetProgramLog = nullptr;
  PFN_nvrtcGetCUBINSize nvrtcGetCUBINSize = nullptr;
  PFN_nvrtcGetCUBIN nvrtcGetCUBIN = nullptr;
};

struct NvrtcLoad {
  std::shared_ptr<const Nvrtc> nvrtc;
  std::string reason;
};

// Loads NVRTC (empty path: $TESSERA_CUDA_NVRTC, else libnvrtc.so.13, .12, .11.2, libnvrtc.so) and
// the libnvrtc-builtins.so.<major>.<minor> it needs to compile (from its folder first). Never throws.
NvrtcLoad load_nvrtc(const std::string& path = "");

// ---------------------------------------------------------------- cuBLAS

struct Cublas {
  std::string path;
  PFN_cublasCreate cublasCreate = nullptr;
  PFN_cublasDestroy cublasDestroy = nullptr;
  PFN_cublasSetStream cublasSetStream = nullptr;
  PFN_cublasGemmEx cublasGemmEx = nullptr;
  PFN_cublasGetStatusName cublasGetStatusName = nullptr;  // optional (cuBLAS 11.4.2 and later)
  std::string status_name(cublasStatus_t status) const;
};

struct CublasLoad {
  std::shared_ptr<const Cublas> cublas;
  std::string reason;
};

// Loads cuBLAS (empty path: $TESSERA_CUDA_CUBLAS, else libcublas.so.13, .12, .11). Never throws.
CublasLoad load_cublas(const std::string& path = "");

}  // namespace tessera::cuda
