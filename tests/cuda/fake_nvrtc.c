/* A fake NVRTC (version 99.1) for the loader's tests: every entry point the runtime resolves,
 * none of which compiles anything. Built as libnvrtc.so in two folders, one with the fake
 * builtins library beside it (fake_nvrtc_builtins.c) and one without. */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))
enum { SUCCESS = 0, INVALID_INPUT = 3, COMPILATION = 6 };

EXPORT int nvrtcVersion(int* major, int* minor) {
  *major = 99;
  *minor = 1;
  return SUCCESS;
}
EXPORT const char* nvrtcGetErrorString(int r) {
  return r == COMPILATION ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR";
}
EXPORT int nvrtcCreateProgram(void** p, const char* src, const char* name, int n, const char* const* h,
                              const char* const* i) {
  (void)p, (void)src, (void)name, (void)n, (void)h, (void)i;
  return INVALID_INPUT;
}
EXPORT int nvrtcDestroyProgram(void** p) {
  (void)p;
  return SUCCESS;
}
EXPORT int nvrtcCompileProgram(void* p, int n, const char* const* o) {
  (void)p, (void)n, (void)o;
  return COMPILATION;
}
EXPORT int nvrtcGetProgramLogSize(void* p, size_t* n) {
  (void)p;
  *n = 1;
  return SUCCESS;
}
EXPORT int nvrtcGetProgramLog(void* p, char* log) {
  (void)p;
  log[0] = 0;
  return SUCCESS;
}
EXPORT int nvrtcGetCUBINSize(void* p, size_t* n) {
  (void)p;
  *n = 0;
  return INVALID_INPUT;
}
EXPORT int nvrtcGetCUBIN(void* p, char* c) {
  (void)p, (void)c;
  return INVALID_INPUT;
}
