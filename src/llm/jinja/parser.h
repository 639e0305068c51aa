#pragma once
// Tokens -> syntax tree, with the reference renderer's grammar (lowest precedence first):
// `a if c else b`, or, and, not, comparisons and in / not in, + - ~, * / // %, **, `is` tests,
// `|` filters, unary signs, calls / attributes / subscripts / slices, literals.
#include <vector>

#include "llm/jinja/ast.h"
#include "llm/jinja/lexer.h"

namespace tessera::llm::jinja {

// Nesting deeper than this (brackets, blocks) is an error rather than a deep native recursion.
inline constexpr int kMaxParseDepth = 200;

// Throws Error(InvalidArgument) naming the line and column of a syntax error.
Body parse(const Source& source, const std::vector<Token>& tokens);

}  // namespace tessera::llm::jinja
