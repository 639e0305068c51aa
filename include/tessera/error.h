#pragma once
// Errors: every bad input ends in a tessera::Error; broken invariants in TESSERA_ASSERT.
#include <stdexcept>
#include <string>

namespace tessera {

enum class ErrorCode {
  InvalidArgument,  // bad shapes, types, flags, indices
  OutOfMemory,      // an allocation the host or a device cannot satisfy
  DeviceError,      // a vendor runtime call failed
  Unsupported,      // valid, but not implemented (op on a backend, file feature)
  CorruptFile,      // a file that breaks its format's rules
  Io,               // open/read/write/rename failures
  ContextFull,      // the KV cache has no free cells for the tokens
};

const char* to_string(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Prints "assertion failed: COND (file:line)" and aborts. For internal invariants only.
[[noreturn]] void assert_failed(const char* condition, const char* file, int line) noexcept;

}  // namespace tessera

#define TESSERA_ASSERT(cond)                                          \
  do {                                                                \
    if (!(cond)) ::tessera::assert_failed(#cond, __FILE__, __LINE__); \
  } while (0)
