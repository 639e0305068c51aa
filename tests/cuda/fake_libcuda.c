/* A fake CUDA driver (libcuda) for the loader's and the runtime's tests, built in one of four
 * variants (tests/cuda/CMakeLists.txt):
 *   FAKE_NO_DEVICE   every symbol; cuInit returns CUDA_ERROR_NO_DEVICE (a driver with no GPU)
 *   FAKE_STUB        every symbol; cuInit returns CUDA_ERROR_STUB_LIBRARY (the toolkit's stub)
 *   FAKE_OLD         a CUDA 10.2 driver: no cuGetProcAddress, no cuMemMap
 *   FAKE_DEVICES     two devices over host memory: every call works (copies are memcpy, host
 *                    functions run at once, virtual memory is mmap of a memfd), any call can be
 *                    made to fail (fake_cuda_fail), and it counts what the runtime must never do.
 * Only what the runtime calls is here; values follow driver_api.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;
typedef void* CUevent;
typedef void (*CUhostFn)(void*);

#define EXPORT __attribute__((visibility("default")))

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  STUB_LIBRARY = 34,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_CONTEXT = 201,
  NOT_FOUND = 500,
  NOT_SUPPORTED = 801,
  ILLEGAL_ADDRESS = 700,
};

/* ---------------------------------------------------------------- test controls */

static char fail_name[64];
static CUresult fail_code;
static int blocking_streams; /* streams created without CU_STREAM_NON_BLOCKING */
static int null_stream_uses; /* work enqueued on the legacy default stream (0) */
static int proc_lookups;     /* entry points handed out by cuGetProcAddress */
static int retained;         /* primary contexts retained and not released */

/* Makes `name` (the exported symbol, "cuMemAlloc_v2") return `code` from now on; NULL: none. */
EXPORT void fake_cuda_fail(const char* name, CUresult code) {
  fail_name[0] = 0;
  if (name != NULL) strncpy(fail_name, name, sizeof fail_name - 1);
  fail_code = code;
}
EXPORT int fake_cuda_blocking_streams(void) { return blocking_streams; }
EXPORT int fake_cuda_null_stream_uses(void) { return null_stream_uses; }
EXPORT int fake_cuda_proc_lookups(void) { return proc_lookups; }
EXPORT int fake_cuda_retained_contexts(void) { return retained; }

#define FAIL_POINT(name) \
  if (fail_name[0] != 0 && strcmp(fail_name, name) == 0) return fail_code
#define STREAM_USE(s) \
  if ((s) == NULL) ++null_stream_uses

/* ---------------------------------------------------------------- errors, init, version */

static const char* name_of(CUresult r) {
  switch (r) {
    case SUCCESS:
      return "CUDA_SUCCESS";
    case INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    default:
      return NULL;
  }
}

EXPORT CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = name_of(r);
  return *s != NULL ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case NO_DEVICE:
      *s = "no CUDA-capable device is detected";
      return SUCCESS;
    case STUB_LIBRARY:
      *s = "CUDA driver is a stub library";
      return SUCCESS;
    case OUT_OF_MEMORY:
      *s = "out of memory";
      return SUCCESS;
    case ILLEGAL_ADDRESS:
      *s = "an illegal memory access was encountered";
      return SUCCESS;
    default:
      *s = NULL;
      return name_of(r) != NULL ? SUCCESS : INVALID_VALUE;
  }
}

static int initialized;

EXPORT CUresult cuInit(unsigned flags) {
  (void)flags;
  FAIL_POINT("cuInit");
#if defined(FAKE_NO_DEVICE)
  return NO_DEVICE;
#elif defined(FAKE_STUB)
  return STUB_LIBRARY;
#else
  initialized = 1;
  return SUCCESS;
#endif
}

EXPORT CUresult cuDriverGetVersion(int* v) {
#if defined(FAKE_OLD)
  *v = 10020;
#else
  *v = 12040;
#endif
  return SUCCESS;
}

/* ---------------------------------------------------------------- devices */

#define DEVICES 2
static const size_t total_memory[DEVICES] = {(size_t)1 << 30, (size_t)2 << 30};
static size_t used_memory[DEVICES];
static int contexts[DEVICES];        /* a context is the address of its device's slot */
static __thread int* current = NULL; /* the thread's current context */

static int current_device(void) { return current != NULL ? (int)(current - contexts) : -1; }

