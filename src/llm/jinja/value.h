#pragma once
// The values a chat template computes with: undefined, none, booleans, integers, floats, strings,
// lists and insertion-ordered dicts (shared by reference, as in Python, so that `ns.x = ...` and
// `list.append` are seen by every holder), and functions (macros, globals, bound methods).
// Printing and JSON follow Hugging Face's @huggingface/jinja, the reference renderer of chat
// templates: `{{ true }}` prints "true", a float with no fraction "2.0", none and undefined print
// nothing, lists and dicts print as JSON.
//
// Every value also knows whether it came from the data the template was given (see
// marked_string.h): strings byte by byte, numbers and booleans as a whole, dicts for their keys.
// Lists and dicts are not marked themselves: their items are.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm/jinja/marked_string.h"

namespace tessera::llm::jinja {

class Value;
using List = std::vector<Value>;

// A failure inside a filter, test, method or global; the interpreter adds the template position.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Positional and keyword arguments of a call.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The i-th positional argument, else the keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
  const Value* keyword_arg(std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(const Arguments&)> call;
};

class Dict;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::Bool), int_(b ? 1 : 0) {}
  Value(int v) : kind_(Kind::Int), int_(v) {}
  Value(int64_t v) : kind_(Kind::Int), int_(v) {}
  Value(double v) : kind_(Kind::Float), float_(v) {}
  Value(std::string s) : Value(MarkedString(std::move(s))) {}  // the template's own text
  Value(MarkedString s) : kind_(Kind::String), string_(std::make_shared<MarkedString>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List items) : kind_(Kind::List), list_(std::make_shared<List>(std::move(items))) {}
  Value(std::shared_ptr<Dict> dict) : kind_(Kind::Dict), dict_(std::move(dict)) {}
  Value(Function f) : kind_(Kind::Function), function_(std::make_shared<Function>(std::move(f))) {}
  static Value none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
  }
  static Value new_dict(bool is_namespace = false);

  Kind kind() const noexcept { return kind_; }
  bool is_undefined() const noexcept { return kind_ == Kind::Undefined; }
  bool is_none() const noexcept { return kind_ == Kind::None; }
  bool is_bool() const noexcept { return kind_ == Kind::Bool; }
  bool is_int() const noexcept { return kind_ == Kind::Int; }
  bool is_float() const noexcept { return kind_ == Kind::Float; }
  bool is_number() const noexcept { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_string() const noexcept { return kind_ == Kind::String; }
  bool is_list() const noexcept { return kind_ == Kind::List; }
  bool is_dict() const noexcept { return kind_ == Kind::Dict; }
  bool is_namespace() const noexcept;
  bool is_mapping() const noexcept { return is_dict() && !is_namespace(); }
  bool is_function() const noexcept { return kind_ == Kind::Function; }

  bool as_bool() const noexcept { return int_ != 0; }
  int64_t as_int() const noexcept { return int_; }
  double as_number() const noexcept { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const noexcept { return string_->text(); }
  const MarkedString& as_marked() const noexcept { return *string_; }
  List& as_list() const noexcept { return *list_; }
  Dict& as_dict() const noexcept { return *dict_; }
  const Function& as_function() const noexcept { return *function_; }

  // A string with any byte from data, or a number or boolean from data.
  bool has_data() const noexcept { return kind_ == Kind::String ? string_->has_data() : data_; }
  // This value, all of it marked as data when `from_data` (strings: every byte; numbers, booleans).
  Value with_data(bool from_data) const;

  // Python truthiness: empty strings, lists and dicts, 0, none and undefined are false.
  bool truthy() const noexcept;
  // "undefined", "none", "boolean", "integer", "float", "string", "list", "dict", "namespace", "function".
  const char* type_name() const noexcept;
  // The same object (lists, dicts, functions) or equal scalars.
  bool same_object(const Value& other) const noexcept;

 private:
  Kind kind_ = Kind::Undefined;
  bool data_ = false;  // a number or boolean from data
  int64_t int_ = 0;
  double float_ = 0.0;
  std::shared_ptr<MarkedString> string_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> function_;
};

// String keys in insertion order (chat messages are small: lookups scan).
class Dict {
 public:
  explicit Dict(bool is_namespace = false) : is_namespace_(is_namespace) {}
  const Value* find(std::string_view key) const noexcept;
  void set(const std::string& key, Value value);
  bool is_namespace() const noexcept { return is_namespace_; }
  size_t size() const noexcept { return items_.size(); }
  const std::vector<std::pair<std::string, Value>>& items() const noexcept { return items_; }
  // Keys are marked as a whole: once any key came from data, every key reads as data.
  void mark_keys_from_data() noexcept { keys_from_data_ = true; }
  bool keys_from_data() const noexcept { return keys_from_data_; }
  // A key as a string value, marked as the dict's keys are.
  Value key(const std::string& k) const { return Value(MarkedString(k, keys_from_data_)); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  bool is_namespace_;
  bool keys_from_data_ = false;
};

// How deeply lists and dicts may nest where they are walked (JSON in and out, equality): deeper
// is a RuntimeError, not a stack overflow.
inline constexpr int kMaxNesting = 256;

// Python equality: numbers by value (true == 1), strings, lists and dicts element-wise; undefined
// equals none and undefined (as the reference renderer has it).
bool equals(const Value& a, const Value& b);
// <, >, <= and >= on numbers (booleans count as 0/1) and on strings (code point order): -1, 0, 1.
// RuntimeError on other types.
int compare(const Value& a, const Value& b);

// A number as JavaScript prints it (shortest round trip: 0.1, 1e+21, 1.5e-7; NaN; Infinity).
std::string js_number(double v);
// What `{{ v }}` prints: none/undefined -> "", booleans "true"/"false", floats with ".0" when whole,
// lists and dicts as JSON (undefined inside them as "undefined").
std::string to_output(const Value& v);
// What `~` and string `+` join: like to_output, but floats as JavaScript prints them ("2", not "2.0").
std::string to_concat_string(const Value& v);
// to_output and to_concat_string with the origin of every byte: a string's own, a number or
// boolean as it is marked, a list or dict all data when anything inside came from data.
MarkedString to_marked_output(const Value& v);
MarkedString to_marked_concat(const Value& v);

struct JsonOptions {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator;  // empty: ", " (or "," when indenting) and ": "
  bool undefined_as_null = true;
};
// JSON as the reference's tojson writes it (JSON.stringify's strings and numbers, Python's spacing).
// RuntimeError for functions and for nesting deeper than kMaxNesting. `has_data`, when given, is
// set to whether anything written came from data.
std::string to_json(const Value& v, const JsonOptions& options = {}, bool* has_data = nullptr);
// to_json with the conservative rule: all data when anything inside came from data.
MarkedString to_marked_json(const Value& v, const JsonOptions& options = {});

// JSON -> value: objects keep their key order; whole floats become integers (as in JavaScript).
// `from_data` marks every string, number, boolean and key as data. RuntimeError for nesting deeper
// than kMaxNesting.
Value from_json(const nlohmann::ordered_json& j, bool from_data = false);

}  // namespace tessera::llm::jinja
