#include "llm/jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>

namespace tessera::llm::jinja {
namespace {

const char* describe(TokenType t) {
  switch (t) {
    case TokenType::Text:
      return "text";
    case TokenType::Comment:
      return "a comment";
    case TokenType::OpenStatement:
      return "'{%'";
    case TokenType::CloseStatement:
      return "'%}'";
    case TokenType::OpenExpression:
      return "'{{'";
    case TokenType::CloseExpression:
      return "'}}'";
    case TokenType::Identifier:
      return "a name";
    case TokenType::Integer:
    case TokenType::Float:
      return "a number";
    case TokenType::String:
      return "a string";
    default:
      return "an operator";
  }
}

class Parser {
 public:
  Parser(const Source& source, const std::vector<Token>& tokens) : source_(source), t_(tokens) {}

  Body program() {
    Body body;
    while (i_ < t_.size()) body.push_back(any());
    return body;
  }

 private:
  // --- tokens -------------------------------------------------------------------------------
  bool at_end(size_t k = 0) const { return i_ + k >= t_.size(); }
  bool is(TokenType type, size_t k = 0) const { return !at_end(k) && t_[i_ + k].type == type; }
  bool is_name(std::string_view name, size_t k = 0) const {
    return is(TokenType::Identifier, k) && t_[i_ + k].text == name;
  }
  size_t pos() const { return at_end() ? source_.text().size() : t_[i_].pos; }

  [[noreturn]] void fail(const std::string& message) const { template_error(source_, pos(), message); }
  [[noreturn]] void unexpected(const char* expected) const {
    if (at_end()) fail(fmt::format("expected {}, found the end of the template", expected));
    const Token& t = t_[i_];
    const std::string what = t.type == TokenType::Identifier || t.type >= TokenType::OpenParen
                                 ? "'" + t.text + "'"
                                 : describe(t.type);
    fail(fmt::format("expected {}, found {}", expected, what));
  }
  const Token& expect(TokenType type, const char* expected) {
    if (!is(type)) unexpected(expected);
    return t_[i_++];
  }
  void expect_name(std::string_view name) {
    if (!is_name(name)) unexpected(fmt::format("'{}'", name).c_str());
    ++i_;
  }
  std::string identifier(const char* what) { return expect(TokenType::Identifier, what).text; }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail(fmt::format("nesting deeper than {} levels", kMaxParseDepth));
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  ExprPtr node(Expr::Kind kind, size_t at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = at;
    return e;
  }

  // --- statements -----------------------------------------------------------------------------
  // A block body up to (not including) "{% <one of enders>"; the end of the template is an error
  // that names the block's start.
  Body body_until(std::initializer_list<std::string_view> enders, const char* block, size_t opened) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      if (at_end())
        template_error(source_, opened,
                       fmt::format("'{}' is never closed (missing {{% end{} %}})", block, block));
      if (is(TokenType::OpenStatement) && is(TokenType::Identifier, 1) &&
          std::find(enders.begin(), enders.end(), t_[i_ + 1].text) != enders.end())
        return body;
      body.push_back(any());
    }
  }

  void end_tag(std::string_view name) {
    expect(TokenType::OpenStatement, "'{%'");
    expect_name(name);
    expect(TokenType::CloseStatement, "'%}'");
  }

