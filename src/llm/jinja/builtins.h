#pragma once
// The template library: filters, tests, the methods of strings and dicts, subscripts and slices,
// and the resource budget every render is held to. Semantics follow the reference renderer
// (@huggingface/jinja) where it defines them, else Python's Jinja2: see interpreter.h.
#include <cstdint>
#include <string>

#include "llm/jinja/value.h"

namespace tessera::llm::jinja {

// Bounds on one render, so that a hostile template fails with an Error instead of hanging or
// exhausting memory.
struct Limits {
  size_t max_output = size_t{8} << 20;            // bytes of rendered text
  uint64_t max_iterations = 100'000;              // loop iterations (and range() items), all loops together
  int max_call_depth = 100;                       // nested macro calls
  uint64_t max_work_bytes = uint64_t{256} << 20;  // bytes of strings built, all together
};

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const noexcept { return limits_; }
  // RuntimeError when a string of `bytes` would exceed the output limit or the work budget.
  void charge(size_t bytes);
  // RuntimeError past max_iterations.
  void iterate(uint64_t n = 1);

 private:
  Limits limits_;
  uint64_t work_ = 0;
  uint64_t iterations_ = 0;
};

bool is_filter(const std::string& name);
bool is_test(const std::string& name);

// obj.name: a dict's key (else its method), a namespace's attribute, a string's method or a
// list's or string's `length`; undefined when there is none (also on none and undefined).
Value get_attribute(const Value& obj, const std::string& name, Budget& budget);
// obj[key]: dict keys, list and string indices (negative from the end); undefined out of range.
Value get_item(const Value& obj, const Value& key, Budget& budget);
// obj[start:stop:step] on lists and strings (characters), Python's rules; missing parts undefined.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value apply_filter(const std::string& name, const Value& operand, const Arguments& args, Budget& budget);
bool apply_test(const std::string& name, const Value& operand, const Arguments& args);

// The list a `for` loop or a filter iterates: a list's items, a dict's keys, a string's characters.
// RuntimeError on other types.
List iterate(const Value& v, const char* what);

}  // namespace tessera::llm::jinja
