#pragma once
// Our own declarations of the parts of the CUDA driver API, NVRTC and cuBLAS that Tessera calls,
// so that Tessera builds with no CUDA toolkit and loads the libraries at run time (loader.h).
//
// Values and layouts are those the CUDA Driver API reference documents (CUDA 12.x, "Data types
// used by CUDA driver", cuda.h) for x86-64 Linux (LP64: pointers and size_t are 8 bytes, enums 4).
// Every struct carries a static_assert on its size: a layout that differs from the documented one
// fails to compile instead of corrupting memory. Functions are declared with the ABI of the
// versioned entry point we resolve (the `_v2` names where the driver exports both; see loader.cpp).
#include <cstddef>
#include <cstdint>

namespace tessera::cuda {

// ---------------------------------------------------------------- driver: scalar types and handles

using CUresult = int;  // an int, not an enum: a driver may return codes newer than this list
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2: 64-bit on LP64
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = uint64_t;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUhostFn = void (*)(void* user_data);

static_assert(sizeof(CUdeviceptr) == 8 && sizeof(void*) == 8, "declared for LP64 (x86-64, aarch64) only");

// CUresult values (the ones we name; cuGetErrorName names the rest).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
inline constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

// CUdevice_attribute values.
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33;
inline constexpr int CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34;
inline constexpr int CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41;
inline constexpr int CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102;

// Flags.
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;   // CUstream_flags
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;  // CUevent_flags
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;

// ---------------------------------------------------------------- driver: virtual memory

inline constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 0x1;         // CUmemAllocationType
inline constexpr int CU_MEM_HANDLE_TYPE_NONE = 0x0;               // CUmemAllocationHandleType
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 0x1;           // CUmemLocationType
inline constexpr int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3;    // CUmemAccess_flags
inline constexpr int CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1;  // CUmemAllocationGranularity_flags

struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;    // the device ordinal for CU_MEM_LOCATION_TYPE_DEVICE
};
static_assert(sizeof(CUmemLocation) == 8);

struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
static_assert(sizeof(CUmemAllocationProp) == 32);
static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) == 16);
static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24);

struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};
static_assert(sizeof(CUmemAccessDesc) == 12);

// ---------------------------------------------------------------- driver: entry points
// One pointer type per function, with the ABI of the version we resolve (loader.cpp's table).

using PFN_cuGetProcAddress = CUresult (*)(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** name);
using PFN_cuGetErrorString = CUresult (*)(CUresult error, const char** text);
using PFN_cuInit = CUresult (*)(unsigned flags);
using PFN_cuDriverGetVersion = CUresult (*)(int* version);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetName = CUresult (*)(char* name, int length, CUdevice device);
using PFN_cuDeviceTotalMem = CUresult (*)(size_t* bytes, CUdevice device);  // _v2
using PFN_cuDeviceGetAttribute = CUresult (*)(int* value, int attribute, CUdevice device);
using PFN_cuDeviceCanAccessPeer = CUresult (*)(int* can, CUdevice device, CUdevice peer);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* context, CUdevice device);
using PFN_cuDevicePrimaryCtxRelease = CUresult (*)(CUdevice device);  // _v2
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext context);
using PFN_cuCtxEnablePeerAccess = CUresult (*)(CUcontext peer, unsigned flags);
using PFN_cuMemGetInfo = CUresult (*)(size_t* free, size_t* total);  // _v2
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* ptr, size_t size);  // _v2
using PFN_cuMemFree = CUresult (*)(CUdeviceptr ptr);                 // _v2
using PFN_cuMemHostAlloc = CUresult (*)(void** ptr, size_t size, unsigned flags);
using PFN_cuMemFreeHost = CUresult (*)(void* ptr);
using PFN_cuMemcpyHtoDAsync = CUresult (*)(CUdeviceptr dst, const void* src, size_t size,
                                           CUstream stream);                                           // _v2
using PFN_cuMemcpyDtoHAsync = CUresult (*)(void* dst, CUdeviceptr src, size_t size, CUstream stream);  // _v2
using PFN_cuMemcpyDtoDAsync = CUresult (*)(CUdeviceptr dst, CUdeviceptr src, size_t size,
                                           CUstream stream);  // _v2