EXPORT CUresult cuDeviceGetCount(int* n) {
  FAIL_POINT("cuDeviceGetCount");
  if (!initialized) return NOT_INITIALIZED;
  *n = DEVICES;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  FAIL_POINT("cuDeviceGet");
  if (ordinal < 0 || ordinal >= DEVICES) return INVALID_DEVICE;
  *d = ordinal;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  FAIL_POINT("cuDeviceGetName");
  if (d < 0 || d >= DEVICES) return INVALID_DEVICE;
  static const char* names[DEVICES] = {"Fake GPU Alpha", "Fake GPU Beta"};
  strncpy(name, names[d], (size_t)len);
  return SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  FAIL_POINT("cuDeviceTotalMem_v2");
  if (d < 0 || d >= DEVICES) return INVALID_DEVICE;
  *bytes = total_memory[d];
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int* v, int attribute, CUdevice d) {
  FAIL_POINT("cuDeviceGetAttribute");
  if (d < 0 || d >= DEVICES) return INVALID_DEVICE;
  switch (attribute) {
    case 16:
      *v = d == 0 ? 132 : 84;
      return SUCCESS; /* multiprocessors */
    case 33:
      *v = 0x41 + d;
      return SUCCESS; /* PCI bus */
    case 34:
      *v = 0;
      return SUCCESS; /* PCI device */
    case 41:
      *v = 1;
      return SUCCESS; /* unified addressing */
    case 50:
      *v = 0;
      return SUCCESS; /* PCI domain */
    case 75:
      *v = d == 0 ? 9 : 8;
      return SUCCESS; /* compute capability */
    case 76:
      *v = d == 0 ? 0 : 6;
      return SUCCESS;
    case 102:
      *v = 1;
      return SUCCESS; /* virtual memory management */
    default:
      return INVALID_VALUE;
  }
}

EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice d, CUdevice peer) {
  FAIL_POINT("cuDeviceCanAccessPeer");
  *can = d != peer;
  return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  FAIL_POINT("cuDevicePrimaryCtxRetain");
  if (d < 0 || d >= DEVICES) return INVALID_DEVICE;
  *c = &contexts[d];
  ++retained;
  return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  (void)d;
  --retained;
  return SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
  FAIL_POINT("cuCtxSetCurrent");
  current = (int*)c;
  return SUCCESS;
}

EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  (void)peer;
  (void)flags;
  FAIL_POINT("cuCtxEnablePeerAccess");
  return current != NULL ? SUCCESS : INVALID_CONTEXT;
}

/* ---------------------------------------------------------------- memory */

EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  FAIL_POINT("cuMemGetInfo_v2");
  const int d = current_device();
  if (d < 0) return INVALID_CONTEXT;
  *total = total_memory[d];
  *free_bytes = total_memory[d] - used_memory[d];
  return SUCCESS;
}

/* Each allocation is preceded by a 256-byte header holding its size and device. */
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t size) {
  FAIL_POINT("cuMemAlloc_v2");
  const int d = current_device();
  if (d < 0) return INVALID_CONTEXT;
  if (size > total_memory[d] - used_memory[d]) return OUT_OF_MEMORY;
  char* block = aligned_alloc(256, 256 + (size + 255) / 256 * 256);
  if (block == NULL) return OUT_OF_MEMORY;
  ((size_t*)block)[0] = size;
  ((size_t*)block)[1] = (size_t)d;
  used_memory[d] += size;
  *p = (CUdeviceptr)(uintptr_t)(block + 256);
  return SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  FAIL_POINT("cuMemFree_v2");
  char* block = (char*)(uintptr_t)p - 256;
  used_memory[((size_t*)block)[1]] -= ((size_t*)block)[0];
  free(block);
  return SUCCESS;
}

EXPORT CUresult cuMemHostAlloc(void** p, size_t size, unsigned flags) {
  (void)flags;
  FAIL_POINT("cuMemHostAlloc");
  *p = malloc(size);
  return *p != NULL ? SUCCESS : OUT_OF_MEMORY;
}

EXPORT CUresult cuMemFreeHost(void* p) {
  free(p);
  return SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  FAIL_POINT("cuMemcpyHtoDAsync_v2");
  STREAM_USE(s);
  memcpy((void*)(uintptr_t)dst, src, n);
  return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  FAIL_POINT("cuMemcpyDtoHAsync_v2");
  STREAM_USE(s);
  memcpy(dst, (const void*)(uintptr_t)src, n);
  return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  FAIL_POINT("cuMemcpyDtoDAsync_v2");
  STREAM_USE(s);
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return SUCCESS;
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                                  CUstream s) {
  FAIL_POINT("cuMemcpyPeerAsync");
  STREAM_USE(s);
  if (dc == NULL || sc == NULL) return INVALID_CONTEXT;
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  FAIL_POINT("cuMemsetD8Async");
  STREAM_USE(s);
  memset((void*)(uintptr_t)dst, v, n);
  return SUCCESS;
}

/* ---------------------------------------------------------------- streams, events, host functions */

EXPORT CUresult cuStreamCreate(CUstream* s, unsigned flags) {
  FAIL_POINT("cuStreamCreate");
  if (current == NULL) return INVALID_CONTEXT;
  if ((flags & 1u) == 0) ++blocking_streams;
  *s = malloc(16);
  return SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  free(s);
  return SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
  FAIL_POINT("cuStreamSynchronize");
  STREAM_USE(s);
  return SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  (void)e;
  (void)flags;
  FAIL_POINT("cuStreamWaitEvent");
  STREAM_USE(s);
  return SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  FAIL_POINT("cuLaunchHostFunc");
  STREAM_USE(s);
  fn(data); /* everything before it is already done */
  return SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent* e, unsigned flags) {
  (void)flags;
  FAIL_POINT("cuEventCreate");
  if (current == NULL) return INVALID_CONTEXT;
  *e = malloc(16);
  return SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  free(e);
  return SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  (void)e;
  FAIL_POINT("cuEventRecord");
  STREAM_USE(s);
  return SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e) {
  (void)e;
  FAIL_POINT("cuEventQuery");
  return SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
  (void)e;
  FAIL_POINT("cuEventSynchronize");
  return SUCCESS;
}

