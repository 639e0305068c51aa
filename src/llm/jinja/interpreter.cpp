#include "llm/jinja/interpreter.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <deque>
#include <unordered_map>

#include "llm/jinja/parser.h"
#include "tessera/error.h"

namespace tessera::llm::jinja {
namespace {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) { vars[name] = std::move(v); }
};

// Whether `v` holds `target` (the same dict) anywhere inside: storing it there would make a cycle.
bool reaches(const Value& v, const Dict* target, int depth = 0) {
  if (depth > 10000) return true;
  if (v.is_dict()) {
    if (&v.as_dict() == target) return true;
    for (const auto& kv : v.as_dict().items())
      if (reaches(kv.second, target, depth + 1)) return true;
  } else if (v.is_list()) {
    for (const Value& x : v.as_list())
      if (reaches(x, target, depth + 1)) return true;
  }
  return false;
}

bool numeric_like(const Value& v) { return v.is_number() || v.is_bool(); }

void check_overflow(bool overflow, const std::string& op) {
  if (overflow) throw RuntimeError(fmt::format("integer overflow in '{}'", op));
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic_numbers(const std::string& op, const Value& a, const Value& b);

Value arithmetic(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "*" && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
    const MarkedString& s = a.is_string() ? a.as_marked() : b.as_marked();
    const int64_t n = std::max<int64_t>(0, a.is_int() ? a.as_int() : b.as_int());
    if (n > 0 && s.size() > 0) budget.charge(s.size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)));
    MarkedString out;
    for (int64_t i = 0; i < n; ++i) out.append(s);
    return Value(std::move(out));
  }
  // A number computed from data is data.
  return arithmetic_numbers(op, a, b).with_data(a.has_data() || b.has_data());
}

Value arithmetic_numbers(const std::string& op, const Value& a, const Value& b) {
  if (!numeric_like(a) || !numeric_like(b))
    throw RuntimeError(fmt::format("cannot apply '{}' to {} and {}", op, a.type_name(), b.type_name()));
  const bool floating = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_number() == 0) throw RuntimeError("division by zero");
    return Value(a.as_number() / b.as_number());
  }
  if (floating) {
    const double x = a.as_number(), y = b.as_number();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") {
      if (x == 0 && y < 0) throw RuntimeError("0 cannot be raised to a negative power");
      return Value(std::pow(x, y));
    }
    if (y == 0) throw RuntimeError(fmt::format("'{}' by zero", op));
    if (op == "//") return Value(std::floor(x / y));
    const double m = std::fmod(x, y);
    return Value(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
  }
  const int64_t x = a.as_int(), y = b.as_int();
  int64_t r = 0;
  if (op == "+" || op == "-" || op == "*") {
    const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                          : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                      : __builtin_mul_overflow(x, y, &r);
    check_overflow(overflow, op);
    return Value(r);
  }
  if (op == "**") {
    if (y < 0) {
      if (x == 0) throw RuntimeError("0 cannot be raised to a negative power");
      return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
    if (x == 0 || x == 1) return Value(y == 0 ? int64_t{1} : x);
    if (x == -1) return Value(y % 2 == 0 ? int64_t{1} : int64_t{-1});
    int64_t p = 1;  // |x| >= 2: overflows within 63 steps
    for (int64_t i = 0; i < y; ++i) check_overflow(__builtin_mul_overflow(p, x, &p), op);
    return Value(p);
  }
  if (y == 0) throw RuntimeError(fmt::format("'{}' by zero", op));
  if (x == INT64_MIN && y == -1) throw RuntimeError(fmt::format("integer overflow in '{}'", op));
  if (op == "//") return Value(floor_div(x, y));
  return Value(x - floor_div(x, y) * y);  // %: the sign of the divisor, as in Python
}

bool contains(const Value& item, const Value& container) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string())
      throw RuntimeError(fmt::format("'in <string>' needs a string, not {}", item.type_name()));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  if (container.is_list()) {
    for (const Value& x : container.as_list())
      if (equals(x, item)) return true;
    return false;
  }
  throw RuntimeError(fmt::format("'in' needs a list, dict or string, not {}", container.type_name()));
}

