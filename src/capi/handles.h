#pragma once
// What the C API's opaque handles hold, and the guard every entry point runs its body in: any
// exception becomes a tessera_status with the thread's last-error message.
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera.h"
#include "tessera/llm/chat_template.h"
#include "tessera/llm/generator.h"
#include "tessera/llm/model.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

struct tessera_model {
  std::unique_ptr<tessera::llm::Model> model;
  std::unique_ptr<tessera::llm::Vocab> vocab;
  std::optional<std::string> chat_template;  // the file's, when it has one
};

struct tessera_context {
  const tessera_model* model = nullptr;
  std::unique_ptr<tessera::llm::Session> session;
  bool embeddings = false;
  size_t row = 0;  // floats per output: n_vocab, or n_embd in an embeddings context
  std::vector<float> outputs;
  size_t n_outputs = 0;
  // tessera_generate's loop in sequence 0 (it knows what the sequence holds while nothing else
  // touches it).
  std::unique_ptr<tessera::llm::Generator> generator;
  std::atomic<bool> cancel{false};
};

struct tessera_sampler {
  tessera::llm::SamplerOptions options;
  std::unique_ptr<tessera::llm::Sampler> sampler;
};

namespace tessera::capi {

// A failure the C API raises itself, with its own status (not one of tessera::ErrorCode's).
struct Failure {
  tessera_status status;
  std::string message;
};
[[noreturn]] void fail(tessera_status status, std::string message);

// Runs body; returns TESSERA_OK, or the status of what it threw (the message kept per thread).
template <class Body>
tessera_status guarded(Body&& body) noexcept;

tessera_status status_of_current_exception() noexcept;

template <class Body>
tessera_status guarded(Body&& body) noexcept {
  try {
    body();
    return TESSERA_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

// Checks a required pointer argument.
void require(const void* p, const char* what);

// Reads a parameter struct of a possibly older (smaller) layout: defaults, then the caller's
// first struct_size bytes. A struct_size under the first field's end or over ours is refused.
template <class Params>
Params read_params(const Params* given, Params defaults, const char* what) {
  if (given == nullptr) return defaults;
  if (given->struct_size < sizeof(size_t) || given->struct_size > sizeof(Params))
    fail(TESSERA_INVALID_ARGUMENT,
         std::string(what) + ": struct_size " + std::to_string(given->struct_size) +
             " is not a size of this struct (set it with the *_default_params call)");
  std::memcpy(static_cast<void*>(&defaults), given, given->struct_size);
  return defaults;
}

// Copies text into the caller's buffer with a NUL (BUFFER_TOO_SMALL, nothing written, when it
// does not fit); *length gets its size either way.
void copy_text(std::string_view text, char* out, size_t capacity, size_t* length);
// Likewise for token ids (no terminator).
void copy_tokens(const std::vector<int32_t>& tokens, int32_t* out, size_t capacity, size_t* count);

// The value a C caller passed for an enum, read as its bytes: any int may arrive from C, and a C++
// load of an enum outside its enumerators' range is undefined (UBSan stops on it).
template <class Enum>
int enum_value(const Enum& e) noexcept {
  static_assert(sizeof(Enum) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// A C string argument that may be NULL as "".
inline std::string_view text_of(const char* s) { return s ? std::string_view(s) : std::string_view(); }

}  // namespace tessera::capi