/* ---------------------------------------------------------------- virtual memory */

#define GRANULARITY ((size_t)64 << 10)

typedef struct {
  int type, handle_types;
  struct {
    int type, id;
  } location;
  void* win32;
  unsigned char flags[8];
} Prop;

typedef struct {
  struct {
    int type, id;
  } location;
  int flags;
} Access;

EXPORT CUresult cuMemGetAllocationGranularity(size_t* g, const Prop* prop, int option) {
  (void)option;
  FAIL_POINT("cuMemGetAllocationGranularity");
  if (prop->type != 1 || prop->location.type != 1) return INVALID_VALUE;
  *g = GRANULARITY;
  return SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr* p, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags) {
  (void)align;
  (void)addr;
  (void)flags;
  FAIL_POINT("cuMemAddressReserve");
  void* m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)m;
  return SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
  munmap((void*)(uintptr_t)p, size);
  return SUCCESS;
}

/* A handle is a memfd plus one (0 is no handle). */
EXPORT CUresult cuMemCreate(unsigned long long* h, size_t size, const Prop* prop, unsigned long long flags) {
  (void)flags;
  FAIL_POINT("cuMemCreate");
  if (prop->type != 1 || prop->location.type != 1 || size % GRANULARITY != 0) return INVALID_VALUE;
  const int fd = memfd_create("fake-cuda", 0);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return OUT_OF_MEMORY;
  *h = (unsigned long long)fd + 1;
  return SUCCESS;
}

EXPORT CUresult cuMemRelease(unsigned long long h) {
  close((int)(h - 1));
  return SUCCESS;
}

#if !defined(FAKE_OLD) /* a CUDA 10.2 driver of this fake has no cuMemMap */
EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, unsigned long long h,
                         unsigned long long flags) {
  (void)flags;
  FAIL_POINT("cuMemMap");
  if (mmap((void*)(uintptr_t)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, (int)(h - 1), (off_t)offset) ==
      MAP_FAILED)
    return INVALID_VALUE;
  return SUCCESS;
}
#endif

EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const Access* desc, size_t count) {
  FAIL_POINT("cuMemSetAccess");
  if (count != 1 || desc->location.type != 1 || desc->flags != 3) return INVALID_VALUE;
  return mprotect((void*)(uintptr_t)p, size, PROT_READ | PROT_WRITE) == 0 ? SUCCESS : INVALID_VALUE;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
  FAIL_POINT("cuMemUnmap");
  /* Back to a reservation: inaccessible addresses. */
  void* m = mmap((void*)(uintptr_t)p, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return m == MAP_FAILED ? INVALID_VALUE : SUCCESS;
}

/* ---------------------------------------------------------------- modules (no kernels run here) */

EXPORT CUresult cuModuleLoadData(void** m, const void* image) {
  (void)m;
  (void)image;
  return NOT_SUPPORTED;
}
EXPORT CUresult cuModuleUnload(void* m) {
  (void)m;
  return SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
  (void)f;
  (void)m;
  (void)name;
  return NOT_FOUND;
}
EXPORT CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream s, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params,
      (void)extra;
  STREAM_USE(s);
  return NOT_SUPPORTED;
}

/* ---------------------------------------------------------------- entry points by name (CUDA 11.3+) */

#if !defined(FAKE_OLD)
/* Maps a base name to this library's symbol for it (the _v2 variant where there is one), as a
 * real driver does for the CUDA version asked for. */
EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  (void)flags;
  static const char* const versioned[] = {"cuDeviceTotalMem",  "cuDevicePrimaryCtxRelease",
                                          "cuMemGetInfo",      "cuMemAlloc",
                                          "cuMemFree",         "cuMemcpyHtoDAsync",
                                          "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync",
                                          "cuStreamDestroy",   "cuEventDestroy"};
  *pfn = NULL;
  if (version > 12040) return INVALID_VALUE; /* newer than this driver */
  char name[96];
  strncpy(name, symbol, sizeof name - 8);
  name[sizeof name - 8] = 0;
  for (size_t i = 0; i < sizeof versioned / sizeof versioned[0]; ++i)
    if (strcmp(symbol, versioned[i]) == 0) strcat(name, "_v2");
  Dl_info self;
  if (dladdr((void*)&cuGetProcAddress, &self) == 0) return NOT_FOUND;
  void* handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) return NOT_FOUND;
  *pfn = dlsym(handle, name);
  dlclose(handle);
  if (*pfn != NULL) ++proc_lookups;
  return SUCCESS; /* a symbol the driver lacks: success with a null pointer, as documented */
}
#endif