// `~` and string `+`: each byte keeps its origin.
Value concat(const Value& a, const Value& b, Budget& budget) {
  MarkedString s = to_marked_concat(a);
  s.append(to_marked_concat(b));
  budget.charge(s.size());
  return Value(std::move(s));
}

Value binary(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "==") return Value(equals(a, b));
  if (op == "!=") return Value(!equals(a, b));
  if (op == "in") return Value(contains(a, b));
  if (op == "not in") return Value(!contains(a, b));
  if (op == "~") return concat(a, b, budget);
  if (op == "<") return Value(compare(a, b) < 0);
  if (op == ">") return Value(compare(a, b) > 0);
  if (op == "<=") return Value(compare(a, b) <= 0);
  if (op == ">=") return Value(compare(a, b) >= 0);
  const bool nothing = a.is_undefined() || a.is_none() || b.is_undefined() || b.is_none();
  if (op == "+" && !nothing) {
    if (a.is_list() && b.is_list()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      budget.charge(out.size() * sizeof(Value));
      return Value(std::move(out));
    }
    if (a.is_string() || b.is_string()) return concat(a, b, budget);
  }
  return arithmetic(op, a, b, budget);
}

class Interpreter {
 public:
  Interpreter(const Source& source, const Limits& limits) : source_(source), budget_(limits) {}

  Scope* new_scope(Scope* parent) {
    scopes_.emplace_back();
    scopes_.back().parent = parent;
    return &scopes_.back();
  }

  Budget& budget() { return budget_; }

  MarkedString run(const Body& body, Scope& globals) {
    MarkedString out;
    exec(body, globals, out);
    return out;
  }

 private:
  enum class Flow { Normal, Break, Continue };

  [[noreturn]] void fail(size_t pos, const std::string& message) { template_error(source_, pos, message); }

  void check_output(const MarkedString& out, size_t more) {
    if (out.size() + more > budget_.limits().max_output)
      throw RuntimeError(
          fmt::format("the output exceeds the limit of {} bytes", budget_.limits().max_output));
    budget_.charge(more);
  }
  // The template's own text.
  void append(MarkedString& out, std::string_view s) {
    check_output(out, s.size());
    out.append(s);
  }
  void append(MarkedString& out, const MarkedString& s) {
    check_output(out, s.size());
    out.append(s);
  }

