#pragma once
// Template text -> tokens. Chat templates are rendered as Hugging Face renders them: with
// trim_blocks (the newline after a block tag is dropped) and lstrip_blocks (blanks before a block
// tag at the start of a line are dropped), a single trailing newline removed, and transformers'
// {% generation %} markers ignored. `{%-`, `-%}`, `{{-`, `-}}`, `{#-` and `-#}` strip the
// whitespace next to them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::llm::jinja {

enum class TokenType {
  Text,
  Comment,
  OpenStatement,    // {%
  CloseStatement,   // %}
  OpenExpression,   // {{
  CloseExpression,  // }}
  Identifier,
  Integer,
  Float,
  String,
  OpenParen,
  CloseParen,
  OpenBracket,
  CloseBracket,
  OpenBrace,
  CloseBrace,
  Comma,
  Dot,
  Colon,
  Pipe,
  Assign,          // =
  Comparison,      // == != < > <= >=
  Additive,        // + - ~
  Multiplicative,  // * / // %
  Power,           // **
  UnarySign,       // a - or + that is not a binary operator
};

struct Token {
  TokenType type;
  std::string text;  // the decoded value for strings, the spelling otherwise
  size_t pos;        // offset in the preprocessed text
};

// The preprocessed template with, for each of its bytes, the offset in the original text, so that
// errors name the line and column the author wrote.
class Source {
 public:
  explicit Source(std::string_view original);
  const std::string& text() const noexcept { return text_; }
  // "line L, column C" (1-based; columns count characters) of a preprocessed offset.
  std::string where(size_t pos) const;

 private:
  std::string original_;
  std::string text_;
  std::vector<uint32_t> origin_;
};

// Throws Error(InvalidArgument) naming the line and column of a malformed tag, string or character.
std::vector<Token> tokenize(const Source& source);

// "chat template: line L, column C: message" as an Error(InvalidArgument).
[[noreturn]] void template_error(const Source& source, size_t pos, const std::string& message);

}  // namespace tessera::llm::jinja
