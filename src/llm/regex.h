#pragma once
// A compiled PCRE2 pattern (UTF-8, Unicode properties for \p{..} and \s, JIT when the machine has
// it) owned RAII-style. The byte-level BPE pre-tokenizers need Unicode categories and look-ahead,
// which std::regex lacks.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::llm {

class Regex {
 public:
  // Error(InvalidArgument) naming the pattern, PCRE2's message and the offset when it does not compile.
  explicit Regex(std::string_view pattern);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  struct Match {
    size_t begin;
    size_t end;
  };
  // The leftmost match starting at or after `offset`, or nullopt. Invalid UTF-8 in the subject
  // never matches (PCRE2_MATCH_INVALID_UTF) rather than failing. Thread-safe (the match data is
  // per thread). Error(InvalidArgument) when PCRE2 gives up (e.g. its backtracking limits).
  std::optional<Match> find(std::string_view subject, size_t offset) const;

  const std::string& pattern() const noexcept { return pattern_; }
  bool jit() const noexcept { return jit_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
  bool jit_ = false;
};

}  // namespace tessera::llm
