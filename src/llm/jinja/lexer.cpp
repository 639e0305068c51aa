#include "llm/jinja/lexer.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "llm/jinja/text.h"
#include "tessera/error.h"

namespace tessera::llm::jinja {
namespace {

// A text being edited by deletions, each byte remembering its original offset.
struct Edit {
  std::string text;
  std::vector<uint32_t> origin;

  void keep(const Edit& from, size_t i) {
    text += from.text[i];
    origin.push_back(from.origin[i]);
  }
};

bool is_line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  const char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 (E2 80 A8 / E2 80 A9) end lines for JavaScript's multiline ^ as well.
  return i >= 3 && static_cast<uint8_t>(s[i - 3]) == 0xE2 && static_cast<uint8_t>(s[i - 2]) == 0x80 &&
         (static_cast<uint8_t>(p) == 0xA8 || static_cast<uint8_t>(p) == 0xA9);
}

bool opens_block(const std::string& s, size_t i) {
  return i + 1 < s.size() && s[i] == '{' && (s[i + 1] == '#' || s[i + 1] == '%' || s[i + 1] == '-');
}

// lstrip_blocks: blanks between a line start and a block tag go.
Edit lstrip_blocks(const Edit& in) {
  Edit out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size();) {
    if (is_line_start(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j > i && opens_block(s, j)) i = j;
    }
    if (i < s.size()) out.keep(in, i++);
  }
  return out;
}

// trim_blocks: the newline right after "%}", "#}" or "-}" goes.
Edit trim_blocks(const Edit& in) {
  Edit out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size(); ++i) {
    out.keep(in, i);
    if ((s[i] == '#' || s[i] == '%' || s[i] == '-') && i + 2 < s.size() && s[i + 1] == '}' &&
        s[i + 2] == '\n') {
      out.keep(in, i + 1);
      i += 2;  // skip the newline
    }
  }
  return out;
}

// At s[i] == "{%": the end of a {% generation %} / {% endgeneration %} tag, with its strip flags.
bool generation_tag(const std::string& s, size_t i, size_t* end, bool* strip_before, bool* strip_after) {
  size_t j = i + 2;
  *strip_before = j < s.size() && s[j] == '-';
  if (*strip_before) ++j;
  j += space_prefix(s, j);
  if (s.compare(j, 3, "end") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return false;
  j += 10;
  j += space_prefix(s, j);
  *strip_after = j < s.size() && s[j] == '-';
  if (*strip_after) ++j;
  if (s.compare(j, 2, "%}") != 0) return false;
  *end = j + 2;
  return true;
}

// transformers' {% generation %} marks the assistant's text for training masks; it renders nothing.
Edit drop_generation_tags(const Edit& in) {
  Edit out;
  const std::string& s = in.text;
  size_t done = 0;  // in[done:] is not yet copied
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    size_t end = 0;
    bool before = false, after = false;
    if (s[i] != '{' || s[i + 1] != '%' || !generation_tag(s, i, &end, &before, &after)) continue;
    const size_t ws_before = space_suffix(std::string_view(s).substr(done, i - done), i - done);
    const size_t ws_after = space_prefix(s, end);
    const size_t copy_to = before ? i - ws_before : i;
    for (size_t k = done; k < copy_to; ++k) out.keep(in, k);
    if (!after)
      for (size_t k = end; k < end + ws_after; ++k) out.keep(in, k);
    done = end + ws_after;
    i = done - 1;
  }
  for (size_t k = done; k < s.size(); ++k) out.keep(in, k);
  return out;
}

struct Symbol {
  const char* text;
  TokenType type;
};

