#pragma once
// Matching text against a Grammar: a pushdown automaton over Unicode code points. The state is a
// set of stacks of grammar positions (every way the text so far can continue), as llama.cpp's
// grammar keeps it; bytes are decoded as UTF-8 one at a time, so text may stop inside a
// character and go on later. Stacks share their frames (interned in an arena), so a state costs
// one id per stack and two equal states hold the same ids. Growth is bounded by the Grammar's
// limits: more than max_stacks stacks or max_frames frames is an Error, never unbounded memory.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tessera/llm/grammar.h"

namespace tessera::llm {

class GrammarState {
 public:
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Feeds bytes: true when the grammar allows them (the state moves on), false when it does not
  // (the state stays as it was). Error(InvalidArgument) when a limit is exceeded.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would return true; the state does not change.
  bool accepts(std::string_view bytes);
  // The text accepted so far is a whole sentence of the grammar (generation may end here).
  bool complete() const noexcept;
  // Some character may still follow.
  bool can_continue() const noexcept;
  const Grammar& grammar() const noexcept { return *grammar_; }

  // --- for token masks (GrammarMatcher)

  // Where matching stands: the stacks (sorted ids; 0 is the empty stack) and an unfinished UTF-8
  // character (its bits so far, the continuation bytes it still needs, its length).
  struct Heads {
    std::vector<uint32_t> stacks;
    uint32_t partial = 0;
    uint8_t need = 0;
    uint8_t length = 0;
    bool operator==(const Heads&) const = default;
  };
  const Heads& heads() const noexcept { return heads_; }
  // `in` after one more byte, into `out` (cleared first); false (out.stacks empty) when rejected.
  bool step(const Heads& in, uint8_t byte, Heads& out);
  // The arena's size, and a return to it: frames interned after mark() (by step) are dropped.
  // Only for walks that leave heads() as they found it.
  size_t mark() const noexcept { return frames_.size(); }
  void rollback(size_t mark);

 private:
  struct Frame {
    uint32_t pos;
    uint32_t parent;
  };
  uint32_t intern(uint32_t pos, uint32_t parent);
  uint32_t after(uint32_t pos, uint32_t parent);  // the stack once the symbol at pos is matched
  void expand(uint32_t stack, std::vector<uint32_t>& out);
  void accept_code_point(const std::vector<uint32_t>& in, uint32_t cp, std::vector<uint32_t>& out);
  bool feasible(const Heads& h) const;
  void new_round();
  void grow_table();
  size_t slot_of(uint32_t pos, uint32_t parent) const;

  std::shared_ptr<const Grammar> grammar_;
  const grammar::Program* program_;
  std::vector<Frame> frames_;    // id 0: the empty stack
  std::vector<uint32_t> table_;  // open addressing over frames (pos, parent) -> id; 0 empty
  std::vector<uint32_t> seen_;   // per frame: the round it was expanded in
  uint32_t round_ = 0;
  Heads heads_;
};

}  // namespace tessera::llm