  Flow exec(const Body& body, Scope& scope, MarkedString& out) {
    for (const auto& s : body) {
      const Flow f = exec_stmt(*s, scope, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  MarkedString capture(const Body& body, Scope& scope) {
    MarkedString out;
    exec(body, scope, out);
    return out;
  }

  Flow exec_stmt(const Stmt& s, Scope& scope, MarkedString& out) {
    try {
      switch (s.kind) {
        case Stmt::Kind::Text:
          append(out, s.text);
          return Flow::Normal;
        case Stmt::Kind::Output:
          append(out, to_marked_output(eval(*s.expr, scope)));
          return Flow::Normal;
        case Stmt::Kind::If:
          return exec(eval(*s.expr, scope).truthy() ? s.body : s.else_body, scope, out);
        case Stmt::Kind::For:
          return exec_for(s, scope, out);
        case Stmt::Kind::Set:
          exec_set(s, scope);
          return Flow::Normal;
        case Stmt::Kind::Macro:
          define_macro(s, scope);
          return Flow::Normal;
        case Stmt::Kind::CallBlock:
          append(out, to_marked_output(call_block(s, scope)));
          return Flow::Normal;
        case Stmt::Kind::FilterBlock: {
          const Value body(capture(s.body, scope));
          append(out,
                 to_marked_output(apply_filter(s.expr->name, body, eval_args(s.expr->args, scope), budget_)));
          return Flow::Normal;
        }
        case Stmt::Kind::Break:
          return Flow::Break;
        case Stmt::Kind::Continue:
          return Flow::Continue;
      }
    } catch (const RuntimeError& e) {
      fail(s.pos, e.what());
    }
    return Flow::Normal;
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& item, Scope& scope) {
    if (targets.size() == 1) {
      scope.set(targets[0], item);
      return;
    }
    if (!item.is_list())
      throw RuntimeError(fmt::format("cannot unpack a value of type {} into {} loop variables",
                                     item.type_name(), targets.size()));
    if (item.as_list().size() != targets.size())
      throw RuntimeError(fmt::format("cannot unpack {} items into {} loop variables", item.as_list().size(),
                                     targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], item.as_list()[i]);
  }

  Flow exec_for(const Stmt& s, Scope& scope, MarkedString& out) {
    Scope& loop_scope = *new_scope(&scope);
    List all = iterate(eval(*s.expr, scope), "a for loop");
    List items;
    if (s.condition) {
      Scope& test_scope = *new_scope(&loop_scope);  // the loop variables, for the condition only
      for (const Value& item : all) {
        budget_.iterate();
        test_scope.vars.clear();
        bind_targets(s.targets, item, test_scope);
        if (eval(*s.condition, test_scope).truthy()) items.push_back(item);
      }
    } else {
      items = std::move(all);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      budget_.iterate();
      Value loop = Value::new_dict();
      Dict& d = loop.as_dict();
      d.set("index", Value(i + 1));
      d.set("index0", Value(i));
      d.set("revindex", Value(n - i));
      d.set("revindex0", Value(n - i - 1));
      d.set("first", Value(i == 0));
      d.set("last", Value(i == n - 1));
      d.set("length", Value(n));
      d.set("previtem", i > 0 ? items[i - 1] : Value());
      d.set("nextitem", i + 1 < n ? items[i + 1] : Value());
      d.set("cycle", Value(Function{"cycle", [i](const Arguments& a) {
                                      if (a.positional.empty())
                                        throw RuntimeError("loop.cycle() needs arguments");
                                      return a.positional[static_cast<size_t>(i) % a.positional.size()];
                                    }}));
      loop_scope.set("loop", loop);
      bind_targets(s.targets, items[i], loop_scope);
      if (exec(s.body, loop_scope, out) == Flow::Break) break;
    }
    if (items.empty()) exec(s.else_body, loop_scope, out);
    return Flow::Normal;
  }

  void exec_set(const Stmt& s, Scope& scope) {
    Value v = s.expr ? eval(*s.expr, scope) : Value(capture(s.body, scope));
    const Expr& t = *s.target;
    if (t.kind == Expr::Kind::Variable) {
      scope.set(t.name, std::move(v));
    } else if (t.kind == Expr::Kind::TupleLit) {
      std::vector<std::string> names;
      for (const auto& k : t.kids) names.push_back(k->name);
      bind_targets(names, v, scope);
    } else {  // name.attribute
      const Value obj = eval(*t.kids[0], scope);
      if (!obj.is_namespace())
        throw RuntimeError(fmt::format("cannot set an attribute of a value of type {} (only of a namespace)",
                                       obj.type_name()));
      if (reaches(v, &obj.as_dict())) throw RuntimeError("cannot store a namespace inside itself");
      obj.as_dict().set(t.name, std::move(v));
    }
  }

  void define_macro(const Stmt& s, Scope& scope) {
    Scope* defined_in = &scope;
    scope.set(s.text, Value(Function{s.text, [this, &s, defined_in](const Arguments& a) {
                                       return call_macro(s, *defined_in, a);
                                     }}));
  }

  // Binds `params` from the arguments in a new scope under `parent`, then renders `body` there.
  // Extra arguments land in varargs / kwargs; a "caller" keyword is the body of a call block.
  Value invoke(const std::string& name, const std::vector<Param>& params, const Body& body, Scope& parent,
               const Arguments& a) {
    struct Depth {
      explicit Depth(int& d) : d_(d) { ++d_; }
      ~Depth() { --d_; }
      int& d_;
    } depth(depth_);
    if (depth_ > budget_.limits().max_call_depth)
      throw RuntimeError(fmt::format("macro calls nested deeper than {}", budget_.limits().max_call_depth));
    Scope& scope = *new_scope(&parent);
    List varargs;
    for (size_t i = params.size(); i < a.positional.size(); ++i) varargs.push_back(a.positional[i]);
    Value kwargs = Value::new_dict();
    for (const auto& kv : a.keyword) {
      const std::string& k = kv.first;
      const Value& v = kv.second;
      const bool is_param =
          std::any_of(params.begin(), params.end(), [&](const Param& p) { return p.name == k; });
      if (k == "caller" && !is_param)
        scope.set("caller", v);
      else if (!is_param)
        kwargs.as_dict().set(k, v);
    }
    std::vector<const Param*> pending;
    for (size_t i = 0; i < params.size(); ++i) {
      const Value* v = i < a.positional.size() ? &a.positional[i] : a.keyword_arg(params[i].name);
      if (v == nullptr && params[i].default_value) pending.push_back(&params[i]);
      scope.set(params[i].name, v != nullptr ? *v : Value());
    }
    scope.set("varargs", Value(std::move(varargs)));
    scope.set("kwargs", kwargs);
    for (const Param* p : pending) scope.set(p->name, eval(*p->default_value, scope));
    (void)name;
    return Value(capture(body, scope));
  }

  Value call_macro(const Stmt& s, Scope& defined_in, const Arguments& a) {
    return invoke(s.text, s.params, s.body, defined_in, a);
  }

  Value call_block(const Stmt& s, Scope& scope) {
    const Expr& call = *s.expr;
    Scope* here = &scope;
    Value caller(Function{"caller", [this, &s, here](const Arguments& a) {
                            return invoke("caller", s.params, s.body, *here, a);
                          }});
    const Value callee = eval(*call.kids[0], scope);
    Arguments args = eval_args(call.args, scope);
    args.keyword.emplace_back("caller", caller);
    return call_function(callee, args, *call.kids[0]);
  }

  Arguments eval_args(const std::vector<CallArg>& args, Scope& scope) {
    Arguments out;
    for (const CallArg& a : args) {
      Value v = eval(*a.value, scope);
      if (a.keyword.empty())
        out.positional.push_back(std::move(v));
      else
        out.keyword.emplace_back(a.keyword, std::move(v));
    }
    return out;
  }

  Value call_function(const Value& f, const Arguments& args, const Expr& callee) {
    if (!f.is_function()) {
      if (callee.kind == Expr::Kind::Variable && f.is_undefined())
        throw RuntimeError(fmt::format("'{}' is undefined and cannot be called", callee.name));
      if (callee.kind == Expr::Kind::Attribute && f.is_undefined())
        throw RuntimeError(fmt::format("no method '{}' on this value", callee.name));
      throw RuntimeError(fmt::format("a value of type {} cannot be called", f.type_name()));
    }
    return f.as_function().call(args);
  }

  Value eval(const Expr& e, Scope& scope) {
    try {
      return eval_inner(e, scope);
    } catch (const RuntimeError& err) {
      fail(e.pos, err.what());
    }
  }

  Value eval_inner(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.literal;
      case Expr::Kind::Variable: {
        const Value* v = scope.find(e.name);
        return v != nullptr ? *v : Value();
      }
      case Expr::Kind::ListLit:
      case Expr::Kind::TupleLit: {
        List items;
        for (const auto& k : e.kids) items.push_back(eval(*k, scope));
        return Value(std::move(items));
      }
      case Expr::Kind::DictLit: {
        Value d = Value::new_dict();
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          const Value key = eval(*e.kids[i], scope);
          if (!key.is_string())
            throw RuntimeError(fmt::format("a dict key must be a string, not {}", key.type_name()));
          if (key.has_data()) d.as_dict().mark_keys_from_data();
          d.as_dict().set(key.as_string(), eval(*e.kids[i + 1], scope));
        }
        return d;
      }
      case Expr::Kind::Attribute:
        return get_attribute(eval(*e.kids[0], scope), e.name, budget_);
      case Expr::Kind::Index:
        return get_item(eval(*e.kids[0], scope), eval(*e.kids[1], scope), budget_);
      case Expr::Kind::Slice: {
        const Value obj = eval(*e.kids[0], scope);
        const auto part = [&](size_t i) { return e.kids[i] ? eval(*e.kids[i], scope) : Value(); };
        return get_slice(obj, part(1), part(2), part(3));
      }
      case Expr::Kind::Call: {
        const Value f = eval(*e.kids[0], scope);
        return call_function(f, eval_args(e.args, scope), *e.kids[0]);
      }
      case Expr::Kind::Filter: {
        const Value operand = eval(*e.kids[0], scope);
        return apply_filter(e.name, operand, eval_args(e.args, scope), budget_);
      }
      case Expr::Kind::Test: {
        const Value operand = eval(*e.kids[0], scope);
        return Value(apply_test(e.name, operand, eval_args(e.args, scope)) != e.negate);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.kids[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        if (!numeric_like(v))
          throw RuntimeError(fmt::format("cannot apply unary '{}' to {}", e.name, v.type_name()));
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int()).with_data(v.has_data());
        if (v.is_float()) return Value(-v.as_number()).with_data(v.has_data());
        if (v.as_int() == INT64_MIN) throw RuntimeError("integer overflow in unary '-'");
        return Value(-v.as_int()).with_data(v.has_data());
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.kids[0], scope);
        const Value b = eval(*e.kids[1], scope);
        return binary(e.name, a, b, budget_);
      }
      case Expr::Kind::And: {
        Value a = eval(*e.kids[0], scope);
        return a.truthy() ? eval(*e.kids[1], scope) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.kids[0], scope);
        return a.truthy() ? a : eval(*e.kids[1], scope);
      }
      case Expr::Kind::Conditional:
        if (eval(*e.kids[1], scope).truthy()) return eval(*e.kids[0], scope);
        return e.kids.size() > 2 ? eval(*e.kids[2], scope) : Value();
    }
    return Value();
  }

  const Source& source_;
  Budget budget_;
  std::deque<Scope> scopes_;
  int depth_ = 0;
};

