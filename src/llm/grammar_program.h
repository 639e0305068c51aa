#pragma once
// The compiled form of a GBNF grammar (tessera/llm/grammar.h): every rule's alternatives are runs
// of symbols in one array, each run ended by End. A matching position is an index into that array.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::llm::grammar {

enum class SymbolKind : uint8_t { End, Chars, Rule };

struct Symbol {
  SymbolKind kind = SymbolKind::End;
  uint32_t arg = 0;  // Chars: the index of its CharSet; Rule: the rule's id
};

// Code points in [lo, hi].
struct CharRange {
  uint32_t lo = 0, hi = 0;
};

// A set of code points: the union of `ranges` (sorted, disjoint, not adjacent), or with `negated`
// everything else. `ascii` holds the answer for code points below 128.
struct CharSet {
  std::vector<CharRange> ranges;
  bool negated = false;
  std::array<uint64_t, 2> ascii{};

  void normalize();  // sorts and merges ranges, fills ascii
  bool contains(uint32_t cp) const noexcept {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    return contains_slow(cp);
  }
  bool contains_slow(uint32_t cp) const noexcept;
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const noexcept;
};

struct Program {
  std::vector<Symbol> symbols;
  std::vector<CharSet> sets;
  std::vector<std::vector<uint32_t>>
      alternatives;                // per rule: the position of each alternative's first symbol
  std::vector<std::string> names;  // per rule
  uint32_t root = 0;
};

}  // namespace tessera::llm::grammar