// Longest spellings first where one is a prefix of another.
constexpr std::array<Symbol, 29> kSymbols{{
    {"{%", TokenType::OpenStatement},  {"%}", TokenType::CloseStatement},
    {"{{", TokenType::OpenExpression}, {"}}", TokenType::CloseExpression},
    {"(", TokenType::OpenParen},       {")", TokenType::CloseParen},
    {"{", TokenType::OpenBrace},       {"}", TokenType::CloseBrace},
    {"[", TokenType::OpenBracket},     {"]", TokenType::CloseBracket},
    {",", TokenType::Comma},           {".", TokenType::Dot},
    {":", TokenType::Colon},           {"|", TokenType::Pipe},
    {"<=", TokenType::Comparison},     {">=", TokenType::Comparison},
    {"==", TokenType::Comparison},     {"!=", TokenType::Comparison},
    {"<", TokenType::Comparison},      {">", TokenType::Comparison},
    {"+", TokenType::Additive},        {"-", TokenType::Additive},
    {"~", TokenType::Additive},        {"**", TokenType::Power},
    {"*", TokenType::Multiplicative},  {"//", TokenType::Multiplicative},
    {"/", TokenType::Multiplicative},  {"%", TokenType::Multiplicative},
    {"=", TokenType::Assign},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const Source& source) : source_(source), s_(source.text()) {}

  std::vector<Token> run() {
    while (i_ < s_.size()) {
      const TokenType last = tokens_.empty() ? TokenType::Text : tokens_.back().type;
      if (tokens_.empty() || last == TokenType::CloseStatement || last == TokenType::CloseExpression ||
          last == TokenType::Comment) {
        const size_t start = i_;
        while (i_ < s_.size() && !(s_[i_] == '{' && i_ + 1 < s_.size() &&
                                   (s_[i_ + 1] == '%' || s_[i_ + 1] == '{' || s_[i_ + 1] == '#')))
          ++i_;
        if (i_ > start) {
          tokens_.push_back({TokenType::Text, s_.substr(start, i_ - start), start});
          continue;
        }
      }
      if (starts("{#")) {
        comment();
        continue;
      }
      if (starts("{%-") || starts("{{-")) {
        strip_trailing_space();
        const bool stmt = s_[i_ + 1] == '%';
        tokens_.push_back(
            {stmt ? TokenType::OpenStatement : TokenType::OpenExpression, stmt ? "{%" : "{{", i_});
        if (!stmt) brace_depth_ = 0;
        i_ += 3;
        continue;
      }
      i_ += space_prefix(s_, i_);
      if (i_ >= s_.size()) break;
      if (starts("-%}") || starts("-}}")) {
        const bool stmt = s_[i_ + 1] == '%';
        tokens_.push_back(
            {stmt ? TokenType::CloseStatement : TokenType::CloseExpression, stmt ? "%}" : "}}", i_});
        i_ += 3;
        i_ += space_prefix(s_, i_);
        continue;
      }
      const char c = s_[i_];
      if ((c == '-' || c == '+') && sign_is_unary()) {
        unary_sign();
        continue;
      }
      if (symbol()) continue;
      if (c == '\'' || c == '"') {
        string_literal();
        continue;
      }
      if (is_digit(c)) {
        number(i_, "");
        continue;
      }
      if (is_word(c)) {
        const size_t start = i_;
        while (i_ < s_.size() && is_word(s_[i_])) ++i_;
        tokens_.push_back({TokenType::Identifier, s_.substr(start, i_ - start), start});
        continue;
      }
      size_t n = 0;
      decode_utf8(s_, i_, &n);
      template_error(source_, i_, fmt::format("unexpected character '{}'", s_.substr(i_, n)));
    }
    return std::move(tokens_);
  }

 private:
  bool starts(std::string_view what) const { return s_.compare(i_, what.size(), what) == 0; }

  void strip_trailing_space() {
    if (tokens_.empty() || tokens_.back().type != TokenType::Text) return;
    std::string& t = tokens_.back().text;
    t.resize(t.size() - space_suffix(t, t.size()));
    if (t.empty()) tokens_.pop_back();
  }

  void comment() {
    const size_t start = i_;
    i_ += 2;
    const bool strip_before = i_ < s_.size() && s_[i_] == '-';
    if (strip_before) ++i_;
    const size_t close = s_.find("#}", i_);
    if (close == std::string::npos) template_error(source_, start, "unterminated comment: '{#' without '#}'");
    std::string body = s_.substr(i_, close - i_);
    const bool strip_after = !body.empty() && body.back() == '-';
    if (strip_after) body.pop_back();
    if (strip_before) strip_trailing_space();
    tokens_.push_back({TokenType::Comment, std::move(body), start});
    i_ = close + 2;
    if (strip_after) i_ += space_prefix(s_, i_);
  }

  // A sign after a value (a - 1, x[0] - 1) is binary; elsewhere ((-1), [-x], not -1) it is unary.
  bool sign_is_unary() const {
    if (tokens_.empty() || tokens_.back().type == TokenType::Text)
      template_error(source_, i_, fmt::format("unexpected '{}' outside a tag", s_[i_]));
    switch (tokens_.back().type) {
      case TokenType::Identifier:
      case TokenType::Integer:
      case TokenType::Float:
      case TokenType::String:
      case TokenType::CloseParen:
      case TokenType::CloseBracket:
        return false;
      default:
        return true;
    }
  }

  void unary_sign() {
    const size_t start = i_;
    const std::string sign(1, s_[i_++]);
    if (i_ < s_.size() && is_digit(s_[i_])) {
      number(start, sign);
      return;
    }
    tokens_.push_back({TokenType::UnarySign, sign, start});
  }

  void number(size_t start, const std::string& sign) {
    size_t j = i_;
    while (j < s_.size() && is_digit(s_[j])) ++j;
    bool is_float = false;
    const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::Dot;
    if (!after_dot && j + 1 < s_.size() && s_[j] == '.' && is_digit(s_[j + 1])) {
      is_float = true;
      ++j;
      while (j < s_.size() && is_digit(s_[j])) ++j;
    }
    tokens_.push_back(
        {is_float ? TokenType::Float : TokenType::Integer, sign + s_.substr(i_, j - i_), start});
    i_ = j;
  }

  bool symbol() {
    for (const Symbol& sym : kSymbols) {
      const std::string_view text = sym.text;
      if (sym.type == TokenType::CloseExpression && brace_depth_ > 0) continue;  // "}}" closing a dict
      if (!starts(text)) continue;
      tokens_.push_back({sym.type, std::string(text), i_});
      if (sym.type == TokenType::OpenExpression) brace_depth_ = 0;
      if (sym.type == TokenType::OpenBrace) ++brace_depth_;
      if (sym.type == TokenType::CloseBrace) --brace_depth_;
      i_ += text.size();
      return true;
    }
    return false;
  }

  void string_literal() {
    const size_t start = i_;
    const char quote = s_[i_++];
    std::string value;
    while (true) {
      if (i_ >= s_.size()) template_error(source_, start, "unterminated string");
      const char c = s_[i_];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i_;
        continue;
      }
      if (++i_ >= s_.size()) template_error(source_, start, "unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\'':
        case '"':
        case '\\':
          value += e;
          break;
        case 'x':
        case 'u': {
          const size_t len = e == 'x' ? 2 : 4;
          uint32_t cp = 0;
          for (size_t k = 0; k < len; ++k) {
            const int h = i_ + k < s_.size() ? hex_value(s_[i_ + k]) : -1;
            if (h < 0) template_error(source_, i_ - 2, fmt::format("invalid \\{} escape in a string", e));
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          append_utf8(value, cp);
          i_ += len;
          break;
        }
        default:
          template_error(source_, i_ - 2, fmt::format("unknown escape '\\{}' in a string", e));
      }
    }
    ++i_;  // the closing quote
    tokens_.push_back({TokenType::String, std::move(value), start});
  }

  const Source& source_;
  const std::string& s_;
  size_t i_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

Source::Source(std::string_view original) : original_(original) {
  Edit e;
  e.text = original_;
  e.origin.resize(original_.size());
  for (size_t i = 0; i < original_.size(); ++i) e.origin[i] = static_cast<uint32_t>(i);
  if (!e.text.empty() && e.text.back() == '\n') {
    e.text.pop_back();
    e.origin.pop_back();
  }
  e = drop_generation_tags(trim_blocks(lstrip_blocks(e)));
  text_ = std::move(e.text);
  origin_ = std::move(e.origin);
}

std::string Source::where(size_t pos) const {
  const size_t at = pos < origin_.size() ? origin_[pos] : original_.size();
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at && i < original_.size(); ++i) {
    if (original_[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<uint8_t>(original_[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

std::vector<Token> tokenize(const Source& source) { return Lexer(source).run(); }

void template_error(const Source& source, size_t pos, const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, fmt::format("chat template: {}: {}", source.where(pos), message));
}

}  // namespace tessera::llm::jinja
