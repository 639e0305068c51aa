#include "llm/jinja/builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "llm/jinja/text.h"

namespace tessera::llm::jinja {

void Budget::charge(size_t bytes) {
  if (bytes > limits_.max_output)
    throw RuntimeError(fmt::format("the output exceeds the limit of {} bytes", limits_.max_output));
  work_ += bytes;
  if (work_ > limits_.max_work_bytes)
    throw RuntimeError(fmt::format("the template built more than {} bytes of text", limits_.max_work_bytes));
}

void Budget::iterate(uint64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_iterations)
    throw RuntimeError(fmt::format("more than {} loop iterations", limits_.max_iterations));
}

namespace {

[[noreturn]] void type_error(const std::string& what, const Value& v) {
  throw RuntimeError(fmt::format("{} does not apply to a value of type {}", what, v.type_name()));
}

const std::string& string_arg(const Value* v, const char* what) {
  if (v == nullptr || !v->is_string()) throw RuntimeError(fmt::format("{} must be a string", what));
  return v->as_string();
}

bool bool_arg(const Value* v, bool fallback) {
  return v == nullptr || v->is_undefined() ? fallback : v->truthy();
}

int64_t int_arg(const Value* v, int64_t fallback, const char* what) {
  if (v == nullptr || v->is_undefined() || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) throw RuntimeError(fmt::format("{} must be an integer", what));
  return v->as_int();
}

Value attribute_path(const Value& item, const std::string& path, Budget& budget);

// The byte range of every character of s.
std::vector<ByteRange> character_ranges(std::string_view s) {
  std::vector<ByteRange> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    decode_utf8(s, i, &n);
    out.push_back({i, i + n});
    i += n;
  }
  return out;
}

MarkedString substring(const MarkedString& s, std::string_view part) {
  return s.substr(static_cast<size_t>(part.data() - s.text().data()), part.size());
}

// Case mapping for ASCII, Latin-1, Greek and Cyrillic letters (the scripts chat text mostly uses).
uint32_t map_case(uint32_t c, bool upper) {
  const auto in = [&](uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; };
  if (upper) {
    if (in('a', 'z') || (in(0xE0, 0xFE) && c != 0xF7) || (in(0x3B1, 0x3C9) && c != 0x3C2) || in(0x430, 0x44F))
      return c - 0x20;
    if (in(0x450, 0x45F)) return c - 0x50;
  } else {
    if (in('A', 'Z') || (in(0xC0, 0xDE) && c != 0xD7) || (in(0x391, 0x3A9) && c != 0x3A2) || in(0x410, 0x42F))
      return c + 0x20;
    if (in(0x400, 0x40F)) return c + 0x50;
  }
  return c;
}

std::string change_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(s, i, &n);
    if (cp == kInvalid && n == 1)
      out += s[i];
    else
      append_utf8(out, map_case(cp, upper));
    i += n;
  }
  return out;
}