using PFN_cuMemcpyPeerAsync = CUresult (*)(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                                           CUcontext src_context, size_t size, CUstream stream);
using PFN_cuMemsetD8Async = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t size, CUstream stream);
using PFN_cuStreamCreate = CUresult (*)(CUstream* stream, unsigned flags);
using PFN_cuStreamDestroy = CUresult (*)(CUstream stream);  // _v2
using PFN_cuStreamSynchronize = CUresult (*)(CUstream stream);
using PFN_cuStreamWaitEvent = CUresult (*)(CUstream stream, CUevent event, unsigned flags);
using PFN_cuLaunchHostFunc = CUresult (*)(CUstream stream, CUhostFn fn, void* user_data);
using PFN_cuEventCreate = CUresult (*)(CUevent* event, unsigned flags);
using PFN_cuEventDestroy = CUresult (*)(CUevent event);  // _v2
using PFN_cuEventRecord = CUresult (*)(CUevent event, CUstream stream);
using PFN_cuEventQuery = CUresult (*)(CUevent event);
using PFN_cuEventSynchronize = CUresult (*)(CUevent event);
using PFN_cuMemAddressReserve = CUresult (*)(CUdeviceptr* ptr, size_t size, size_t alignment,
                                             CUdeviceptr addr, unsigned long long flags);
using PFN_cuMemAddressFree = CUresult (*)(CUdeviceptr ptr, size_t size);
using PFN_cuMemCreate = CUresult (*)(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags);
using PFN_cuMemRelease = CUresult (*)(CUmemGenericAllocationHandle handle);
using PFN_cuMemMap = CUresult (*)(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags);
using PFN_cuMemUnmap = CUresult (*)(CUdeviceptr ptr, size_t size);
using PFN_cuMemSetAccess = CUresult (*)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                        size_t count);
using PFN_cuMemGetAllocationGranularity = CUresult (*)(size_t* granularity, const CUmemAllocationProp* prop,
                                                       int option);
using PFN_cuModuleLoadData = CUresult (*)(CUmodule* module, const void* image);
using PFN_cuModuleUnload = CUresult (*)(CUmodule module);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction* function, CUmodule module, const char* name);
using PFN_cuLaunchKernel = CUresult (*)(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                        unsigned block_x, unsigned block_y, unsigned block_z,
                                        unsigned shared_bytes, CUstream stream, void** params, void** extra);

// ---------------------------------------------------------------- NVRTC (nvrtc.h)

using nvrtcResult = int;
inline constexpr nvrtcResult NVRTC_SUCCESS = 0;
struct _nvrtcProgram;
using nvrtcProgram = _nvrtcProgram*;

using PFN_nvrtcVersion = nvrtcResult (*)(int* major, int* minor);
using PFN_nvrtcGetErrorString = const char* (*)(nvrtcResult result);
using PFN_nvrtcCreateProgram = nvrtcResult (*)(nvrtcProgram* program, const char* source, const char* name,
                                               int header_count, const char* const* headers,
                                               const char* const* include_names);
using PFN_nvrtcDestroyProgram = nvrtcResult (*)(nvrtcProgram* program);
using PFN_nvrtcCompileProgram = nvrtcResult (*)(nvrtcProgram program, int option_count,
                                                const char* const* options);
using PFN_nvrtcGetProgramLogSize = nvrtcResult (*)(nvrtcProgram program, size_t* size);
using PFN_nvrtcGetProgramLog = nvrtcResult (*)(nvrtcProgram program, char* log);
using PFN_nvrtcGetCUBINSize = nvrtcResult (*)(nvrtcProgram program, size_t* size);
using PFN_nvrtcGetCUBIN = nvrtcResult (*)(nvrtcProgram program, char* cubin);

// ---------------------------------------------------------------- cuBLAS (cublas_api.h, library_types.h)

using cublasStatus_t = int;
inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
struct cublasContext;
using cublasHandle_t = cublasContext*;
inline constexpr int CUBLAS_OP_N = 0;  // cublasOperation_t
inline constexpr int CUBLAS_OP_T = 1;
inline constexpr int CUDA_R_32F = 0;  // cudaDataType
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUDA_R_16BF = 14;
inline constexpr int CUBLAS_COMPUTE_32F = 68;   // cublasComputeType_t
inline constexpr int CUBLAS_GEMM_DEFAULT = -1;  // cublasGemmAlgo_t

using PFN_cublasCreate = cublasStatus_t (*)(cublasHandle_t* handle);                     // _v2
using PFN_cublasDestroy = cublasStatus_t (*)(cublasHandle_t handle);                     // _v2
using PFN_cublasSetStream = cublasStatus_t (*)(cublasHandle_t handle, CUstream stream);  // _v2
using PFN_cublasGetStatusName = const char* (*)(cublasStatus_t status);
using PFN_cublasGemmEx = cublasStatus_t (*)(cublasHandle_t handle, int transa, int transb, int m, int n,
                                            int k, const void* alpha, const void* a, int a_type, int lda,
                                            const void* b, int b_type, int ldb, const void* beta, void* c,
                                            int c_type, int ldc, int compute_type, int algo);

}  // namespace tessera::cuda