// Unknown filters and tests are errors when the template is read, as in Jinja2.
void check_names(const Source& source, const Expr& e) {
  if (e.kind == Expr::Kind::Filter && !is_filter(e.name))
    template_error(source, e.pos, fmt::format("unknown filter '{}'", e.name));
  if (e.kind == Expr::Kind::Test && !is_test(e.name))
    template_error(source, e.pos, fmt::format("unknown test '{}'", e.name));
  for (const auto& k : e.kids)
    if (k) check_names(source, *k);
  for (const auto& a : e.args) check_names(source, *a.value);
}

void check_names(const Source& source, const Body& body) {
  for (const auto& s : body) {
    if (s->kind == Stmt::Kind::FilterBlock && !is_filter(s->expr->name))
      template_error(source, s->expr->pos, fmt::format("unknown filter '{}'", s->expr->name));
    for (const Expr* e : {s->expr.get(), s->condition.get(), s->target.get()})
      if (e != nullptr) check_names(source, *e);
    for (const auto& p : s->params)
      if (p.default_value) check_names(source, *p.default_value);
    check_names(source, s->body);
    check_names(source, s->else_body);
  }
}

int64_t int_param(const Arguments& a, size_t i, const char* what) {
  const Value* v = a.get(i, "");
  if (v == nullptr || !(v->is_int() || v->is_bool()))
    throw RuntimeError(fmt::format("{} must be an integer", what));
  return v->as_int();
}