bool word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// The reference's title(): the first ASCII word character after a non-word one is upper-cased.
std::string title_case(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i)
    if (word_char(out[i]) && (i == 0 || !word_char(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z')
      out[i] = static_cast<char>(out[i] - 'a' + 'A');
  return out;
}

// The reference's capitalize(): the first character upper-cased, the rest as it is.
std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  size_t n = 0;
  decode_utf8(s, 0, &n);
  return change_case(s.substr(0, n), true) + s.substr(n);
}

// The kept bytes keep their origin, the inserted ones take the replacement's.
MarkedString replace_all(const MarkedString& s, const std::string& from, const MarkedString& to,
                         int64_t count, Budget& budget) {
  if (count == 0) return s;
  MarkedString out;
  size_t done = 0;
  int64_t replaced = 0;
  if (from.empty()) {  // Python inserts `to` between characters (and at both ends)
    for (const ByteRange& c : character_ranges(s.text())) {
      if (count < 0 || replaced < count) out.append(to), ++replaced;
      out.append(s, c.begin, c.end - c.begin);
      budget.charge(out.size());
    }
    if (count < 0 || replaced < count) out.append(to);
    return out;
  }
  while (count < 0 || replaced < count) {
    const size_t at = s.text().find(from, done);
    if (at == std::string::npos) break;
    out.append(s, done, at - done);
    out.append(to);
    done = at + from.size();
    ++replaced;
    budget.charge(out.size());
  }
  out.append(s, done, s.size() - done);
  budget.charge(out.size());
  return out;
}

// Python's str.split(sep=None, maxsplit=-1); the pieces keep their bytes' origin.
List split(const MarkedString& marked, const Value* sep, int64_t maxsplit) {
  const std::string& s = marked.text();
  List out;
  if (sep == nullptr || sep->is_none() || sep->is_undefined()) {
    size_t i = space_prefix(s, 0);
    while (i < s.size()) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(marked.substr(i, trim_end(std::string_view(s).substr(i)).size()));
        break;
      }
      size_t j = i;
      while (j < s.size()) {
        size_t n = 0;
        if (is_space(decode_utf8(s, j, &n))) break;
        j += n;
      }
      out.emplace_back(marked.substr(i, j - i));
      i = j + space_prefix(s, j);
    }
    return out;
  }
  const std::string& d = string_arg(sep, "split()'s separator");
  if (d.empty()) throw RuntimeError("split(): empty separator");
  size_t done = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t at = s.find(d, done);
    if (at == std::string::npos) break;
    out.emplace_back(marked.substr(done, at - done));
    done = at + d.size();
  }
  out.emplace_back(marked.substr(done, s.size() - done));
  return out;
}

// Python's strip family: a substring, so every byte keeps its origin.
MarkedString strip(const MarkedString& s, const Value* chars, bool left, bool right, const char* what) {
  if (chars != nullptr && !chars->is_none() && !chars->is_undefined())
    return substring(s, strip_chars(s.text(), string_arg(chars, what), left, right));
  std::string_view v = s.text();
  if (left) v = trim_start(v);
  if (right) v = trim_end(v);
  return substring(s, v);
}

// join's items with a separator between them (each keeping its origin).
MarkedString join(const List& items, const MarkedString& separator, const std::string* attribute,
                  Budget& budget) {
  MarkedString out;
  bool first = true;
  for (const Value& item : items) {
    if (!first) out.append(separator);
    first = false;
    out.append(to_marked_concat(attribute != nullptr ? attribute_path(item, *attribute, budget) : item));
    budget.charge(out.size());
  }
  return out;
}

bool starts_or_ends(const std::string& s, const Value* what, bool start, const char* name) {
  if (what == nullptr) throw RuntimeError(fmt::format("{}() needs an argument", name));
  std::vector<const Value*> options;
  if (what->is_list())
    for (const Value& v : what->as_list()) options.push_back(&v);
  else
    options.push_back(what);
  for (const Value* o : options) {
    const std::string& p = string_arg(o, fmt::format("{}()'s argument", name).c_str());
    if (p.size() > s.size()) continue;
    if (start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0)
      return true;
  }
  return false;
}

Value bound(const std::string& name, std::function<Value(const Arguments&)> f) {
  return Value(Function{name, std::move(f)});
}

