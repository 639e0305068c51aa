/* A fake NVRTC (version 99.1) for the loader's and the compiler's tests: every entry point the
 * runtime resolves. Its "CUBIN" is the text "FAKE-CUBIN", the options one per line, then the source;
 * a source holding "#error" does not compile (the log says why). fake_nvrtc_compiles() counts the
 * compiles. Built as libnvrtc.so in two folders, one with the fake builtins library beside it
 * (fake_nvrtc_builtins.c) and one without. */
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
enum { SUCCESS = 0, INVALID_INPUT = 3, INVALID_PROGRAM = 5, COMPILATION = 6 };

struct program {
  char* source;
  char* cubin; /* after a successful compile */
  char* log;
};

static int compiles;
EXPORT int fake_nvrtc_compiles(void) { return compiles; }

static char* copy(const char* s) {
  const size_t n = strlen(s) + 1;
  char* c = malloc(n);
  if (c != NULL) memcpy(c, s, n);
  return c;
}

EXPORT int nvrtcVersion(int* major, int* minor) {
  *major = 99;
  *minor = 1;
  return SUCCESS;
}
EXPORT const char* nvrtcGetErrorString(int r) {
  return r == COMPILATION       ? "NVRTC_ERROR_COMPILATION"
         : r == INVALID_PROGRAM ? "NVRTC_ERROR_INVALID_PROGRAM"
                                : "NVRTC_ERROR";
}
EXPORT int nvrtcCreateProgram(void** p, const char* src, const char* name, int n, const char* const* h,
                              const char* const* i) {
  (void)name, (void)n, (void)h, (void)i;
  if (p == NULL || src == NULL) return INVALID_INPUT;
  struct program* prog = calloc(1, sizeof *prog);
  if (prog == NULL || (prog->source = copy(src)) == NULL) return INVALID_INPUT;
  *p = prog;
  return SUCCESS;
}
EXPORT int nvrtcDestroyProgram(void** p) {
  if (p == NULL || *p == NULL) return INVALID_PROGRAM;
  struct program* prog = *p;
  free(prog->source);
  free(prog->cubin);
  free(prog->log);
  free(prog);
  *p = NULL;
  return SUCCESS;
}
EXPORT int nvrtcCompileProgram(void* p, int n, const char* const* o) {
  struct program* prog = p;
  if (prog == NULL) return INVALID_PROGRAM;
  ++compiles;
  const char* err = strstr(prog->source, "#error");
  if (err != NULL) {
    const char* prefix = "kernel.cu(1): error: ";
    prog->log = malloc(strlen(prefix) + strlen(err) + 1);
    if (prog->log != NULL) strcat(strcpy(prog->log, prefix), err);
    return COMPILATION;
  }
  size_t size = strlen("FAKE-CUBIN\n") + strlen(prog->source) + 1;
  for (int k = 0; k < n; ++k) size += strlen(o[k]) + 1;
  prog->cubin = malloc(size);
  if (prog->cubin == NULL) return INVALID_INPUT;
  strcpy(prog->cubin, "FAKE-CUBIN\n");
  for (int k = 0; k < n; ++k) strcat(strcat(prog->cubin, o[k]), "\n");
  strcat(prog->cubin, prog->source);
  return SUCCESS;
}
EXPORT int nvrtcGetProgramLogSize(void* p, size_t* n) {
  const struct program* prog = p;
  if (prog == NULL) return INVALID_PROGRAM;
  *n = prog->log != NULL ? strlen(prog->log) + 1 : 1;
  return SUCCESS;
}
EXPORT int nvrtcGetProgramLog(void* p, char* log) {
  const struct program* prog = p;
  if (prog == NULL) return INVALID_PROGRAM;
  strcpy(log, prog->log != NULL ? prog->log : "");
  return SUCCESS;
}
EXPORT int nvrtcGetCUBINSize(void* p, size_t* n) {
  const struct program* prog = p;
  if (prog == NULL || prog->cubin == NULL) return INVALID_PROGRAM;
  *n = strlen(prog->cubin);
  return SUCCESS;
}
EXPORT int nvrtcGetCUBIN(void* p, char* c) {
  const struct program* prog = p;
  if (prog == NULL || prog->cubin == NULL) return INVALID_PROGRAM;
  memcpy(c, prog->cubin, strlen(prog->cubin));
  return SUCCESS;
}
