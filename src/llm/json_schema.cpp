// JSON Schema -> GBNF (tessera/llm/json_schema.h).
#include "tessera/llm/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "core/check.h"

namespace tessera::llm {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxCount = 1000;                      // minItems/maxItems/minLength/maxLength
constexpr int64_t kMaxMagnitude = 9999999999999999;  // 16 digits

// The always-present helper rules.
constexpr const char* kCommonRules = R"GBNF(ws ::= (" " | "\n" [ \t]{0,20})?
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ([0-9] | [1-9] [0-9]{1,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)? ws "}"
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
)GBNF";

// A GBNF string literal of raw bytes.
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = uint8_t(c);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_literal(const Json& v) { return literal(v.dump(-1, ' ', false)); }

std::string code_point(uint32_t cp) {
  if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

struct Range {
  uint32_t lo, hi;
};

std::vector<Range> normalized(std::vector<Range> r) {
  std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  std::vector<Range> out;
  for (const Range& x : r) {
    if (!out.empty() && x.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, x.hi);
    else
      out.push_back(x);
  }
  return out;
}

std::vector<Range> complement(const std::vector<Range>& r) {
  std::vector<Range> out;
  uint32_t next = 0;
  for (const Range& x : normalized(r)) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

std::vector<Range> intersect(const std::vector<Range>& a, const std::vector<Range>& b) {
  std::vector<Range> out;
  for (const Range& x : a)
    for (const Range& y : b) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return normalized(out);
}

// The GBNF for one character of a JSON string (as written, escaped where JSON needs it) from a
// set of decoded code points; "" when the set is empty.
std::string json_chars(const std::vector<Range>& set) {
  static const std::vector<Range> plain = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};
  std::vector<std::string> alts;
  const std::vector<Range> p = intersect(set, plain);
  if (!p.empty()) {
    std::string cls = "[";
    for (const Range& r : p)
      cls += r.lo == r.hi ? code_point(r.lo) : code_point(r.lo) + "-" + code_point(r.hi);
    alts.push_back(cls + "]");
  }
  auto in = [&](uint32_t cp) {
    return std::any_of(set.begin(), set.end(), [&](const Range& r) { return r.lo <= cp && cp <= r.hi; });
  };
  if (in('"')) alts.push_back(literal("\\\""));
  if (in('\\')) alts.push_back(literal("\\\\"));
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!in(c)) continue;
    const char* named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : nullptr;
    alts.push_back(literal(named ? std::string(named) : fmt::format("\\u{:04x}", c)));
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::string digits_of(uint64_t v) { return std::to_string(v); }

// GBNF for the decimal digits of every integer in [lo, hi] (equal lengths).
std::string same_length(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return literal(lo);
  const std::string lrest = lo.substr(1), hrest = hi.substr(1);
  auto any_digits = [](size_t k) { return k == 0 ? std::string() : fmt::format(" [0-9]{{{}}}", k); };
  if (lo[0] == hi[0]) return literal(lo.substr(0, 1)) + " " + same_length(lrest, hrest);
  if (lrest == std::string(n - 1, '0') && hrest == std::string(n - 1, '9'))
    return fmt::format("[{}-{}]", lo[0], hi[0]) + any_digits(n - 1);
  std::vector<std::string> alts;
  alts.push_back(literal(lo.substr(0, 1)) + (n > 1 ? " " + same_length(lrest, std::string(n - 1, '9')) : ""));
  if (lo[0] + 1 <= hi[0] - 1)
    alts.push_back(fmt::format("[{}-{}]", char(lo[0] + 1), char(hi[0] - 1)) + any_digits(n - 1));
  alts.push_back(literal(hi.substr(0, 1)) + (n > 1 ? " " + same_length(std::string(n - 1, '0'), hrest) : ""));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Every integer in [a, b], 0 <= a <= b, without leading zeros.
std::string unsigned_range(uint64_t a, uint64_t b) {
  std::vector<std::string> alts;
  const size_t la = digits_of(a).size(), lb = digits_of(b).size();
  for (size_t len = la; len <= lb; ++len) {
    uint64_t p = 1;
    for (size_t i = 1; i < len; ++i) p *= 10;
    const uint64_t lo = len == la ? a : p;
    const uint64_t hi = len == lb ? b : p * 10 - 1;
    alts.push_back(same_length(digits_of(lo), digits_of(hi)));
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Every integer in [lo, hi].
std::string integer_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (hi >= 0)
    alts.push_back(
        unsigned_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi)));
  if (lo < 0)
    alts.push_back("\"-\" " +
                   unsigned_range(static_cast<uint64_t>(hi < 0 ? -hi : 1), static_cast<uint64_t>(-lo)));
  if (alts.size() == 1) return alts[0];
  return "(" + alts[0] + " | " + alts[1] + ")";
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  std::string run() {
    const std::string body = visit(root_, "");
    std::string out = "root ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    return out + kCommonRules;
  }

 private:
  [[noreturn]] static void refuse(const std::string& path, const std::string& keyword,
                                  const std::string& why) {
    raise(ErrorCode::InvalidArgument, "JSON schema: '{}' at '{}': {}", keyword, path.empty() ? "/" : path,
          why);
  }

  // A new rule named after `hint`, unique.
  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = reserve(hint);
    rules_.emplace_back(name, body);
    return name;
  }
  std::string reserve(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(uint8_t(c)) ? c : '-');
    if (base.empty()) base = "r";
    base = "s-" + base.substr(0, 40);
    std::string name = base;
    for (int i = 2; used_.count(name); ++i) name = base + "-" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  static int count(const Json& s, const char* key, const std::string& path) {
    const Json& v = s[key];
    if (!v.is_number_integer() && !v.is_number_unsigned() &&
        !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>())))
      refuse(path, key, "must be a non-negative integer");
    const double d = v.get<double>();
    if (d < 0) refuse(path, key, "must be a non-negative integer");
    if (d > kMaxCount) refuse(path, key, fmt::format("values above {} are not supported", kMaxCount));
    return static_cast<int>(d);
  }

  const Json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') refuse(path, "$ref", "only local references ('#...') are supported");
    try {
      return ref == "#" ? root_ : root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      refuse(path, "$ref", fmt::format("'{}' names nothing in this schema", ref));
    }
  }

  // What a oneOf branch may be, enough to show that two branches never accept one value: the
  // JSON types it allows (integer counted as number; empty: any), the exact values of a const or
  // an enum, and for objects the values each required property is fixed to (a discriminator).
  struct Shape {
    std::set<std::string> types;
    std::optional<std::vector<Json>> values;
    std::map<std::string, std::vector<Json>> fixed;
  };

  static std::string kind_of(const Json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_number()) return "number";
    if (v.is_string()) return "string";
    if (v.is_array()) return "array";
    return "object";
  }

  // A schema's values if it is a const or an enum.
  static std::optional<std::vector<Json>> fixed_values(const Json& s) {
    if (!s.is_object()) return std::nullopt;
    if (s.contains("const")) return std::vector<Json>{s["const"]};
    if (s.contains("enum") && s["enum"].is_array())
      return std::vector<Json>(s["enum"].begin(), s["enum"].end());
    return std::nullopt;
  }

  Shape shape_of(const Json* s, const std::string& path) {
    for (int hops = 0; s->is_object() && s->contains("$ref") && hops < 64; ++hops)
      s = &resolve((*s)["$ref"].is_string() ? (*s)["$ref"].get<std::string>() : "", path);
    Shape shape;
    if (!s->is_object()) return shape;
    shape.values = fixed_values(*s);
    if (s->contains("type")) {
      const Json& t = (*s)["type"];
      for (const Json& x : t.is_array() ? t : Json::array({t}))
        if (x.is_string()) shape.types.insert(x == "integer" ? "number" : x.get<std::string>());
    }
    if (s->contains("properties") && s->contains("required") && (*s)["required"].is_array())
      for (const Json& name : (*s)["required"])
        if (name.is_string() && (*s)["properties"].contains(name.get<std::string>()))
          if (auto v = fixed_values((*s)["properties"][name.get<std::string>()]))
            shape.fixed[name.get<std::string>()] = *v;
    return shape;
  }

  static bool share_a_value(const std::vector<Json>& a, const std::vector<Json>& b) {
    for (const Json& x : a)
      for (const Json& y : b)
        if (x == y) return true;
    return false;
  }

  // True when no value can match both branches (a sufficient test, not a complete one).
  static bool disjoint(const Shape& a, const Shape& b) {
    if (a.values && b.values) return !share_a_value(*a.values, *b.values);
    // (No structured binding: clang 14 cannot capture one in the lambda.)
    for (const auto& pair : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      const Shape* v = pair.first;
      const Shape* other = pair.second;
      if (v->values && !other->types.empty() &&
          std::none_of(v->values->begin(), v->values->end(),
                       [other](const Json& x) { return other->types.count(kind_of(x)) > 0; }))
        return true;
    }
    if (!a.types.empty() && !b.types.empty() &&
        std::none_of(a.types.begin(), a.types.end(),
                     [&](const std::string& t) { return b.types.count(t) > 0; }))
      return true;
    for (const auto& [name, values] : a.fixed)
      if (auto it = b.fixed.find(name); it != b.fixed.end() && !share_a_value(values, it->second))
        return true;
    return false;
  }

  std::string visit(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "json-value";
      refuse(path, "false", "a schema that accepts nothing");
    }
    if (!s.is_object()) refuse(path, "schema", "must be an object or a boolean");
    static const std::set<std::string> annotations = {"title",    "description", "default",  "examples",
                                                      "$schema",  "$id",         "$comment", "deprecated",
                                                      "readOnly", "writeOnly",   "$defs",    "definitions"};
    static const std::set<std::string> known = {"type",
                                                "enum",
                                                "const",
                                                "$ref",
                                                "anyOf",
                                                "oneOf",
                                                "allOf",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "items",
                                                "prefixItems",
                                                "minItems",
                                                "maxItems",
                                                "minLength",
                                                "maxLength",
                                                "pattern",
                                                "format",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "exclusiveMaximum",
                                                "uniqueItems"};
    std::vector<std::string> constraining;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (annotations.count(it.key())) continue;
      if (!known.count(it.key())) refuse(path, it.key(), "this keyword is not supported");
      constraining.push_back(it.key());
    }
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      refuse(path, "uniqueItems", "unique items cannot be enforced");
    auto alone = [&](const char* key) {
      for (const std::string& k : constraining)
        if (k != key && k != "type" && k != "uniqueItems")
          refuse(path, k, fmt::format("cannot be combined with '{}' here", key));
    };
    if (s.contains("$ref")) {
      alone("$ref");
      const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
      if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
      const std::string name =
          reserve(ref.rfind('/') == std::string::npos ? "ref" : ref.substr(ref.rfind('/') + 1));
      refs_[ref] = name;
      const Json& target = resolve(ref, path);
      std::string body = visit(target, ref.substr(1));
      rules_.emplace_back(name, body);
      return name;
    }
    if (s.contains("const")) {
      alone("const");
      return json_literal(s["const"]);
    }
    if (s.contains("enum")) {
      alone("enum");
      if (!s["enum"].is_array() || s["enum"].empty()) refuse(path, "enum", "must be a non-empty array");
      std::string out = "(";
      for (size_t i = 0; i < s["enum"].size(); ++i) out += (i ? " | " : "") + json_literal(s["enum"][i]);
      return out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      alone(key);
      if (!s[key].is_array() || s[key].empty()) refuse(path, key, "must be a non-empty array");
      // oneOf's "exactly one" holds when no two branches can accept one value; that is the only
      // case a grammar of alternatives enforces.
      if (std::string_view(key) == "oneOf")
        for (size_t i = 0; i < s[key].size(); ++i)
          for (size_t j = i + 1; j < s[key].size(); ++j)
            if (!disjoint(shape_of(&s[key][i], path), shape_of(&s[key][j], path)))
              refuse(path, key,
                     fmt::format("branches {} and {} may both match a value, and exactly-one cannot be "
                                 "enforced (use anyOf, or tell them apart by type or by a required "
                                 "property's const/enum)",
                                 i, j));
      std::string out = "(";
      for (size_t i = 0; i < s[key].size(); ++i)
        out += (i ? " | " : "") + visit(s[key][i], fmt::format("{}/{}/{}", path, key, i));
      return out + ")";
    }
    if (s.contains("allOf")) return visit(merge_all_of(s, path), path);

    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) refuse(path, "type", "must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        refuse(path, "type", "must be a string or an array of strings");
      }
    } else {
      auto has = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
      if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
      if (types.empty()) return "json-value";
    }
    std::string out = types.size() > 1 ? "(" : "";
    for (size_t i = 0; i < types.size(); ++i) out += (i ? " | " : "") + visit_type(s, types[i], path);
    return out + (types.size() > 1 ? ")" : "");
  }

  Json merge_all_of(const Json& s, const std::string& path) {
    if (!s["allOf"].is_array() || s["allOf"].empty()) refuse(path, "allOf", "must be a non-empty array");
    Json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      const std::string at = fmt::format("{}/allOf/{}", path, i);
      const Json* part = &s["allOf"][i];
      while (part->is_object() && part->contains("$ref") && part->size() == 1)
        part = &resolve((*part)["$ref"].get<std::string>(), at);
      if (!part->is_object()) refuse(at, "allOf", "only object schemas can be merged");
      for (auto it = part->begin(); it != part->end(); ++it) {
        const std::string& k = it.key();
        if (k == "properties") {
          for (auto p = it->begin(); p != it->end(); ++p) {
            if (merged["properties"].contains(p.key()) && merged["properties"][p.key()] != *p)
              refuse(at, "allOf", fmt::format("property '{}' is defined twice differently", p.key()));
            merged["properties"][p.key()] = *p;
          }
        } else if (k == "required") {
          for (const Json& r : *it)
            if (!merged.contains("required") ||
                std::find(merged["required"].begin(), merged["required"].end(), r) ==
                    merged["required"].end())
              merged["required"].push_back(r);
        } else if (k == "title" || k == "description" || k == "$comment") {
          continue;
        } else if (!merged.contains(k) || merged[k] == *it) {
          merged[k] = *it;
        } else {
          refuse(at, k, "allOf branches disagree on this keyword (only simple merges are supported)");
        }
      }
    }
    if (merged.contains("type") && merged["type"] != "object")
      refuse(path, "allOf", "only object schemas can be merged");
    merged["type"] = "object";
    return merged;
  }

  std::string visit_type(const Json& s, const std::string& type, const std::string& path) {
    if (type == "null") return "json-null";
    if (type == "boolean") return "json-boolean";
    if (type == "string") return string_rule(s, path);
    if (type == "integer" || type == "number") return number_rule(s, type == "integer", path);
    if (type == "object") return object_rule(s, path);
    if (type == "array") return array_rule(s, path);
    refuse(path, "type", fmt::format("unknown type '{}'", type));
  }

  std::string string_rule(const Json& s, const std::string& path) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (lengths || s.contains("pattern"))
        refuse(path, "format", "cannot be combined with lengths or a pattern");
      const Json& f = s["format"];
      const std::string fmt_name = f.is_string() ? f.get<std::string>() : "";
      static const char* kDate =
          R"("\"" [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]))";
      static const char* kTime =
          R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]) "\"")";
      if (fmt_name == "date") return std::string(kDate) + " \"\\\"\"";
      if (fmt_name == "time") return std::string("\"\\\"\" ") + kTime;
      if (fmt_name == "date-time") return std::string(kDate) + " \"T\" " + kTime;
      if (fmt_name == "uuid")
        return R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")";
      refuse(path, "format",
             fmt::format("format '{}' is not supported (date, time, date-time, uuid are)", fmt_name));
    }
    if (s.contains("pattern")) {
      if (lengths) refuse(path, "pattern", "cannot be combined with minLength/maxLength");
      if (!s["pattern"].is_string()) refuse(path, "pattern", "must be a string");
      return "\"\\\"\" " + pattern_rule(s["pattern"].get<std::string>(), path + "/pattern") + " \"\\\"\"";
    }
    if (!lengths) return "json-string";
    const int min = s.contains("minLength") ? count(s, "minLength", path) : 0;
    const int max = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
    if (max >= 0 && max < min) refuse(path, "maxLength", "is below minLength");
    return fmt::format("\"\\\"\" json-char{{{},{}}} \"\\\"\"", min, max < 0 ? "" : std::to_string(max));
  }

  // Bounds as integers: the smallest and largest integer allowed.
  void bounds(const Json& s, const std::string& path, int64_t& lo, int64_t& hi) {
    lo = -kMaxMagnitude;
    hi = kMaxMagnitude;
    auto number = [&](const char* key) {
      if (!s[key].is_number()) refuse(path, key, "must be a number");
      const double v = s[key].get<double>();
      if (!std::isfinite(v)) refuse(path, key, "must be finite");
      return std::clamp(v, -1e17, 1e17);
    };
    auto to_int = [](double v) {
      return static_cast<int64_t>(std::clamp<double>(v, -kMaxMagnitude - 1.0, kMaxMagnitude + 1.0));
    };
    if (s.contains("minimum")) lo = std::max(lo, to_int(std::ceil(number("minimum"))));
    if (s.contains("exclusiveMinimum")) lo = std::max(lo, to_int(std::floor(number("exclusiveMinimum")) + 1));
    if (s.contains("maximum")) hi = std::min(hi, to_int(std::floor(number("maximum"))));
    if (s.contains("exclusiveMaximum")) hi = std::min(hi, to_int(std::ceil(number("exclusiveMaximum")) - 1));
    if (lo > hi)
      refuse(path, "minimum", "no value lies within the bounds (integers are needed for numbers too)");
  }

  std::string number_rule(const Json& s, bool integer, const std::string& path) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) return integer ? "json-int" : "json-number";
    int64_t lo, hi;
    bounds(s, path, lo, hi);
    std::string out = integer_range(lo, hi);
    if (integer) return out;
    // Fractions: i.f lies in [i, i + 1) and -i.f in (-(i + 1), -i].
    std::vector<std::string> alts{out};
    const std::string frac = " \".\" [0-9]{1,16}";
    if (hi - 1 >= std::max<int64_t>(lo, 0))
      alts.push_back(
          unsigned_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi - 1)) +
          frac);
    if (lo < 0 && -lo - 1 >= std::max<int64_t>(0, -hi))
      alts.push_back(
          "\"-\" " +
          unsigned_range(static_cast<uint64_t>(std::max<int64_t>(0, -hi)), static_cast<uint64_t>(-lo - 1)) +
          frac);
    std::string r = "(";
    for (size_t i = 0; i < alts.size(); ++i) r += (i ? " | " : "") + alts[i];
    return add_rule(path.empty() ? "number" : path, r + ")");
  }

  std::string object_rule(const Json& s, const std::string& path) {
    std::vector<std::pair<std::string, std::string>> props;  // (key literal, value rule)
    std::vector<bool> required;
    std::set<std::string> names;
    std::set<std::string> req;
    if (s.contains("required")) {
      if (!s["required"].is_array()) refuse(path, "required", "must be an array of strings");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) refuse(path, "required", "must be an array of strings");
        req.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) refuse(path, "properties", "must be an object");
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        const std::string sub = path + "/properties/" + it.key();
        std::string value = visit(*it, sub);
        props.emplace_back(literal(Json(it.key()).dump(-1, ' ', false)), value);
        required.push_back(req.count(it.key()) > 0);
        names.insert(it.key());
      }
    }
    for (const std::string& r : req)
      if (!names.count(r)) refuse(path, "required", fmt::format("'{}' is not among the properties", r));
    // Extra members: a schema, or none.
    std::string extra;
    const bool has_additional = s.contains("additionalProperties");
    if (has_additional ? !(s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>())
                       : props.empty()) {
      const std::string value =
          has_additional ? visit(s["additionalProperties"], path + "/additionalProperties") : "json-value";
      extra = add_rule(path + "-extra", not_names(names) + " ws \":\" ws " + value);
    }
    const std::string base = path.empty() ? "root" : path;
    const size_t n = props.size();
    // rest[i]: members i.. after at least one was written; first[i]: before any was.
    std::vector<std::string> rest(n + 1), first(n + 1);
    rest[n] = extra.empty() ? "" : add_rule(base + "-more", "(ws \",\" ws " + extra + ")*");
    first[n] = extra.empty() ? "" : "(" + extra + " " + rest[n] + ")?";
    for (size_t i = n; i-- > 0;) {
      const std::string member = props[i].first + " ws \":\" ws " + props[i].second;
      const std::string after = rest[i + 1];
      std::string r = "ws \",\" ws " + member + (after.empty() ? "" : " " + after);
      std::string f = member + (after.empty() ? "" : " " + after);
      if (!required[i]) {
        r = "(" + r + ")" + (rest[i + 1].empty() ? "?" : " | " + rest[i + 1]);
        f = "(" + f + ")" + (first[i + 1].empty() ? "?" : " | " + first[i + 1]);
      }
      rest[i] = add_rule(base + "-r" + std::to_string(i), r);
      first[i] = add_rule(base + "-f" + std::to_string(i), f);
    }
    return "\"{\" ws " + (first[0].empty() ? "" : first[0] + " ") + "ws \"}\"";
  }

  // A JSON string key, without escapes, that is none of `names`.
  std::string not_names(const std::set<std::string>& names) {
    const std::string plain = R"([^"\\\x00-\x1F])";
    if (names.empty()) return "\"\\\"\" " + plain + "* \"\\\"\"";
    // A trie of the names: at each node, end here (unless a name ends here), take a byte no name
    // continues with (then anything), or follow a name's next byte.
    struct Node {
      std::map<uint32_t, int> next;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& name : names) {
      int at = 0;
      for (size_t i = 0; i < name.size();) {
        // Decode one UTF-8 code point (the schema came from valid JSON).
        const auto c = uint8_t(name[i]);
        const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
        for (int k = 1; k < len && i + k < name.size(); ++k) cp = (cp << 6) | (uint8_t(name[i + k]) & 0x3F);
        i += len;
        auto it = trie[at].next.find(cp);
        if (it == trie[at].next.end()) {
          trie.emplace_back();
          it = trie[at].next.emplace(cp, static_cast<int>(trie.size() - 1)).first;
        }
        at = it->second;
      }
      trie[at].end = true;
    }
    const std::string tail = reserve("key-tail");
    rules_.emplace_back(tail, plain + "*");
    std::vector<std::string> node_rule(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) node_rule[i] = reserve("key-" + std::to_string(i));
    for (size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> alts;
      if (!trie[i].end) alts.push_back("\"\\\"\"");
      std::vector<Range> taken;
      for (const auto& [cp, child] : trie[i].next) {
        taken.push_back({cp, cp});
        // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on the chain of +.
        std::string alt = "[";
        alt += code_point(cp);
        alt += "] ";
        alt += node_rule[static_cast<size_t>(child)];
        alts.push_back(std::move(alt));
      }
      // Any other plain character, then anything.
      std::string cls = R"([^"\\\x00-\x1F)";
      for (const Range& r : taken) cls += code_point(r.lo);
      alts.push_back(cls + "] " + tail + " \"\\\"\"");
      std::string body;
      for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
      rules_.emplace_back(node_rule[i], body);
    }
    return "\"\\\"\" " + node_rule[0];
  }

  std::string array_rule(const Json& s, const std::string& path) {
    const int min = s.contains("minItems") ? count(s, "minItems", path) : 0;
    const int max = s.contains("maxItems") ? count(s, "maxItems", path) : -1;
    if (max >= 0 && max < min) refuse(path, "maxItems", "is below minItems");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) refuse(path, "prefixItems", "must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(visit(s["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i)));
    }
    std::string item = "json-value";
    bool more = true;
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_boolean() && !it.get<bool>()) {
        more = false;
      } else if (it.is_array()) {
        refuse(path, "items", "an array of schemas (draft 4 tuples) is not supported: use prefixItems");
      } else {
        item = visit(it, path + "/items");
      }
    }
    // Every prefix item is written (up to maxItems), then the rest.
    const size_t k = max >= 0 ? std::min<size_t>(prefix.size(), static_cast<size_t>(max)) : prefix.size();
    std::string out = "\"[\" ws";
    for (size_t i = 0; i < k; ++i) out += (i ? " ws \",\" ws " : " ") + prefix[i];
    const int rest_min = std::max<int>(0, min - static_cast<int>(k));
    const int rest_max = !more ? 0 : max < 0 ? -1 : max - static_cast<int>(k);
    if (!more && rest_min > 0) refuse(path, "minItems", "needs more items than prefixItems allows");
    if (rest_max != 0) {
      const std::string item_rule = add_rule(path.empty() ? "item" : path + "-item", item);
      const std::string bound = rest_max < 0 ? "" : std::to_string(rest_max - 1);
      if (k > 0) {
        // Each further item after a comma.
        out += fmt::format(" (ws \",\" ws {}){{{},{}}}", item_rule, rest_min,
                           rest_max < 0 ? "" : std::to_string(rest_max));
      } else if (rest_min > 0) {
        out += fmt::format(" {} (ws \",\" ws {}){{{},{}}}", item_rule, item_rule, rest_min - 1, bound);
      } else {
        out += fmt::format(" ({} (ws \",\" ws {}){{0,{}}})?", item_rule, item_rule, bound);
      }
    }
    return out + " ws \"]\"";
  }

  // --- pattern: a regular subset of ECMAScript regexes, matched against the decoded string.

  std::string pattern_rule(const std::string& re, const std::string& path) {
    pat_ = re;
    pat_pos_ = 0;
    pat_path_ = path;
    const bool start = !pat_.empty() && pat_[0] == '^';
    if (start) ++pat_pos_;
    std::string body = pattern_alternatives(0);
    bool end = false;
    if (pat_pos_ < pat_.size() && pat_[pat_pos_] == '$') {
      end = true;
      ++pat_pos_;
    }
    if (pat_pos_ != pat_.size()) pattern_fail("unexpected character");
    const std::string any = json_chars({{0, 0x10FFFF}});
    return (start ? "" : "(" + any + ")* ") + "(" + body + ")" + (end ? "" : " (" + any + ")*");
  }

  [[noreturn]] void pattern_fail(const std::string& why) {
    raise(ErrorCode::InvalidArgument,
          "JSON schema: 'pattern' at '{}': {} at offset {} of /{}/ (only a regular subset is supported)",
          pat_path_, why, pat_pos_, pat_);
  }

  char pat_peek() const { return pat_pos_ < pat_.size() ? pat_[pat_pos_] : '\0'; }

  std::string pattern_alternatives(int depth) {
    if (depth > 32) pattern_fail("groups nest too deep");
    std::vector<std::string> alts{pattern_sequence(depth)};
    while (pat_peek() == '|') {
      ++pat_pos_;
      alts.push_back(pattern_sequence(depth));
    }
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + (alts[i].empty() ? "\"\"" : alts[i]);
    return out;
  }

  std::string pattern_sequence(int depth) {
    std::string out;
    for (;;) {
      const char c = pat_peek();
      if (c == '\0' || c == '|' || c == ')') break;
      if (c == '$' && pat_pos_ + 1 == pat_.size() && depth == 0) break;
      std::string atom = pattern_atom(depth);
      atom = pattern_quantifier(atom);
      out += (out.empty() ? "" : " ") + atom;
    }
    return out;
  }

  std::string pattern_quantifier(const std::string& atom) {
    const char c = pat_peek();
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pat_pos_;
    } else if (c == '{') {
      const size_t close = pat_.find('}', pat_pos_);
      if (close == std::string::npos) pattern_fail("an unclosed '{'");
      const std::string inner = pat_.substr(pat_pos_ + 1, close - pat_pos_ - 1);
      const size_t comma = inner.find(',');
      auto number = [&](const std::string& t) {
        if (t.empty() || t.size() > 4 ||
            !std::all_of(t.begin(), t.end(), [](char d) { return d >= '0' && d <= '9'; }))
          pattern_fail("a bad repetition count");
        const int v = std::stoi(t);
        if (v > kMaxCount) pattern_fail("a repetition count above 1000");
        return v;
      };
      const int m = number(comma == std::string::npos ? inner : inner.substr(0, comma));
      if (comma == std::string::npos) {
        q = fmt::format("{{{}}}", m);
      } else if (comma + 1 == inner.size()) {
        q = fmt::format("{{{},}}", m);
      } else {
        const int n = number(inner.substr(comma + 1));
        if (n < m) pattern_fail("a repetition whose maximum is below its minimum");
        q = fmt::format("{{{},{}}}", m, n);
      }
      pat_pos_ = close + 1;
    } else {
      return atom;
    }
    if (pat_peek() == '?') ++pat_pos_;  // lazy: the same strings
    if (pat_peek() == '*' || pat_peek() == '+' || pat_peek() == '?' || pat_peek() == '{')
      pattern_fail("a repetition of a repetition");
    return "(" + atom + ")" + q;
  }

  std::string pattern_atom(int depth) {
    const char c = pat_peek();
    if (c == '(') {
      ++pat_pos_;
      if (pat_peek() == '?') {
        if (pat_.compare(pat_pos_, 2, "?:") != 0)
          pattern_fail("lookarounds and named groups are not regular here");
        pat_pos_ += 2;
      }
      std::string inner = pattern_alternatives(depth + 1);
      if (pat_peek() != ')') pattern_fail("an unclosed '('");
      ++pat_pos_;
      return "(" + (inner.empty() ? "\"\"" : inner) + ")";
    }
    if (c == '[') return json_chars(pattern_class());
    if (c == '.') {
      ++pat_pos_;
      return json_chars(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '^' || c == '$') pattern_fail("anchors are only supported at the ends");
    if (c == '*' || c == '+' || c == '?' || c == '{') pattern_fail("a repetition of nothing");
    std::vector<Range> set;
    if (c == '\\') {
      set = pattern_escape(false);
    } else {
      const uint32_t cp = pattern_utf8();
      set = {{cp, cp}};
    }
    const std::string out = json_chars(set);
    if (out.empty()) pattern_fail("a character that matches nothing");
    return out;
  }

  uint32_t pattern_utf8() {
    const auto c = uint8_t(pat_[pat_pos_]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (int k = 1; k < len && pat_pos_ + k < pat_.size(); ++k)
      cp = (cp << 6) | (uint8_t(pat_[pat_pos_ + k]) & 0x3F);
    pat_pos_ += len;
    return cp;
  }

  // After a backslash: a class escape or one character.
  std::vector<Range> pattern_escape(bool in_class) {
    ++pat_pos_;
    if (pat_pos_ >= pat_.size()) pattern_fail("an escape at the end");
    const char e = pat_[pat_pos_++];
    static const std::vector<Range> digit = {{'0', '9'}};
    static const std::vector<Range> word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const std::vector<Range> space = {
        {'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
        {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
    switch (e) {
      case 'd':
        return digit;
      case 'D':
        return complement(digit);
      case 'w':
        return word;
      case 'W':
        return complement(word);
      case 's':
        return space;
      case 'S':
        return complement(space);
      case 't':
        return {{'\t', '\t'}};
      case 'n':
        return {{'\n', '\n'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case 'x':
      case 'u': {
        const size_t n = e == 'x' ? 2 : 4;
        if (pat_pos_ + n > pat_.size()) pattern_fail("a short hex escape");
        uint32_t v = 0;
        for (size_t i = 0; i < n; ++i) {
          const char h = pat_[pat_pos_++];
          const int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (d < 0) pattern_fail("a bad hex escape");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        return {{v, v}};
      }
      default:
        break;
    }
    if (std::isalnum(uint8_t(e)) && !(in_class && e == 'b'))
      pattern_fail(fmt::format("the escape '\\{}' is not supported", e));
    if (in_class && e == 'b') return {{'\b', '\b'}};
    return {{uint8_t(e), uint8_t(e)}};
  }

  std::vector<Range> pattern_class() {
    ++pat_pos_;
    bool negated = false;
    if (pat_peek() == '^') {
      negated = true;
      ++pat_pos_;
    }
    std::vector<Range> set;
    bool first = true;
    for (;;) {
      if (pat_pos_ >= pat_.size()) pattern_fail("an unclosed '['");
      if (pat_peek() == ']' && !first) break;
      first = false;
      std::vector<Range> lo_set = pat_peek() == '\\' ? pattern_escape(true) : std::vector<Range>{};
      uint32_t lo = 0;
      if (lo_set.empty()) {
        lo = pattern_utf8();
      } else if (lo_set.size() != 1 || lo_set[0].lo != lo_set[0].hi) {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
        continue;
      } else {
        lo = lo_set[0].lo;
      }
      if (pat_peek() == '-' && pat_pos_ + 1 < pat_.size() && pat_[pat_pos_ + 1] != ']') {
        ++pat_pos_;
        uint32_t hi;
        if (pat_peek() == '\\') {
          const auto r = pattern_escape(true);
          if (r.size() != 1 || r[0].lo != r[0].hi) pattern_fail("a range ending in a class");
          hi = r[0].lo;
        } else {
          hi = pattern_utf8();
        }
        if (hi < lo) pattern_fail("a range that runs backwards");
        set.push_back({lo, hi});
      } else {
        set.push_back({lo, lo});
      }
    }
    ++pat_pos_;
    set = normalized(set);
    return negated ? complement(set) : set;
  }

  const Json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> used_{"root", "ws"};
  std::map<std::string, std::string> refs_;
  std::string pat_, pat_path_;
  size_t pat_pos_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

std::string json_schema_to_gbnf(std::string_view schema_text) {
  Json schema = Json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) raise(ErrorCode::InvalidArgument, "JSON schema: not valid JSON");
  return json_schema_to_gbnf(schema);
}

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + kCommonRules; }

}  // namespace tessera::llm