Value string_method(const Value& self, const std::string& name, Budget& budget) {
  const std::string& s = self.as_string();
  const auto stripper = [self](bool left, bool right) {
    return [self, left, right](const Arguments& a) -> Value {
      return Value(strip(self.as_marked(), a.get(0, "chars"), left, right, "strip()'s characters"));
    };
  };
  if (name == "strip") return bound(name, stripper(true, true));
  if (name == "lstrip") return bound(name, stripper(true, false));
  if (name == "rstrip") return bound(name, stripper(false, true));
  // Case changes keep each byte's origin while they keep the length (see remapped).
  const auto cased = [self](std::string (*change)(const std::string&)) {
    return [self, change](const Arguments&) {
      return Value(self.as_marked().remapped(change(self.as_string())));
    };
  };
  if (name == "upper") return bound(name, cased([](const std::string& x) { return change_case(x, true); }));
  if (name == "lower") return bound(name, cased([](const std::string& x) { return change_case(x, false); }));
  if (name == "title") return bound(name, cased(title_case));
  if (name == "capitalize") return bound(name, cased(capitalize));
  if (name == "startswith")
    return bound(
        name, [s](const Arguments& a) { return Value(starts_or_ends(s, a.get(0, ""), true, "startswith")); });
  if (name == "endswith")
    return bound(
        name, [s](const Arguments& a) { return Value(starts_or_ends(s, a.get(0, ""), false, "endswith")); });
  if (name == "split")
    return bound(name, [self](const Arguments& a) {
      return Value(split(self.as_marked(), a.get(0, "sep"), int_arg(a.get(1, "maxsplit"), -1, "maxsplit")));
    });
  if (name == "replace")
    return bound(name, [self, &budget](const Arguments& a) {
      string_arg(a.get(1, "new"), "replace()'s new");
      return Value(replace_all(self.as_marked(), string_arg(a.get(0, "old"), "replace()'s old"),
                               a.get(1, "new")->as_marked(), int_arg(a.get(2, "count"), -1, "count"),
                               budget));
    });
  if (name == "find")
    return bound(name, [s](const Arguments& a) {
      const size_t at = s.find(string_arg(a.get(0, "sub"), "find()'s argument"));
      return Value(at == std::string::npos ? int64_t{-1}
                                           : static_cast<int64_t>(count_characters(s.substr(0, at))));
    });
  if (name == "count")
    return bound(name, [s](const Arguments& a) {
      const std::string& sub = string_arg(a.get(0, "sub"), "count()'s argument");
      if (sub.empty()) return Value(static_cast<int64_t>(count_characters(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    });
  if (name == "join")
    return bound(name, [self, &budget](const Arguments& a) {
      const Value* items = a.get(0, "iterable");
      if (items == nullptr) throw RuntimeError("join() needs a list");
      return Value(join(iterate(*items, "join()"), self.as_marked(), nullptr, budget));
    });
  const auto all_chars = [s](bool (*pred)(char)) {
    return [s, pred](const Arguments&) { return Value(!s.empty() && std::all_of(s.begin(), s.end(), pred)); };
  };
  if (name == "isdigit") return bound(name, all_chars([](char c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha")
    return bound(name, all_chars([](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }));
  if (name == "isspace")
    return bound(name, all_chars([](char c) { return c == ' ' || (c >= 9 && c <= 13); }));
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  const Dict& dict = d.as_dict();
  if (name == "items")
    return bound(name, [d](const Arguments&) {
      List out;
      for (const auto& [k, v] : d.as_dict().items()) out.emplace_back(List{d.as_dict().key(k), v});
      return Value(std::move(out));
    });
  if (name == "keys")
    return bound(name, [d](const Arguments&) {
      List out;
      for (const auto& kv : d.as_dict().items()) out.push_back(d.as_dict().key(kv.first));
      return Value(std::move(out));
    });
  if (name == "values")
    return bound(name, [d](const Arguments&) {
      List out;
      for (const auto& kv : d.as_dict().items()) out.push_back(kv.second);
      return Value(std::move(out));
    });
  if (name == "get")
    return bound(name, [d](const Arguments& a) {
      const std::string& key = string_arg(a.get(0, "key"), "get()'s key");
      if (const Value* v = d.as_dict().find(key)) return *v;
      const Value* fallback = a.get(1, "default");
      return fallback != nullptr ? *fallback : Value::none();
    });
  (void)dict;
  return Value();
}

// Sort order of the reference's sort and dictsort: numbers with numbers, strings (case-folded
// unless case_sensitive) with strings, none with none; other mixtures are an error.
int sort_compare(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_string() && b.is_string() && !case_sensitive)
    return compare(Value(change_case(a.as_string(), false)), Value(change_case(b.as_string(), false)));
  return compare(a, b);
}

// item.a.b (dots walk dicts and list indices), as the reference's attribute= arguments do.
Value attribute_path(const Value& item, const std::string& path, Budget& budget) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_dict()) {
      const Value* found = v.as_dict().find(part);
      v = found != nullptr ? *found : Value();
    } else if (v.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      v = get_item(v, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))), budget);
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Arguments after the first `skip` positional ones (the test arguments of select and selectattr).
Arguments rest(const Arguments& a, size_t skip) {
  Arguments out;
  for (size_t i = skip; i < a.positional.size(); ++i) out.positional.push_back(a.positional[i]);
  out.keyword = a.keyword;
  return out;
}

// JavaScript's parseInt / parseFloat prefix rules: leading blanks, a sign, the digits that parse.
bool parse_number_prefix(const std::string& s, bool as_float, Value* out) {
  const std::string t(trim_start(s));
  const char* begin = t.c_str();
  char* end = nullptr;
  if (as_float) {
    const double d = std::strtod(begin, &end);
    if (end == begin) return false;
    *out = Value(d);
  } else {
    const long long v = std::strtoll(begin, &end, 10);
    if (end == begin) return false;
    *out = Value(static_cast<int64_t>(v));
  }
  return true;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::set<std::string>& filter_names() {
  static const std::set<std::string> names{
      "abs",     "attr",   "batch",  "bool",   "capitalize", "count", "d",      "default",    "dictsort",
      "e",       "escape", "first",  "float",  "indent",     "int",   "items",  "join",       "last",
      "length",  "list",   "lower",  "map",    "max",        "min",   "reject", "rejectattr", "replace",
      "reverse", "round",  "safe",   "select", "selectattr", "sort",  "string", "sum",        "title",
      "tojson",  "trim",   "unique", "upper",  "wordcount"};
  return names;
}

const std::set<std::string>& test_names() {
  static const std::set<std::string> names{
      "boolean",  "callable", "defined", "divisibleby", "eq",        "equalto", "even",     "false",
      "float",    "ge",       "gt",      "greaterthan", "in",        "integer", "iterable", "le",
      "lessthan", "lower",    "lt",      "mapping",     "ne",        "none",    "number",   "odd",
      "sameas",   "sequence", "string",  "true",        "undefined", "upper",   "==",       "!=",
      "<",        "<=",       ">",       ">="};
  return names;
}

}  // namespace

bool is_filter(const std::string& name) { return filter_names().count(name) > 0; }
bool is_test(const std::string& name) { return test_names().count(name) > 0; }

List iterate(const Value& v, const char* what) {
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    List keys;
    for (const auto& kv : v.as_dict().items()) keys.push_back(v.as_dict().key(kv.first));
    return keys;
  }
  if (v.is_string()) {
    List chars;
    for (const ByteRange& c : character_ranges(v.as_string()))
      chars.emplace_back(v.as_marked().substr(c.begin, c.end - c.begin));
    return chars;
  }
  throw RuntimeError(
      fmt::format("{} needs a list, dict or string, not a value of type {}", what, v.type_name()));
}

Value get_attribute(const Value& obj, const std::string& name, Budget& budget) {
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
    return obj.is_namespace() ? Value() : dict_method(obj, name);
  }
  if (obj.is_string()) {
    if (name == "length") return Value(static_cast<int64_t>(count_characters(obj.as_string())));
    return string_method(obj, name, budget);
  }
  if (obj.is_list() && name == "length") return Value(static_cast<int64_t>(obj.as_list().size()));
  return Value();
}