void add_globals(Scope& g, Budget& budget, std::chrono::system_clock::time_point now) {
  g.set("raise_exception",
        Value(Function{"raise_exception", [](const Arguments& a) -> Value {
                         const Value* m = a.get(0, "message");
                         throw RuntimeError("raise_exception: " + (m ? to_output(*m) : ""));
                       }}));
  g.set("range", Value(Function{"range", [&budget](const Arguments& a) {
                                  const size_t n = a.positional.size();
                                  if (n < 1 || n > 3) throw RuntimeError("range() takes 1 to 3 integers");
                                  int64_t start = 0, stop = 0, step = 1;
                                  if (n == 1) {
                                    stop = int_param(a, 0, "range()'s stop");
                                  } else {
                                    start = int_param(a, 0, "range()'s start");
                                    stop = int_param(a, 1, "range()'s stop");
                                    if (n == 3) step = int_param(a, 2, "range()'s step");
                                  }
                                  if (step == 0) throw RuntimeError("range()'s step cannot be zero");
                                  const double count = std::ceil((static_cast<double>(stop) - start) / step);
                                  if (count > 0) budget.iterate(static_cast<uint64_t>(std::min(count, 1e18)));
                                  List out;
                                  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
                                    out.emplace_back(i);
                                  return Value(std::move(out));
                                }}));
  const auto make_dict = [](bool ns) {
    return [ns](const Arguments& a) {
      Value d = Value::new_dict(ns);
      if (a.positional.size() > 1)
        throw RuntimeError("namespace() and dict() take at most one positional argument");
      if (!a.positional.empty()) {
        const Value& src = a.positional[0];
        if (src.is_dict()) {
          if (src.as_dict().keys_from_data()) d.as_dict().mark_keys_from_data();
          for (const auto& [k, v] : src.as_dict().items()) d.as_dict().set(k, v);
        } else if (src.is_list()) {
          for (const Value& pair : src.as_list()) {
            if (!pair.is_list() || pair.as_list().size() != 2 || !pair.as_list()[0].is_string())
              throw RuntimeError("expected a list of [key, value] pairs with string keys");
            if (pair.as_list()[0].has_data()) d.as_dict().mark_keys_from_data();
            d.as_dict().set(pair.as_list()[0].as_string(), pair.as_list()[1]);
          }
        } else {
          throw RuntimeError(fmt::format("cannot make a dict from a value of type {}", src.type_name()));
        }
      }
      for (const auto& [k, v] : a.keyword) d.as_dict().set(k, v);
      return d;
    };
  };
  g.set("namespace", Value(Function{"namespace", make_dict(true)}));
  g.set("dict", Value(Function{"dict", make_dict(false)}));
  g.set("strftime_now",
        Value(Function{"strftime_now", [now](const Arguments& a) {
                         const Value* f = a.get(0, "format");
                         if (f == nullptr || !f->is_string())
                           throw RuntimeError("strftime_now() needs a format string");
                         return Value(format_time(f->as_string(), now)).with_data(f->has_data());
                       }}));
}

}  // namespace

