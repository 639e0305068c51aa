#include "tessera/error.h"

#include <cstdio>
#include <cstdlib>

namespace tessera {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "invalid argument";
    case ErrorCode::OutOfMemory:
      return "out of memory";
    case ErrorCode::DeviceError:
      return "device error";
    case ErrorCode::Unsupported:
      return "unsupported";
    case ErrorCode::CorruptFile:
      return "corrupt file";
    case ErrorCode::Io:
      return "I/O error";
    case ErrorCode::ContextFull:
      return "context full";
  }
  return "error";
}

void assert_failed(const char* condition, const char* file, int line) noexcept {
  std::fprintf(stderr, "tessera: assertion failed: %s (%s:%d)\n", condition, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera
