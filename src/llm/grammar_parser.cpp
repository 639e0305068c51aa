// GBNF text -> grammar::Program (tessera/llm/grammar.h): a recursive-descent parser that rewrites
// groups and repetitions into rules, then the checks: undefined rules, `root`, left recursion.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/check.h"
#include "llm/grammar_program.h"
#include "tessera/llm/grammar.h"

namespace tessera::llm {
namespace {

using grammar::CharRange;
using grammar::CharSet;
using grammar::Program;
using grammar::Symbol;
using grammar::SymbolKind;

using Sequence = std::vector<Symbol>;
using Alternatives = std::vector<Sequence>;

constexpr int kUnbounded = -1;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : src_(text), limits_(limits) {}

  Program run() {
    skip(true);
    while (pos_ < src_.size()) {
      parse_rule();
      skip(true);
    }
    for (size_t r = 0; r < bodies_.size(); ++r)
      if (!defined_[r]) fail_at(first_use_[r], fmt::format("rule '{}' is not defined", names_[r]));
    const auto root = ids_.find("root");
    if (root == ids_.end()) raise(ErrorCode::InvalidArgument, "grammar: no 'root' rule");
    Program p = flatten();
    p.root = root->second;
    check_left_recursion(p);
    return p;
  }

 private:
  // --- errors and positions

  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((uint8_t(src_[i]) & 0xC0) != 0x80) {
        ++col;
      }
    }
    raise(ErrorCode::InvalidArgument, "grammar: {} at line {}, column {}", what, line, col);
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  // Spaces, tabs, comments, and newlines when `newlines`.
  void skip(bool newlines) {
    while (!at_end()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // Whether a rule definition (`name ::=`) starts at pos_.
  bool at_definition() const {
    size_t i = pos_;
    while (i < src_.size() && is_name_char(src_[i])) ++i;
    if (i == pos_) return false;
    while (i < src_.size() && (src_[i] == ' ' || src_[i] == '\t')) ++i;
    return src_.substr(i, 3) == "::=";
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(src_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  // --- rules

  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, fresh] = ids_.emplace(name, static_cast<uint32_t>(bodies_.size()));
    if (fresh) add_rule(name, name, false, used_at);
    return it->second;
  }

  uint32_t add_rule(const std::string& name, const std::string& origin, bool generated, size_t at) {
    if (bodies_.size() >= limits_.max_rules)
      fail_at(at, fmt::format("the grammar needs more than {} rules", limits_.max_rules));
    bodies_.emplace_back();
    names_.push_back(name);
    origin_.push_back(origin);
    defined_.push_back(generated);
    first_use_.push_back(at);
    return static_cast<uint32_t>(bodies_.size() - 1);
  }

  // A rule of our own for a group or a repetition, named after the rule it serves.
  uint32_t generated_rule(Alternatives body) {
    const std::string name = fmt::format("{}_{}", current_, ++generated_count_);
    const uint32_t id = add_rule(name, current_, true, pos_);
    bodies_[id] = std::move(body);
    return id;
  }

  void parse_rule() {
    const size_t start = pos_;
    current_ = parse_name();
    skip(false);
    if (src_.substr(pos_, 3) != "::=") fail(fmt::format("expected '::=' after '{}'", current_));
    pos_ += 3;
    const uint32_t id = rule_id(current_, start);
    if (defined_[id]) fail_at(start, fmt::format("rule '{}' is defined twice", current_));
    defined_[id] = true;
    first_use_[id] = start;
    Alternatives body = parse_alternatives(0);
    bodies_[id] = std::move(body);
    if (!at_end()) {
      if (peek() == ')') fail("unmatched ')'");
      if (!at_definition()) fail("expected a rule definition (name ::= ...)");
    }
  }

  Alternatives parse_alternatives(int depth) {
    Alternatives alts;
    skip(true);
    alts.push_back(parse_sequence(depth));
    while (peek() == '|') {
      ++pos_;
      skip(true);
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  void count_symbols(size_t n) {
    symbols_ += n;
    if (symbols_ > limits_.max_symbols)
      fail(fmt::format("the grammar needs more than {} symbols", limits_.max_symbols));
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    for (;;) {
      skip(true);
      if (at_end() || peek() == '|' || peek() == ')' || at_definition()) break;
      Sequence item = parse_item(depth);
      skip(false);
      apply_postfix(item, seq);
    }
    return seq;
  }

  Sequence parse_item(int depth) {
    const char c = peek();
    Sequence item;
    if (c == '"') {
      ++pos_;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') fail("unterminated string literal");
        const uint32_t cp = parse_char();
        item.push_back(single(cp));
      }
      ++pos_;
    } else if (c == '[') {
      item.push_back(parse_class());
    } else if (c == '.') {
      ++pos_;
      CharSet any;
      any.negated = true;
      item.push_back(add_set(std::move(any)));
    } else if (c == '(') {
      const size_t open = pos_;
      ++pos_;
      if (depth + 1 > limits_.max_nesting)
        fail_at(open, fmt::format("groups nest deeper than {}", limits_.max_nesting));
      Alternatives alts = parse_alternatives(depth + 1);
      if (peek() != ')') fail_at(open, "unclosed '('");
      ++pos_;
      // A group of one sequence is spliced in (a repetition copies it whole); others become a rule.
      if (alts.size() == 1) {
        item = std::move(alts[0]);
      } else {
        item.push_back(Symbol{SymbolKind::Rule, generated_rule(std::move(alts))});
      }
    } else if (is_name_char(c)) {
      const size_t at = pos_;
      const std::string name = parse_name();
      item.push_back(Symbol{SymbolKind::Rule, rule_id(name, at)});
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      fail(fmt::format("'{}' repeats nothing", c));
    } else {
      fail(fmt::format("unexpected character '{}'", std::string(1, c)));
    }
    count_symbols(item.size());
    return item;
  }

  // Appends `item` to `seq` as its postfix (if any) asks.
  void apply_postfix(Sequence& item, Sequence& seq) {
    const char c = peek();
    int min = 1, max = 1;
    if (c == '*') {
      min = 0, max = kUnbounded;
    } else if (c == '+') {
      min = 1, max = kUnbounded;
    } else if (c == '?') {
      min = 0, max = 1;
    } else if (c == '{') {
      parse_bounds(min, max);
    } else {
      seq.insert(seq.end(), item.begin(), item.end());
      return;
    }
    if (c != '{') ++pos_;
    skip(false);
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
      fail("a repetition of a repetition needs parentheses");
    if (item.empty()) return;  // () repeated is still nothing
    count_symbols(item.size() * static_cast<size_t>(std::max(min, 1)) + 2);
    for (int i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (max == kUnbounded) {
      // R ::= item R | (empty)
      const uint32_t r = generated_rule({});
      Sequence again = item;
      again.push_back(Symbol{SymbolKind::Rule, r});
      bodies_[r] = {std::move(again), {}};
      seq.push_back(Symbol{SymbolKind::Rule, r});
    } else if (max > min) {
      // R_k ::= item R_{k+1} | (empty), the last one item | (empty).
      count_symbols(item.size() * static_cast<size_t>(max - min) + 2 * static_cast<size_t>(max - min));
      uint32_t next = 0;
      bool has_next = false;
      for (int k = max - min; k > 0; --k) {
        Sequence s = item;
        if (has_next) s.push_back(Symbol{SymbolKind::Rule, next});
        next = generated_rule({std::move(s), {}});
        has_next = true;
      }
      seq.push_back(Symbol{SymbolKind::Rule, next});
    }
  }

  int parse_count() {
    const size_t start = pos_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > limits_.max_repetition)
        fail_at(start, fmt::format("a repetition bound is beyond the limit of {}", limits_.max_repetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return static_cast<int>(v);
  }

  void parse_bounds(int& min, int& max) {
    const size_t open = pos_;
    ++pos_;
    skip(false);
    if (peek() == ',') {
      min = 0;
    } else {
      min = parse_count();
    }
    skip(false);
    if (peek() == '}') {
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip(false);
      max = peek() == '}' ? kUnbounded : parse_count();
      skip(false);
    } else {
      fail("expected ',' or '}' in a repetition");
    }
    if (peek() != '}') fail("expected '}' to end a repetition");
    ++pos_;
    if (max != kUnbounded && max < min)
      fail_at(open, fmt::format("the repetition {{{},{}}} has its maximum below its minimum", min, max));
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  uint32_t parse_char() {
    const size_t at = pos_;
    const auto c = uint8_t(src_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (at_end()) fail("an escape at the end of the text");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.':
          return uint8_t(e);
        case 'x':
          return parse_hex(2, at);
        case 'u':
          return parse_hex(4, at);
        case 'U':
          return parse_hex(8, at);
        default:
          fail_at(at, fmt::format("unknown escape '\\{}'", std::string(1, e)));
      }
    }
    // UTF-8.
    int len = c < 0x80                 ? 1
              : c >= 0xC2 && c <= 0xDF ? 2
              : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4
                                       : 0;
    if (len == 0 || pos_ + len > src_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int i = 1; i < len; ++i) {
      const auto b = uint8_t(src_[pos_ + i]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
    pos_ += len;
    return cp;
  }

  uint32_t parse_hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = hex_value(peek());
      if (h < 0) fail_at(at, fmt::format("expected {} hex digits in an escape", digits));
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > 0x10FFFF) fail_at(at, "an escape beyond U+10FFFF");
    return v;
  }

  Symbol parse_class() {
    const size_t open = pos_;
    ++pos_;
    CharSet set;
    if (peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    while (peek() != ']') {
      if (at_end()) fail_at(open, "unclosed '['");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("a character range runs backwards");
      }
      set.ranges.push_back({lo, hi});
    }
    ++pos_;
    return add_set(std::move(set));
  }

  Symbol single(uint32_t cp) {
    auto it = singles_.find(cp);
    if (it != singles_.end()) return {SymbolKind::Chars, it->second};
    CharSet set;
    set.ranges.push_back({cp, cp});
    const Symbol s = add_set(std::move(set));
    singles_.emplace(cp, s.arg);
    return s;
  }

  Symbol add_set(CharSet set) {
    set.normalize();
    sets_.push_back(std::move(set));
    return {SymbolKind::Chars, static_cast<uint32_t>(sets_.size() - 1)};
  }

  // --- the program and its checks

  Program flatten() {
    Program p;
    p.sets = std::move(sets_);
    p.names = names_;
    p.alternatives.resize(bodies_.size());
    for (size_t r = 0; r < bodies_.size(); ++r)
      for (const Sequence& alt : bodies_[r]) {
        p.alternatives[r].push_back(static_cast<uint32_t>(p.symbols.size()));
        p.symbols.insert(p.symbols.end(), alt.begin(), alt.end());
        p.symbols.push_back(Symbol{});
      }
    return p;
  }

  void check_left_recursion(const Program& p) {
    const size_t n = p.alternatives.size();
    // Rules that derive the empty string, to a fixed point.
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t a : p.alternatives[r]) {
          bool all = true;
          for (uint32_t i = a; p.symbols[i].kind != SymbolKind::End && all; ++i)
            all = p.symbols[i].kind == SymbolKind::Rule && nullable[p.symbols[i].arg];
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Edges to the rules a rule may start with; a cycle among them is left recursion.
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r)
      for (uint32_t a : p.alternatives[r])
        for (uint32_t i = a; p.symbols[i].kind == SymbolKind::Rule; ++i) {
          left[r].push_back(p.symbols[i].arg);
          if (!nullable[p.symbols[i].arg]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    for (size_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      // Iterative DFS: (rule, next edge).
      std::vector<std::pair<uint32_t, size_t>> st{{static_cast<uint32_t>(start), 0}};
      color[start] = 1;
      while (!st.empty()) {
        auto& [r, e] = st.back();
        if (e < left[r].size()) {
          const uint32_t s = left[r][e++];
          if (color[s] == 1) {
            // The cycle is s .. top of the DFS stack: name a rule the user wrote, if any.
            std::string name = origin_[s];
            for (auto it = st.rbegin(); it != st.rend(); ++it) {
              if (!defined_by_user(it->first)) continue;
              name = names_[it->first];
              if (it->first == s) break;
            }
            raise(ErrorCode::InvalidArgument, "grammar: rule '{}' is left-recursive", name);
          }
          if (color[s] == 0) {
            color[s] = 1;
            st.push_back({s, 0});
          }
        } else {
          color[r] = 2;
          st.pop_back();
        }
      }
    }
  }

  bool defined_by_user(uint32_t r) const { return names_[r] == origin_[r]; }

  std::string_view src_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  std::vector<Alternatives> bodies_;
  std::vector<std::string> names_, origin_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<CharSet> sets_;
  std::unordered_map<uint32_t, uint32_t> singles_;
  std::string current_;
  int generated_count_ = 0;
  size_t symbols_ = 0;
};

}  // namespace

namespace grammar {

void CharSet::normalize() {
  std::sort(ranges.begin(), ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
  ascii = {};
  for (uint32_t cp = 0; cp < 128; ++cp)
    if (contains_slow(cp)) ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
}

bool CharSet::contains_slow(uint32_t cp) const noexcept {
  // The last range starting at or below cp.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const CharRange& r) { return v < r.lo; });
  const bool in = it != ranges.begin() && cp <= std::prev(it)->hi;
  return in != negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const noexcept {
  if (lo > hi) return false;
  if (!negated) {
    for (const CharRange& r : ranges)
      if (r.lo <= hi && lo <= r.hi) return true;
    return false;
  }
  // The complement meets [lo, hi] unless one merged range covers it whole.
  for (const CharRange& r : ranges)
    if (r.lo <= lo && hi <= r.hi) return false;
  return true;
}

}  // namespace grammar

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, const GrammarLimits& limits) {
  Parser parser(text, limits);
  auto program = std::make_shared<const Program>(parser.run());
  return std::make_shared<const Grammar>(std::move(program), limits);
}

size_t Grammar::rule_count() const noexcept { return program_->alternatives.size(); }

}  // namespace tessera::llm