std::string format_time(std::string_view format, std::chrono::system_clock::time_point t) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  static const char* kDays[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const char d = format[++i];
    switch (d) {
      case 'Y':
        out += std::to_string(tm.tm_year + 1900);
        break;
      case 'y':
        out += fmt::format("{:02}", tm.tm_year % 100);
        break;
      case 'm':
        out += fmt::format("{:02}", tm.tm_mon + 1);
        break;
      case 'd':
        out += fmt::format("{:02}", tm.tm_mday);
        break;
      case 'e':
        out += fmt::format("{:2}", tm.tm_mday);
        break;
      case 'b':
        out += std::string(kMonths[tm.tm_mon]).substr(0, 3);
        break;
      case 'B':
        out += kMonths[tm.tm_mon];
        break;
      case 'a':
        out += std::string(kDays[tm.tm_wday]).substr(0, 3);
        break;
      case 'A':
        out += kDays[tm.tm_wday];
        break;
      case 'H':
        out += fmt::format("{:02}", tm.tm_hour);
        break;
      case 'I':
        out += fmt::format("{:02}", tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12);
        break;
      case 'M':
        out += fmt::format("{:02}", tm.tm_min);
        break;
      case 'S':
        out += fmt::format("{:02}", tm.tm_sec);
        break;
      case 'p':
        out += tm.tm_hour < 12 ? "AM" : "PM";
        break;
      case 'j':
        out += fmt::format("{:03}", tm.tm_yday + 1);
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += d;
    }
  }
  return out;
}

Template::Template(std::string_view source) : source_(std::make_unique<Source>(source)) {
  body_ = parse(*source_, tokenize(*source_));
  check_names(*source_, body_);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

MarkedString Template::render(const std::vector<std::pair<std::string, Value>>& variables,
                              const Limits& limits, std::chrono::system_clock::time_point now) const {
  Interpreter interpreter(*source_, limits);
  Scope& globals = *interpreter.new_scope(nullptr);
  add_globals(globals, interpreter.budget(), now);
  for (const auto& [name, value] : variables) globals.set(name, value);
  try {
    return interpreter.run(body_, globals);
  } catch (const RuntimeError& e) {  // raised outside any statement (cannot happen, but never escape)
    throw Error(ErrorCode::InvalidArgument, std::string("chat template: ") + e.what());
  }
}

}  // namespace tessera::llm::jinja
