// Versions, statuses and the per-thread last error.
#include <fmt/format.h>

#include <new>
#include <stdexcept>

#include "capi/handles.h"
#include "tessera/error.h"
#include "tessera/version.h"

namespace tessera::capi {
namespace {

thread_local std::string last_error;

tessera_status status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return TESSERA_INVALID_ARGUMENT;
    case ErrorCode::OutOfMemory:
      return TESSERA_OUT_OF_MEMORY;
    case ErrorCode::DeviceError:
      return TESSERA_DEVICE_ERROR;
    case ErrorCode::Unsupported:
      return TESSERA_UNSUPPORTED;
    case ErrorCode::CorruptFile:
      return TESSERA_CORRUPT_FILE;
    case ErrorCode::Io:
      return TESSERA_IO_ERROR;
    case ErrorCode::ContextFull:
      return TESSERA_CONTEXT_FULL;
  }
  return TESSERA_INTERNAL_ERROR;
}

tessera_status failed(tessera_status status, const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    last_error.clear();  // no memory for the message: the status still says what happened
  }
  return status;
}

}  // namespace

void fail(tessera_status status, std::string message) { throw Failure{status, std::move(message)}; }

void require(const void* p, const char* what) {
  if (p == nullptr) fail(TESSERA_INVALID_ARGUMENT, fmt::format("{} is NULL", what));
}

tessera_status status_of_current_exception() noexcept {
  try {
    throw;
  } catch (const Failure& f) {
    return failed(f.status, f.message.c_str());
  } catch (const Error& e) {
    return failed(status_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return failed(TESSERA_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return failed(TESSERA_INTERNAL_ERROR, e.what());
  } catch (...) {
    return failed(TESSERA_INTERNAL_ERROR, "an unknown exception");
  }
}

void copy_text(std::string_view text, char* out, size_t capacity, size_t* length) {
  require(length, "length");
  *length = text.size();
  if (out == nullptr || capacity < text.size() + 1)
    fail(TESSERA_BUFFER_TOO_SMALL, fmt::format("the text needs {} bytes and a NUL; the buffer has {}",
                                               text.size(), out == nullptr ? 0 : capacity));
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
}

void copy_tokens(const std::vector<int32_t>& tokens, int32_t* out, size_t capacity, size_t* count) {
  require(count, "n_tokens");
  *count = tokens.size();
  if (tokens.size() > capacity || (out == nullptr && !tokens.empty()))
    fail(TESSERA_BUFFER_TOO_SMALL,
         fmt::format("{} tokens; the buffer holds {}", tokens.size(), out == nullptr ? 0 : capacity));
  if (!tokens.empty()) std::memcpy(out, tokens.data(), tokens.size() * sizeof(int32_t));
}

}  // namespace tessera::capi

extern "C" {

const char* tessera_version(void) { return tessera::kVersion; }

const char* tessera_last_error(void) { return tessera::capi::last_error.c_str(); }

const char* tessera_status_name(tessera_status status) {
  switch (tessera::capi::enum_value(status)) {
    case int{TESSERA_OK}:
      return "ok";
    case int{TESSERA_INVALID_ARGUMENT}:
      return "invalid argument";
    case int{TESSERA_OUT_OF_MEMORY}:
      return "out of memory";
    case int{TESSERA_DEVICE_ERROR}:
      return "device error";
    case int{TESSERA_UNSUPPORTED}:
      return "unsupported";
    case int{TESSERA_CORRUPT_FILE}:
      return "corrupt file";
    case int{TESSERA_IO_ERROR}:
      return "I/O error";
    case int{TESSERA_BUFFER_TOO_SMALL}:
      return "buffer too small";
    case int{TESSERA_CANCELLED}:
      return "cancelled";
    case int{TESSERA_CONTEXT_FULL}:
      return "context full";
    case int{TESSERA_INTERNAL_ERROR}:
      return "internal error";
  }
  return "unknown";
}

}  // extern "C"
