#include "llm/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "llm/jinja/text.h"

namespace tessera::llm::jinja {

const Value* Arguments::get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  return keyword_arg(name);
}

const Value* Arguments::keyword_arg(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value Value::new_dict(bool is_namespace) { return Value(std::make_shared<Dict>(is_namespace)); }

Value Value::with_data(bool from_data) const {
  if (!from_data) return *this;
  Value v = *this;
  if (kind_ == Kind::String) {
    MarkedString s = *string_;
    s.mark_all_data();
    v.string_ = std::make_shared<MarkedString>(std::move(s));
  } else if (kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float) {
    v.data_ = true;
  }
  return v;
}

bool Value::is_namespace() const noexcept { return kind_ == Kind::Dict && dict_->is_namespace(); }

bool Value::truthy() const noexcept {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return int_ != 0;
    case Kind::Float:
      return float_ != 0.0 && !std::isnan(float_);
    case Kind::String:
      return !string_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return dict_->is_namespace() || dict_->size() > 0;
    case Kind::Function:
      return true;
  }
  return false;
}

const char* Value::type_name() const noexcept {
  switch (kind_) {
    case Kind::Undefined:
      return "undefined";
    case Kind::None:
      return "none";
    case Kind::Bool:
      return "boolean";
    case Kind::Int:
      return "integer";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "string";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return dict_->is_namespace() ? "namespace" : "dict";
    case Kind::Function:
      return "function";
  }
  return "?";
}

bool Value::same_object(const Value& other) const noexcept {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::List:
      return list_ == other.list_;
    case Kind::Dict:
      return dict_ == other.dict_;
    case Kind::Function:
      return function_ == other.function_;
    default:
      return equals(*this, other);
  }
}

const Value* Dict::find(std::string_view key) const noexcept {
  for (const auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items_.emplace_back(key, std::move(value));
}

namespace {

bool numeric_like(const Value& v) { return v.is_number() || v.is_bool(); }

}  // namespace

namespace {

bool equals_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) throw RuntimeError(fmt::format("values nested deeper than {}", kMaxNesting));
  if (numeric_like(a) && numeric_like(b)) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  const bool a_nothing = a.is_undefined() || a.is_none(), b_nothing = b.is_undefined() || b.is_none();
  if (a_nothing || b_nothing) return a_nothing && b_nothing;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals_at(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* w = y.find(k);
        if (w == nullptr || !equals_at(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.same_object(b);
  }
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

int compare(const Value& a, const Value& b) {
  if (numeric_like(a) && numeric_like(b)) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_number(), y = b.as_number();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  throw RuntimeError(fmt::format("cannot compare {} with {}", a.type_name(), b.type_name()));
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  if (v == 0) return "0";  // JavaScript prints -0 as "0" too
  // Shortest round-trip digits d1.d2d3...e±X, then JavaScript's Number::toString layout.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  std::string sign;
  if (s[0] == '-') sign = "-", s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp10 = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // the value is 0.digits * 10^n
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return sign + out;
}

namespace {

std::string float_output(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e21) return js_number(v) + ".0";
  return js_number(v);
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const uint32_t cp = decode_utf8(s, i, &n);
    const char c = s[i];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else if (ensure_ascii && cp >= 0x7F) {
          if (cp >= 0x10000) {  // a surrogate pair, as UTF-16 has it
            const uint32_t u = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          out.append(s.substr(i, n));
        }
    }
    i += n;
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int depth, bool& has_data) {
  if (depth > kMaxNesting) throw RuntimeError(fmt::format("values nested deeper than {}", kMaxNesting));
  has_data = has_data || v.has_data();
  switch (v.kind()) {
    case Value::Kind::Undefined:
      out += o.undefined_as_null ? "null" : "undefined";
      return;
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::Float:
      out += std::isfinite(v.as_number()) ? js_number(v.as_number()) : "null";
      return;
    case Value::Kind::String:
      json_string(out, v.as_string(), o.ensure_ascii);
      return;
    case Value::Kind::Function:
      throw RuntimeError("cannot convert a function to JSON");
    case Value::Kind::List:
    case Value::Kind::Dict:
      break;
  }
  const bool indenting = o.indent > 0;
  const std::string item_sep = !o.item_separator.empty() ? o.item_separator : (indenting ? "," : ", ");
  const std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
  const std::string pad = indenting ? "\n" + std::string(static_cast<size_t>(o.indent) * depth, ' ') : "";
  const std::string child_pad = indenting ? pad + std::string(o.indent, ' ') : "";
  if (v.is_list()) {
    const List& items = v.as_list();
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      out += child_pad;
      json_value(out, items[i], o, depth + 1, has_data);
    }
    if (!items.empty()) out += pad;
    out += ']';
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.as_dict().items()) entries.push_back(&e);
  has_data = has_data || (v.as_dict().keys_from_data() && !entries.empty());
  if (o.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += item_sep;
    out += child_pad;
    json_string(out, entries[i]->first, o.ensure_ascii);
    out += key_sep;
    json_value(out, entries[i]->second, o, depth + 1, has_data);
  }
  if (!entries.empty()) out += pad;
  out += '}';
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, bool* has_data) {
  std::string out;
  bool data = false;
  json_value(out, v, options, 0, data);
  if (has_data != nullptr) *has_data = data;
  return out;
}

MarkedString to_marked_json(const Value& v, const JsonOptions& options) {
  bool data = false;
  std::string text = to_json(v, options, &data);
  return MarkedString(std::move(text), data);
}

std::string to_output(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return "";
    case Value::Kind::Bool:
      return v.as_bool() ? "true" : "false";
    case Value::Kind::Int:
      return std::to_string(v.as_int());
    case Value::Kind::Float:
      return float_output(v.as_number());
    case Value::Kind::String:
      return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict: {
      JsonOptions o;
      o.undefined_as_null = false;
      return to_json(v, o);
    }
    case Value::Kind::Function:
      return "<function " + v.as_function().name + ">";
  }
  return "";
}

std::string to_concat_string(const Value& v) {
  if (v.is_float()) return js_number(v.as_number());
  return to_output(v);
}

MarkedString to_marked_output(const Value& v) {
  if (v.is_string()) return v.as_marked();
  if (v.is_list() || v.is_dict()) {
    JsonOptions o;
    o.undefined_as_null = false;
    return to_marked_json(v, o);
  }
  return MarkedString(to_output(v), v.has_data());
}

MarkedString to_marked_concat(const Value& v) {
  if (v.is_float()) return MarkedString(js_number(v.as_number()), v.has_data());
  return to_marked_output(v);
}

namespace {

Value scalar_from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.007199254740992e15)
        return Value(static_cast<int64_t>(d));
      return Value(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    default:
      return Value();  // binary and discarded values do not occur in parsed JSON text
  }
}

Value from_json_at(const nlohmann::ordered_json& j, bool from_data, int depth) {
  if (depth > kMaxNesting) throw RuntimeError(fmt::format("JSON nested deeper than {}", kMaxNesting));
  if (j.is_array()) {
    List items;
    items.reserve(j.size());
    for (const auto& e : j) items.push_back(from_json_at(e, from_data, depth + 1));
    return Value(std::move(items));
  }
  if (j.is_object()) {
    Value d = Value::new_dict();
    if (from_data) d.as_dict().mark_keys_from_data();
    for (const auto& [k, e] : j.items()) d.as_dict().set(k, from_json_at(e, from_data, depth + 1));
    return d;
  }
  return scalar_from_json(j).with_data(from_data);
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j, bool from_data) { return from_json_at(j, from_data, 0); }

}  // namespace tessera::llm::jinja
