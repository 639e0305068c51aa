// PCRE2 behind llm::Regex: compile with UTF | UCP | MATCH_INVALID_UTF, JIT-compile when possible,
// fall back to the interpreter when the JIT is missing or runs out of its stack.
#include "llm/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/check.h"

namespace tessera::llm {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? fmt::format("PCRE2 error {}", code)
               : std::string(reinterpret_cast<char*>(buffer), size_t(n));
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern) : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
  if (code_->code == nullptr) {
    raise(ErrorCode::InvalidArgument, "regular expression '{}' does not compile: {} (at offset {})", pattern_,
          pcre2_message(error), error_offset);
  }
  // Without JIT support (a build or a machine without it) pcre2_match interprets the pattern.
  jit_ = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

std::optional<Regex::Match> Regex::find(std::string_view subject, size_t offset) const {
  if (offset >= subject.size()) return std::nullopt;
  // One ovector pair (the whole match) is all that is read; a too-small ovector still gets it (rc 0).
  thread_local const std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create(1, nullptr));
  if (!data) raise(ErrorCode::OutOfMemory, "no memory for a regular expression match");
  const auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code_->code, text, subject.size(), offset, 0, data.get(), nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The JIT's machine stack is small; the interpreter backtracks on the heap.
    rc = pcre2_match(code_->code, text, subject.size(), offset, PCRE2_NO_JIT, data.get(), nullptr);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
  if (rc < 0) {
    raise(ErrorCode::InvalidArgument, "regular expression '{}' failed on a text of {} bytes: {}", pattern_,
          subject.size(), pcre2_message(rc));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
  return Match{size_t(ovector[0]), size_t(ovector[1])};
}

}  // namespace tessera::llm