Value get_item(const Value& obj, const Value& key, Budget& budget) {
  if (obj.is_dict()) {
    if (!key.is_string())
      throw RuntimeError(fmt::format("a dict key must be a string, not {}", key.type_name()));
    const Value* v = obj.as_dict().find(key.as_string());
    return v != nullptr ? *v : Value();
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const List& items = obj.as_list();
      const int64_t n = static_cast<int64_t>(items.size());
      const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
      return i >= 0 && i < n ? items[static_cast<size_t>(i)] : Value();
    }
    const std::vector<ByteRange> chars = character_ranges(obj.as_string());
    const int64_t n = static_cast<int64_t>(chars.size());
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i < 0 || i >= n) return Value();
    const ByteRange& c = chars[static_cast<size_t>(i)];
    return Value(obj.as_marked().substr(c.begin, c.end - c.begin));
  }
  if (key.is_string()) return get_attribute(obj, key.as_string(), budget);
  if (obj.is_undefined() || obj.is_none()) return Value();
  throw RuntimeError(
      fmt::format("cannot index a value of type {} with a {}", obj.type_name(), key.type_name()));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (!obj.is_list() && !obj.is_string())
    throw RuntimeError(fmt::format("cannot slice a value of type {}", obj.type_name()));
  const auto index = [](const Value& v, const char* what) -> const Value* {
    if (v.is_undefined() || v.is_none()) return nullptr;
    if (!v.is_int() && !v.is_bool()) throw RuntimeError(fmt::format("a slice {} must be an integer", what));
    return &v;
  };
  const Value *b = index(start, "start"), *e = index(stop, "stop"), *s = index(step, "step");
  const int64_t st = s != nullptr ? s->as_int() : 1;
  if (st == 0) throw RuntimeError("a slice step cannot be zero");
  std::vector<ByteRange> chars;
  if (obj.is_string()) chars = character_ranges(obj.as_string());
  const int64_t n =
      obj.is_list() ? static_cast<int64_t>(obj.as_list().size()) : static_cast<int64_t>(chars.size());
  // Python's slice.indices().
  const auto clamp = [&](const Value* v, int64_t fallback) {
    if (v == nullptr) return fallback;
    int64_t i = v->as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t from = clamp(b, st > 0 ? 0 : n - 1), to = clamp(e, st > 0 ? n : -1);
  List items;
  MarkedString text;  // each character keeps its origin
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) {
    if (obj.is_list()) {
      items.push_back(obj.as_list()[static_cast<size_t>(i)]);
    } else {
      const ByteRange& c = chars[static_cast<size_t>(i)];
      text.append(obj.as_marked(), c.begin, c.end - c.begin);
    }
  }
  return obj.is_list() ? Value(std::move(items)) : Value(std::move(text));
}

