#pragma once
// A sandboxed Jinja interpreter for chat templates. Templates see only the variables the caller
// passes and these globals: range, namespace, dict, raise_exception, strftime_now (formatting the
// caller's "now", in UTC); there is no file, environment or network access, and every render is
// bounded (Limits: output size, loop iterations, macro depth, text built). A syntax error, an
// unknown filter or test, a runtime error, raise_exception or an exceeded limit is an
// Error(InvalidArgument) "chat template: line L, column C: ...".
//
// Semantics follow Hugging Face's @huggingface/jinja, the renderer transformers.js uses and the
// reference the fixtures are checked against: trim_blocks and lstrip_blocks on; `{{ x }}` of none
// or undefined prints nothing, of a boolean "true"/"false", of a whole float "2.0"; lists and dicts
// print as JSON; tojson keeps non-ASCII text; title() and capitalize() leave other letters alone;
// attributes of undefined values are undefined. Where the reference is silent or differs from
// Python's Jinja2 only by accident, Jinja2 decides: strip('\n') strips only the given characters
// (the reference ignores the argument), `==` compares lists and dicts by value, `%` and `//` floor
// toward negative infinity, string length and indices count characters, selectattr with a test
// applies it to a missing attribute as undefined. upper() and lower() map ASCII, Latin-1, Greek and
// Cyrillic letters only.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm/jinja/ast.h"
#include "llm/jinja/builtins.h"
#include "llm/jinja/lexer.h"

namespace tessera::llm::jinja {

class Template {
 public:
  // Parses the template; a syntax error or an unknown filter or test is an Error.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` (which may override the globals). `now` is what strftime_now formats.
  // The text keeps which bytes came from the variables' data (see marked_string.h): the
  // template's own text and the values it computes itself are literal.
  MarkedString render(const std::vector<std::pair<std::string, Value>>& variables, const Limits& limits,
                      std::chrono::system_clock::time_point now) const;

 private:
  std::unique_ptr<Source> source_;
  Body body_;
};

// Python's strftime for the directives templates use (%Y %y %m %d %e %b %B %a %A %H %I %M %S %p %j
// %%), in UTC; others are kept as written.
std::string format_time(std::string_view format, std::chrono::system_clock::time_point t);

}  // namespace tessera::llm::jinja
