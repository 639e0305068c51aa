#pragma once
// The syntax tree of a template: expressions and statements, each with its position (an offset in
// the preprocessed text, for error messages).
#include <memory>
#include <string>
#include <vector>

#include "llm/jinja/value.h"

namespace tessera::llm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One argument of a call, filter or test: positional (keyword empty) or keyword.
struct CallArg {
  std::string keyword;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Literal,      // literal
    Variable,     // name
    ListLit,      // kids
    TupleLit,     // kids (a list at run time)
    DictLit,      // kids: key, value, key, value, ...
    Attribute,    // kids[0].name
    Index,        // kids[0][kids[1]]
    Slice,        // kids[0][kids[1]:kids[2]:kids[3]] (missing parts nullptr)
    Call,         // kids[0](args)
    Filter,       // kids[0] | name(args)
    Test,         // kids[0] is [not] name(args)
    Unary,        // name ("not", "-", "+") kids[0]
    Binary,       // kids[0] name kids[1] (arithmetic, comparison, in, not in, ~)
    And,          // kids[0] and kids[1]
    Or,           // kids[0] or kids[1]
    Conditional,  // kids[0] if kids[1] else kids[2]; without else (kids.size() == 2), undefined
  };
  Kind kind;
  size_t pos = 0;
  std::string name;
  Value literal;
  std::vector<ExprPtr> kids;
  std::vector<CallArg> args;
  bool negate = false;  // Test: "is not"
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// A macro parameter, with its default (nullptr: none).
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // if expr: body else else_body (elif is a nested If in else_body)
    For,          // for targets in expr [if condition]: body else else_body
    Set,          // set target = expr, or {% set target %}body{% endset %}
    Macro,        // macro name(params): body
    CallBlock,    // {% call(params) expr %}body{% endcall %} (expr is a Call)
    FilterBlock,  // {% filter name(args) %}body{% endfilter %} (filter: Filter over a null operand)
    Break,
    Continue,
  };
  Kind kind;
  size_t pos = 0;
  std::string text;  // Text; Macro: the name
  ExprPtr expr;
  ExprPtr condition;                 // For: the loop filter (nullptr: none)
  ExprPtr target;                    // Set: Variable, TupleLit of Variables or Attribute
  std::vector<std::string> targets;  // For: loop variables (two or more: unpacking)
  std::vector<Param> params;         // Macro, CallBlock
  Body body, else_body;
};

}  // namespace tessera::llm::jinja