bool apply_test(const std::string& name, const Value& v, const Arguments& args) {
  const auto other = [&]() -> const Value& {
    const Value* o = args.get(0, "value");
    if (o == nullptr) throw RuntimeError(fmt::format("the test '{}' needs an argument", name));
    return *o;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_mapping();
  if (name == "sequence") return v.is_list() || v.is_string() || v.is_mapping();
  if (name == "callable") return v.is_function();
  if (name == "lower") return v.is_string() && change_case(v.as_string(), false) == v.as_string();
  if (name == "upper") return v.is_string() && change_case(v.as_string(), true) == v.as_string();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) type_error("the test '" + name + "'", v);
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = other();
    if (!v.is_int() || !d.is_int()) type_error("the test 'divisibleby'", v.is_int() ? d : v);
    if (d.as_int() == 0) throw RuntimeError("divisibleby 0");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, other());
  if (name == "ne" || name == "!=") return !equals(v, other());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, other()) < 0;
  if (name == "le" || name == "<=") return compare(v, other()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, other()) > 0;
  if (name == "ge" || name == ">=") return compare(v, other()) >= 0;
  if (name == "sameas") return v.same_object(other());
  if (name == "in") {
    const Value& c = other();
    if (c.is_string()) return v.is_string() && c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_dict()) return v.is_string() && c.as_dict().find(v.as_string()) != nullptr;
    if (c.is_list())
      return std::any_of(c.as_list().begin(), c.as_list().end(),
                         [&](const Value& x) { return equals(x, v); });
    type_error("the test 'in'", c);
  }
  throw RuntimeError(fmt::format("unknown test '{}'", name));
}