  std::unique_ptr<Stmt> any() {
    const Token& t = t_[i_];
    switch (t.type) {
      case TokenType::Text: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->pos = t.pos;
        s->text = t.text;
        ++i_;
        return s;
      }
      case TokenType::Comment: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;  // renders nothing
        s->pos = t.pos;
        ++i_;
        return s;
      }
      case TokenType::OpenExpression: {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->pos = t.pos;
        ++i_;
        s->expr = expression();
        expect(TokenType::CloseExpression, "'}}'");
        return s;
      }
      case TokenType::OpenStatement:
        return statement();
      default:
        unexpected("text, '{{' or '{%'");
    }
  }

  std::unique_ptr<Stmt> statement() {
    const size_t start = pos();
    ++i_;  // {%
    if (!is(TokenType::Identifier)) unexpected("a statement name");
    const std::string name = t_[i_++].text;
    auto s = std::make_unique<Stmt>();
    s->pos = start;
    if (name == "if") {
      if_rest(*s, start);
      end_tag("endif");
    } else if (name == "for") {
      for_rest(*s, start);
      end_tag("endfor");
    } else if (name == "set") {
      set_rest(*s, start);
    } else if (name == "macro") {
      s->kind = Stmt::Kind::Macro;
      s->text = identifier("a macro name");
      s->params = params();
      expect(TokenType::CloseStatement, "'%}'");
      s->body = body_until({"endmacro"}, "macro", start);
      expect(TokenType::OpenStatement, "'{%'");
      expect_name("endmacro");
      if (is(TokenType::Identifier)) ++i_;  // {% endmacro name %}
      expect(TokenType::CloseStatement, "'%}'");
    } else if (name == "call") {
      s->kind = Stmt::Kind::CallBlock;
      if (is(TokenType::OpenParen)) s->params = params();
      const size_t at = pos();
      s->expr = postfix();
      if (s->expr->kind != Expr::Kind::Call)
        template_error(source_, at, "expected a macro call after 'call'");
      expect(TokenType::CloseStatement, "'%}'");
      s->body = body_until({"endcall"}, "call", start);
      end_tag("endcall");
    } else if (name == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->expr = node(Expr::Kind::Filter, pos());
      s->expr->name = identifier("a filter name");
      if (is(TokenType::OpenParen)) s->expr->args = call_args();
      expect(TokenType::CloseStatement, "'%}'");
      s->body = body_until({"endfilter"}, "filter", start);
      end_tag("endfilter");
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) template_error(source_, start, fmt::format("'{}' outside a loop", name));
      s->kind = name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(TokenType::CloseStatement, "'%}'");
    } else {
      template_error(source_, start, fmt::format("unknown statement '{}'", name));
    }
    return s;
  }

  void if_rest(Stmt& s, size_t start) {
    s.kind = Stmt::Kind::If;
    s.expr = expression();
    expect(TokenType::CloseStatement, "'%}'");
    s.body = body_until({"elif", "else", "endif"}, "if", start);
    if (is_name("elif", 1)) {
      const size_t at = pos();
      i_ += 2;
      auto nested = std::make_unique<Stmt>();
      nested->pos = at;
      if_rest(*nested, start);
      s.else_body.push_back(std::move(nested));
    } else if (is_name("else", 1)) {
      i_ += 2;
      expect(TokenType::CloseStatement, "'%}'");
      s.else_body = body_until({"endif"}, "if", start);
    }
  }

  void for_rest(Stmt& s, size_t start) {
    s.kind = Stmt::Kind::For;
    const bool parenthesized = is(TokenType::OpenParen);
    if (parenthesized) ++i_;
    s.targets.push_back(identifier("a loop variable"));
    while (is(TokenType::Comma)) {
      ++i_;
      s.targets.push_back(identifier("a loop variable"));
    }
    if (parenthesized) expect(TokenType::CloseParen, "')'");
    expect_name("in");
    ExprPtr iterable = expression();
    // `for x in xs if cond`: the trailing condition filters the items.
    if (iterable->kind == Expr::Kind::Conditional && iterable->kids.size() == 2) {
      s.condition = std::move(iterable->kids[1]);
      iterable = std::move(iterable->kids[0]);
    }
    s.expr = std::move(iterable);
    if (is_name("recursive")) fail("recursive loops are not supported");
    expect(TokenType::CloseStatement, "'%}'");
    ++loop_depth_;
    s.body = body_until({"else", "endfor"}, "for", start);
    --loop_depth_;
    if (is_name("else", 1)) {
      i_ += 2;
      expect(TokenType::CloseStatement, "'%}'");
      s.else_body = body_until({"endfor"}, "for", start);
    }
  }

  void set_rest(Stmt& s, size_t start) {
    s.kind = Stmt::Kind::Set;
    const size_t at = pos();
    ExprPtr target = postfix();
    if (is(TokenType::Comma)) {
      auto tuple = node(Expr::Kind::TupleLit, at);
      tuple->kids.push_back(std::move(target));
      while (is(TokenType::Comma)) {
        ++i_;
        tuple->kids.push_back(postfix());
      }
      target = std::move(tuple);
    }
    const auto assignable = [](const Expr& e) {
      return e.kind == Expr::Kind::Variable ||
             (e.kind == Expr::Kind::Attribute && e.kids[0]->kind == Expr::Kind::Variable);
    };
    bool ok = assignable(*target);
    if (target->kind == Expr::Kind::TupleLit) {
      ok = true;
      for (const auto& k : target->kids) ok = ok && k->kind == Expr::Kind::Variable;
    }
    if (!ok)
      template_error(source_, at, "can only assign to a name, names separated by commas, or name.attribute");
    s.target = std::move(target);
    if (is(TokenType::Assign)) {
      ++i_;
      s.expr = sequence();
      expect(TokenType::CloseStatement, "'%}'");
      return;
    }
    expect(TokenType::CloseStatement, "'=' or '%}'");
    s.body = body_until({"endset"}, "set", start);
    end_tag("endset");
  }

  std::vector<Param> params() {
    expect(TokenType::OpenParen, "'('");
    std::vector<Param> out;
    while (!is(TokenType::CloseParen)) {
      Param p;
      const size_t at = pos();
      p.name = identifier("a parameter name");
      for (const Param& q : out)
        if (q.name == p.name) template_error(source_, at, fmt::format("duplicate parameter '{}'", p.name));
      if (is(TokenType::Assign)) {
        ++i_;
        p.default_value = expression();
      } else if (!out.empty() && out.back().default_value) {
        template_error(source_, at, "a parameter without a default follows one with a default");
      }
      out.push_back(std::move(p));
      if (!is(TokenType::Comma)) break;
      ++i_;
    }
    expect(TokenType::CloseParen, "')'");
    return out;
  }

  // --- expressions ----------------------------------------------------------------------------
  // Expressions separated by commas: a tuple.
  ExprPtr sequence() {
    const size_t at = pos();
    ExprPtr first = expression();
    if (!is(TokenType::Comma)) return first;
    auto tuple = node(Expr::Kind::TupleLit, at);
    tuple->kids.push_back(std::move(first));
    while (is(TokenType::Comma)) {
      ++i_;
      tuple->kids.push_back(expression());
    }
    return tuple;
  }

  ExprPtr expression() {
    DepthGuard guard(*this);
    const size_t at = pos();
    ExprPtr a = logical_or();
    if (!is_name("if")) return a;
    ++i_;
    auto e = node(Expr::Kind::Conditional, at);
    e->kids.push_back(std::move(a));
    e->kids.push_back(logical_or());
    if (is_name("else")) {
      ++i_;
      e->kids.push_back(expression());
    }
    return e;
  }

  ExprPtr logical_or() {
    ExprPtr left = logical_and();
    while (is_name("or")) {
      auto e = node(Expr::Kind::Or, pos());
      ++i_;
      e->kids.push_back(std::move(left));
      e->kids.push_back(logical_and());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr logical_and() {
    ExprPtr left = logical_not();
    while (is_name("and")) {
      auto e = node(Expr::Kind::And, pos());
      ++i_;
      e->kids.push_back(std::move(left));
      e->kids.push_back(logical_not());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr logical_not() {
    if (!is_name("not")) return comparison();
    DepthGuard guard(*this);
    auto e = node(Expr::Kind::Unary, pos());
    ++i_;
    e->name = "not";
    e->kids.push_back(logical_not());
    return e;
  }

  ExprPtr comparison() {
    ExprPtr left = additive();
    while (true) {
      std::string op;
      const size_t at = pos();
      if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is(TokenType::Comparison)) {
        op = t_[i_++].text;
      } else {
        return left;
      }
      left = binary(op, at, std::move(left), additive());
    }
  }

  ExprPtr binary(const std::string& op, size_t at, ExprPtr a, ExprPtr b) {
    auto e = node(Expr::Kind::Binary, at);
    e->name = op;
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr additive() {
    ExprPtr left = multiplicative();
    while (is(TokenType::Additive)) {
      const Token& op = t_[i_++];
      left = binary(op.text, op.pos, std::move(left), multiplicative());
    }
    return left;
  }

  ExprPtr multiplicative() {
    ExprPtr left = power();
    while (is(TokenType::Multiplicative)) {
      const Token& op = t_[i_++];
      left = binary(op.text, op.pos, std::move(left), power());
    }
    return left;
  }

  ExprPtr power() {
    ExprPtr left = test();
    while (is(TokenType::Power)) {
      const Token& op = t_[i_++];
      left = binary(op.text, op.pos, std::move(left), test());
    }
    return left;
  }

  static bool is_keyword(const std::string& s) {
    return s == "and" || s == "or" || s == "not" || s == "if" || s == "else" || s == "in" || s == "is";
  }

  ExprPtr test() {
    ExprPtr operand = filter();
    while (is_name("is")) {
      auto e = node(Expr::Kind::Test, pos());
      ++i_;
      if (is_name("not")) {
        e->negate = true;
        ++i_;
      }
      e->name = identifier("a test name");
      if (is(TokenType::OpenParen)) {
        e->args = call_args();
      } else if (is(TokenType::Integer) || is(TokenType::Float) || is(TokenType::String) ||
                 (is(TokenType::Identifier) && !is_keyword(t_[i_].text))) {
        CallArg arg;  // `x is divisibleby 3`, `x is sameas none`
        arg.value = postfix();
        e->args.push_back(std::move(arg));
      }
      e->kids.push_back(std::move(operand));
      operand = std::move(e);
    }
    return operand;
  }

  ExprPtr filter() {
    ExprPtr operand = unary();
    while (is(TokenType::Pipe)) {
      auto e = node(Expr::Kind::Filter, pos());
      ++i_;
      e->name = identifier("a filter name");
      if (is(TokenType::OpenParen)) e->args = call_args();
      e->kids.push_back(std::move(operand));
      operand = std::move(e);
    }
    return operand;
  }

  ExprPtr unary() {
    if ((is(TokenType::UnarySign) || is(TokenType::Additive)) && (t_[i_].text == "-" || t_[i_].text == "+")) {
      DepthGuard guard(*this);
      auto e = node(Expr::Kind::Unary, pos());
      e->name = t_[i_++].text;
      e->kids.push_back(unary());
      return e;
    }
    return postfix();
  }

  ExprPtr postfix() {
    ExprPtr e = primary();
    while (true) {
      const size_t at = pos();
      if (is(TokenType::Dot)) {
        ++i_;
        if (is(TokenType::Integer)) {  // x.0 is x[0]
          auto idx = node(Expr::Kind::Index, at);
          idx->kids.push_back(std::move(e));
          idx->kids.push_back(integer(t_[i_++]));
          e = std::move(idx);
          continue;
        }
        auto attr = node(Expr::Kind::Attribute, at);
        attr->name = identifier("an attribute name after '.'");
        attr->kids.push_back(std::move(e));
        e = std::move(attr);
      } else if (is(TokenType::OpenBracket)) {
        ++i_;
        e = subscript(std::move(e), at);
      } else if (is(TokenType::OpenParen)) {
        auto call = node(Expr::Kind::Call, e->pos);  // errors of a call point at its callee
        call->args = call_args();
        call->kids.push_back(std::move(e));
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  // After '[': an index or a slice [start:stop:step], each part optional.
  ExprPtr subscript(ExprPtr object, size_t at) {
    DepthGuard guard(*this);
    std::vector<ExprPtr> parts(1);
    while (!is(TokenType::CloseBracket)) {
      if (is(TokenType::Colon)) {
        if (parts.size() == 3) fail("a slice has at most three parts");
        parts.emplace_back();
        ++i_;
        continue;
      }
      if (parts.back()) unexpected("':' or ']'");
      parts.back() = expression();
    }
    ++i_;
    if (parts.size() == 1) {
      if (!parts[0]) template_error(source_, at, "empty subscript '[]'");
      auto e = node(Expr::Kind::Index, at);
      e->kids.push_back(std::move(object));
      e->kids.push_back(std::move(parts[0]));
      return e;
    }
    auto e = node(Expr::Kind::Slice, at);
    e->kids.push_back(std::move(object));
    parts.resize(3);
    for (auto& p : parts) e->kids.push_back(std::move(p));
    return e;
  }

  std::vector<CallArg> call_args() {
    DepthGuard guard(*this);
    expect(TokenType::OpenParen, "'('");
    std::vector<CallArg> args;
    while (!is(TokenType::CloseParen)) {
      CallArg arg;
      const size_t at = pos();
      if (is(TokenType::Multiplicative) || is(TokenType::Power))
        fail("argument unpacking (* and **) is not supported");
      if (is(TokenType::Identifier) && is(TokenType::Assign, 1)) {
        arg.keyword = t_[i_].text;
        i_ += 2;
        for (const CallArg& a : args)
          if (a.keyword == arg.keyword)
            template_error(source_, at, fmt::format("keyword argument '{}' given twice", arg.keyword));
      } else if (!args.empty() && !args.back().keyword.empty()) {
        template_error(source_, at, "a positional argument follows a keyword argument");
      }
      arg.value = expression();
      args.push_back(std::move(arg));
      if (!is(TokenType::Comma)) break;
      ++i_;
    }
    expect(TokenType::CloseParen, "',' or ')'");
    return args;
  }

  ExprPtr integer(const Token& t) {
    auto e = node(Expr::Kind::Literal, t.pos);
    int64_t v = 0;
    const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      template_error(source_, t.pos, fmt::format("integer {} out of range", t.text));
    e->literal = Value(v);
    return e;
  }

  ExprPtr primary() {
    if (at_end()) unexpected("an expression");
    const Token& t = t_[i_];
    const size_t at = t.pos;
    switch (t.type) {
      case TokenType::Integer:
        ++i_;
        return integer(t);
      case TokenType::Float: {
        ++i_;
        auto e = node(Expr::Kind::Literal, at);
        e->literal = Value(std::stod(t.text));
        return e;
      }
      case TokenType::String: {
        auto e = node(Expr::Kind::Literal, at);
        std::string s;
        while (is(TokenType::String)) s += t_[i_++].text;  // 'a' 'b' is 'ab'
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenType::Identifier: {
        ++i_;
        auto e = node(Expr::Kind::Literal, at);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::Variable;
          e->name = t.text;
        }
        return e;
      }
      case TokenType::OpenParen: {
        DepthGuard guard(*this);
        ++i_;
        if (is(TokenType::CloseParen)) {  // () is an empty tuple
          ++i_;
          return node(Expr::Kind::TupleLit, at);
        }
        ExprPtr e = sequence();
        expect(TokenType::CloseParen, "')'");
        return e;
      }
      case TokenType::OpenBracket: {
        DepthGuard guard(*this);
        ++i_;
        auto e = node(Expr::Kind::ListLit, at);
        while (!is(TokenType::CloseBracket)) {
          e->kids.push_back(expression());
          if (!is(TokenType::Comma)) break;
          ++i_;
        }
        expect(TokenType::CloseBracket, "',' or ']'");
        return e;
      }
      case TokenType::OpenBrace: {
        DepthGuard guard(*this);
        ++i_;
        auto e = node(Expr::Kind::DictLit, at);
        while (!is(TokenType::CloseBrace)) {
          e->kids.push_back(expression());
          expect(TokenType::Colon, "':' after a dict key");
          e->kids.push_back(expression());
          if (!is(TokenType::Comma)) break;
          ++i_;
        }
        expect(TokenType::CloseBrace, "',' or '}'");
        return e;
      }
      default:
        unexpected("an expression");
    }
  }

  const Source& source_;
  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const Source& source, const std::vector<Token>& tokens) {
  return Parser(source, tokens).program();
}

}  // namespace tessera::llm::jinja
