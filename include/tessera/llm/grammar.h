#pragma once
// GBNF grammars (llama.cpp's format), compiled for matching by GrammarState: rules
// `name ::= alternatives`, `|`, sequences, string literals ("..." with \n \r \t \\ \" \[ \] \xHH
// \uHHHH \UHHHHHHHH), character classes ([a-z0-9_], negated [^"\\], escapes as in literals), `.`
// (any character), rule references, groups `( ... )`, repetitions `*`, `+`, `?`, `{m}`, `{m,}`,
// `{m,n}` and `{,n}`, comments from `#` to the end of the line; `root` is the start rule. Text is
// matched as Unicode code points (UTF-8). Repetitions are rewritten into rules, as llama.cpp does.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tessera::llm {

namespace grammar {
struct Program;  // the compiled rules (src/llm/grammar_program.h)
}

struct GrammarLimits {
  size_t max_rules = 1 << 16;    // rules, those repetitions and groups generate included
  size_t max_symbols = 1 << 21;  // compiled symbols in all (repetitions copy their item)
  int max_repetition = 2000;     // m and n of x{m,n}
  int max_nesting = 64;          // groups inside groups
  size_t max_stacks = 4096;      // stacks a matching state may hold (GrammarState)
  size_t max_frames = 1 << 22;   // stack frames a GrammarState may hold in all (memory bound)
};

class Grammar {
 public:
  // Compiles GBNF text. Error(InvalidArgument) on a syntax error (naming line:column), a rule
  // defined twice, a reference to an undefined rule, no `root`, left recursion (naming the rule),
  // or a grammar beyond `limits`.
  static std::shared_ptr<const Grammar> parse(std::string_view text, const GrammarLimits& limits = {});

  const GrammarLimits& limits() const noexcept { return limits_; }
  size_t rule_count() const noexcept;
  // The compiled form, for GrammarState (internal).
  const grammar::Program& program() const noexcept { return *program_; }

  Grammar(std::shared_ptr<const grammar::Program> program, const GrammarLimits& limits)
      : program_(std::move(program)), limits_(limits) {}

 private:
  std::shared_ptr<const grammar::Program> program_;
  GrammarLimits limits_;
};

}  // namespace tessera::llm