namespace {

Value filter_tojson(const Value& v, const Arguments& a) {
  JsonOptions o;
  o.indent = static_cast<int>(int_arg(a.get(0, "indent"), -1, "tojson's indent"));
  o.ensure_ascii = bool_arg(a.keyword_arg("ensure_ascii"), false);
  o.sort_keys = bool_arg(a.keyword_arg("sort_keys"), false);
  if (const Value* sep = a.keyword_arg("separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string())
      throw RuntimeError("tojson's separators must be two strings");
    o.item_separator = sep->as_list()[0].as_string();
    o.key_separator = sep->as_list()[1].as_string();
  }
  return Value(to_marked_json(v, o));
}

Value filter_indent(const Value& v, const Arguments& a, Budget& budget) {
  if (!v.is_string()) type_error("the filter 'indent'", v);
  const Value* width = a.get(0, "width");
  MarkedString pad(std::string(4, ' '));
  if (width != nullptr && width->is_string())
    pad = width->as_marked();
  else if (width != nullptr)
    pad = MarkedString(std::string(
        static_cast<size_t>(std::clamp<int64_t>(int_arg(width, 4, "indent's width"), 0, 1 << 16)), ' '));
  const bool first = bool_arg(a.get(1, "first"), false), blank = bool_arg(a.get(2, "blank"), false);
  MarkedString out;
  size_t line = 0, start = 0;
  const std::string& s = v.as_string();
  while (true) {
    const size_t nl = s.find('\n', start);
    const size_t length = (nl == std::string::npos ? s.size() : nl) - start;
    if ((first || line > 0) && (blank || length > 0)) out.append(pad);
    out.append(v.as_marked(), start, length);
    budget.charge(out.size());
    if (nl == std::string::npos) break;
    out.append(v.as_marked(), nl, 1);
    start = nl + 1;
    ++line;
  }
  return Value(std::move(out));
}

Value filter_select(const std::string& name, const Value& v, const Arguments& a, Budget& budget) {
  const bool attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  std::string path;
  size_t skip = 0;
  if (attr) {
    path = string_arg(a.get(0, "attribute"), fmt::format("{}'s attribute", name).c_str());
    skip = 1;
  }
  const Value* test = skip < a.positional.size() ? &a.positional[skip] : nullptr;
  if (test != nullptr && !test->is_string())
    throw RuntimeError(fmt::format("{}'s test must be a name", name));
  const Arguments test_args = rest(a, skip + 1);
  List out;
  for (const Value& item : iterate(v, name.c_str())) {
    budget.iterate();
    const Value subject = attr ? attribute_path(item, path, budget) : item;
    const bool pass = test != nullptr ? apply_test(test->as_string(), subject, test_args) : subject.truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value filter_map(const Value& v, const Arguments& a, Budget& budget) {
  List out;
  if (const Value* attr = a.keyword_arg("attribute")) {
    const std::string path =
        attr->is_int() ? std::to_string(attr->as_int()) : string_arg(attr, "map's attribute");
    const Value* fallback = a.keyword_arg("default");
    for (const Value& item : iterate(v, "map")) {
      budget.iterate();
      Value x = attribute_path(item, path, budget);
      out.push_back(x.is_undefined() && fallback != nullptr ? *fallback : x);
    }
    return Value(std::move(out));
  }
  const std::string& filter = string_arg(a.get(0, ""), "map's filter name");
  if (!is_filter(filter)) throw RuntimeError(fmt::format("unknown filter '{}'", filter));
  const Arguments filter_args = rest(a, 1);
  for (const Value& item : iterate(v, "map")) {
    budget.iterate();
    out.push_back(apply_filter(filter, item, filter_args, budget));
  }
  return Value(std::move(out));
}

Value filter_sort(const Value& v, const Arguments& a, Budget& budget) {
  const bool reverse = bool_arg(a.get(0, "reverse"), false);
  const bool case_sensitive = bool_arg(a.get(1, "case_sensitive"), false);
  const Value* attr = a.get(2, "attribute");
  List items = iterate(v, "sort");
  budget.iterate(items.size());
  std::string path;
  if (attr != nullptr && !attr->is_none())
    path = attr->is_int() ? std::to_string(attr->as_int()) : string_arg(attr, "sort's attribute");
  const auto key = [&](const Value& x) { return path.empty() ? x : attribute_path(x, path, budget); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = sort_compare(key(x), key(y), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

Value filter_dictsort(const Value& v, const Arguments& a) {
  if (!v.is_dict()) type_error("the filter 'dictsort'", v);
  const bool case_sensitive = bool_arg(a.get(0, "case_sensitive"), false);
  const Value* by = a.get(1, "by");
  const bool by_value = by != nullptr && string_arg(by, "dictsort's by") == "value";
  if (by != nullptr && !by_value && by->as_string() != "key")
    throw RuntimeError("dictsort's by must be 'key' or 'value'");
  const bool reverse = bool_arg(a.get(2, "reverse"), false);
  List items;
  for (const auto& [k, x] : v.as_dict().items()) items.emplace_back(List{v.as_dict().key(k), x});
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = sort_compare(x.as_list()[by_value ? 1 : 0], y.as_list()[by_value ? 1 : 0], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

Value filter_round(const Value& v, const Arguments& a) {
  if (!v.is_number() && !v.is_bool()) type_error("the filter 'round'", v);
  const int64_t precision =
      std::clamp<int64_t>(int_arg(a.get(0, "precision"), 0, "round's precision"), -300, 300);
  const Value* method = a.get(1, "method");
  const std::string how = method != nullptr ? string_arg(method, "round's method") : "common";
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_number() * scale;
  double r;
  if (how == "common")
    r = std::round(x);
  else if (how == "floor")
    r = std::floor(x);
  else if (how == "ceil")
    r = std::ceil(x);
  else
    throw RuntimeError("round's method must be 'common', 'floor' or 'ceil'");
  return Value(r / scale).with_data(v.has_data());
}

Value filter_number(const std::string& name, const Value& v, const Arguments& a) {
  const bool as_float = name == "float";
  const Value* fallback = a.get(0, "default");
  const Value def = fallback != nullptr ? *fallback : (as_float ? Value(0.0) : Value(int64_t{0}));
  if (v.is_string()) {
    Value out;
    return parse_number_prefix(v.as_string(), as_float, &out) ? out.with_data(v.has_data()) : def;
  }
  if (v.is_bool())
    return (as_float ? Value(v.as_bool() ? 1.0 : 0.0) : Value(int64_t{v.as_bool() ? 1 : 0}))
        .with_data(v.has_data());
  if (v.is_int()) return as_float ? Value(static_cast<double>(v.as_int())).with_data(v.has_data()) : v;
  if (v.is_float()) {
    if (as_float) return v;
    const double d = std::trunc(v.as_number());
    return std::isfinite(d) && std::fabs(d) < 9.2e18 ? Value(static_cast<int64_t>(d)).with_data(v.has_data())
                                                     : def;
  }
  return def;
}

Value min_max(const Value& v, const Arguments& a, bool max, Budget& budget) {
  List items = iterate(v, max ? "max" : "min");
  if (items.empty()) return Value();
  const bool case_sensitive = bool_arg(a.get(0, "case_sensitive"), false);
  const Value* attr = a.get(1, "attribute");
  const auto key = [&](const Value& x) {
    return attr == nullptr ? x : attribute_path(x, string_arg(attr, "attribute"), budget);
  };
  Value best = items[0];
  for (const Value& x : items) {
    const int c = sort_compare(key(x), key(best), case_sensitive);
    if (max ? c > 0 : c < 0) best = x;
  }
  return best;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const Arguments& a, Budget& budget) {
  const auto need_string = [&]() -> const std::string& {
    if (!v.is_string()) type_error("the filter '" + name + "'", v);
    return v.as_string();
  };
  if (name == "safe") return v;
  if (name == "tojson") return filter_tojson(v, a);
  if (name == "string") return v.is_string() ? v : Value(to_marked_output(v));
  if (name == "length" || name == "count") {
    if (v.is_list()) return Value(static_cast<int64_t>(v.as_list().size()));
    if (v.is_dict()) return Value(static_cast<int64_t>(v.as_dict().size()));
    if (v.is_string()) return Value(static_cast<int64_t>(count_characters(v.as_string())));
    type_error("the filter '" + name + "'", v);
  }
  if (name == "first" || name == "last") {
    if (v.is_undefined()) return v;
    const List items = iterate(v, name.c_str());
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(v, "list"));
  if (name == "reverse") {
    if (v.is_string()) {
      const std::vector<ByteRange> chars = character_ranges(v.as_string());
      MarkedString out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it)
        out.append(v.as_marked(), it->begin, it->end - it->begin);
      return Value(std::move(out));
    }
    List items = iterate(v, "reverse");
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    if (sep != nullptr) string_arg(sep, "join's separator");
    const Value* attr = a.get(1, "attribute");
    const std::string* path = attr != nullptr ? &string_arg(attr, "attribute") : nullptr;
    return Value(join(iterate(v, "join"), sep != nullptr ? sep->as_marked() : MarkedString(), path, budget));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(v, "unique")) {
      budget.iterate();
      if (std::none_of(out.begin(), out.end(), [&](const Value& x) { return equals(x, item); }))
        out.push_back(item);
    }
    return Value(std::move(out));
  }
  // Case changes keep each byte's origin while they keep the length (see remapped).
  // (need_string() first: it refuses a value that is not a string before as_marked() reads it.)
  if (name == "upper") {
    const std::string& text = need_string();
    return Value(v.as_marked().remapped(change_case(text, true)));
  }
  if (name == "lower") {
    const std::string& text = need_string();
    return Value(v.as_marked().remapped(change_case(text, false)));
  }
  if (name == "title") {
    const std::string& text = need_string();
    return Value(v.as_marked().remapped(title_case(text)));
  }
  if (name == "capitalize") {
    const std::string& text = need_string();
    return Value(v.as_marked().remapped(capitalize(text)));
  }
  if (name == "trim") {
    need_string();
    return Value(strip(v.as_marked(), a.get(0, "chars"), true, true, "trim's characters"));
  }
  if (name == "indent") return filter_indent(v, a, budget);
  if (name == "replace") {
    need_string();
    string_arg(a.get(1, "new"), "replace's new");
    return Value(replace_all(v.as_marked(), string_arg(a.get(0, "old"), "replace's old"),
                             a.get(1, "new")->as_marked(), int_arg(a.get(2, "count"), -1, "count"), budget));
  }
  if (name == "int" || name == "float") return filter_number(name, v, a);
  if (name == "abs") {
    if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int()).with_data(v.has_data());
    if (v.is_float()) return Value(std::fabs(v.as_number())).with_data(v.has_data());
    type_error("the filter 'abs'", v);
  }
  if (name == "bool") return Value(v.truthy());
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict()) type_error("the filter 'items'", v);
    List out;
    for (const auto& [k, x] : v.as_dict().items()) out.emplace_back(List{v.as_dict().key(k), x});
    return Value(std::move(out));
  }
  if (name == "dictsort") return filter_dictsort(v, a);
  if (name == "default" || name == "d") {
    const Value* fallback = a.get(0, "default_value");
    const bool boolean = bool_arg(a.get(1, "boolean"), false);
    if (v.is_undefined() || (boolean && !v.truthy())) return fallback != nullptr ? *fallback : Value("");
    return v;
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return filter_select(name, v, a, budget);
  if (name == "map") return filter_map(v, a, budget);
  if (name == "sort") return filter_sort(v, a, budget);
  if (name == "round") return filter_round(v, a);
  if (name == "batch") {
    const int64_t size = int_arg(a.get(0, "linecount"), 0, "batch's size");
    if (size <= 0) throw RuntimeError("batch's size must be positive");
    const Value* fill = a.get(1, "fill_with");
    List out, row;
    for (const Value& item : iterate(v, "batch")) {
      budget.iterate();
      row.push_back(item);
      if (static_cast<int64_t>(row.size()) == size) out.emplace_back(std::move(row)), row = List{};
    }
    if (!row.empty()) {
      if (fill != nullptr)
        while (static_cast<int64_t>(row.size()) < size) row.push_back(*fill);
      out.emplace_back(std::move(row));
    }
    return Value(std::move(out));
  }
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    Value total = a.get(1, "start") != nullptr ? *a.get(1, "start") : Value(int64_t{0});
    for (const Value& item : iterate(v, "sum")) {
      const Value x = attr != nullptr ? attribute_path(item, string_arg(attr, "attribute"), budget) : item;
      if (!(x.is_number() || x.is_bool()) || !(total.is_number() || total.is_bool()))
        type_error("the filter 'sum'", x);
      total = (x.is_float() || total.is_float() ? Value(total.as_number() + x.as_number())
                                                : Value(total.as_int() + x.as_int()))
                  .with_data(x.has_data() || total.has_data());
    }
    return total;
  }
  if (name == "min" || name == "max") return min_max(v, a, name == "max", budget);
  if (name == "escape" || name == "e") {  // not tracked byte by byte: the conservative rule
    const MarkedString text = to_marked_output(v);
    return Value(MarkedString(html_escape(text.text()), text.has_data()));
  }
  if (name == "wordcount") {
    need_string();
    return Value(static_cast<int64_t>(split(v.as_marked(), nullptr, -1).size()));
  }
  if (name == "attr") return get_attribute(v, string_arg(a.get(0, "name"), "attr's name"), budget);
  throw RuntimeError(fmt::format("unknown filter '{}'", name));
}

}  // namespace tessera::llm::jinja
