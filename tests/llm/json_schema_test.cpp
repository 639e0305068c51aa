// JSON Schema -> GBNF: random walks of each schema's grammar always parse as JSON and pass an
// independent validator (written here); known-invalid documents are rejected; what cannot be
// enforced is refused naming the keyword and path. Also constrained generation on stories260K.
#include "tessera/llm/json_schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

#include "support/byte_vocab.h"
#include "tessera/error.h"
#include "tessera/llm/engine.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/grammar_matcher.h"
#include "tessera/llm/model.h"

namespace tessera::llm {
namespace {

using Json = nlohmann::ordered_json;

// --- a small validator for the keywords the converter supports

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

bool is_integer(const Json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
}

bool valid(const Json& v, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return valid(v, ref == "#" ? root : root.at(Json::json_pointer(ref.substr(1))), root);
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
  if (s.contains("anyOf") &&
      std::none_of(s["anyOf"].begin(), s["anyOf"].end(), [&](const Json& b) { return valid(v, b, root); }))
    return false;
  if (s.contains("oneOf") && std::count_if(s["oneOf"].begin(), s["oneOf"].end(),
                                           [&](const Json& b) { return valid(v, b, root); }) != 1)
    return false;
  if (s.contains("allOf") &&
      !std::all_of(s["allOf"].begin(), s["allOf"].end(), [&](const Json& b) { return valid(v, b, root); }))
    return false;
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const Json& t : s["type"]) types.push_back(t);
    auto is = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "number") return v.is_number();
      if (t == "integer") return v.is_number() && is_integer(v);
      if (t == "boolean") return v.is_boolean();
      if (t == "null") return v.is_null();
      return false;
    };
    if (std::none_of(types.begin(), types.end(), is)) return false;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (!valid(*it, s["properties"][it.key()], root)) return false;
      } else if (s.contains("additionalProperties") && !valid(*it, s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    size_t first = 0;
    if (s.contains("prefixItems")) {
      for (size_t i = 0; i < s["prefixItems"].size() && i < v.size(); ++i)
        if (!valid(v[i], s["prefixItems"][i], root)) return false;
      first = s["prefixItems"].size();
    }
    if (s.contains("items"))
      for (size_t i = first; i < v.size(); ++i)
        if (!valid(v[i], s["items"], root)) return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  if (v.is_string()) {
    const std::string str = v;
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
      return false;
    if (s.contains("format")) {
      const std::string f = s["format"];
      const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
      const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
      const std::string re = f == "date"        ? date
                             : f == "time"      ? time
                             : f == "date-time" ? date + "T" + time
                                                : "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}";
      if (!std::regex_match(str, std::regex(re))) return false;
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) return false;
  }
  return true;
}

// --- random walks of a grammar over a one-token-per-byte vocabulary

std::string walk(GrammarMatcher& m, std::mt19937& rng, size_t budget) {
  std::string text;
  const Token eog = m.trie().end_of_generation().at(0);
  for (size_t step = 0; step < 20 * budget; ++step) {
    const TokenMask& mask = m.mask();
    if (mask.end_of_generation && (mask.allowed.empty() || text.size() > budget || rng() % 4 == 0)) {
      m.accept(eog);
      return text;
    }
    std::vector<double> weights;
    for (Token t : mask.allowed) {
      const auto b = static_cast<uint8_t>(t);
      double w = t >= 256 ? 0.0 : b >= 0x80 ? 0.02 : 1.0;
      if (text.size() > budget && (b == '"' || b == ']' || b == '}')) w = 200.0;
      if (text.size() > budget && (b == ' ' || b == '\n' || b == '\t')) w = 0.01;
      weights.push_back(w);
    }
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    const Token t = mask.allowed.at(pick(rng));
    text += m.trie().piece(t);
    m.accept(t);
  }
  return {};  // did not finish
}

const std::shared_ptr<const VocabTrie>& byte_trie() {
  static const Vocab vocab = testing_support::byte_vocab({{"<|endoftext|>", TokenType::Control}});
  static const auto trie = std::make_shared<const VocabTrie>(vocab);
  return trie;
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

struct SchemaCase {
  const char* name;
  const char* schema;
  std::vector<std::string> invalid;  // documents the grammar must reject
  std::vector<std::string> valid;    // documents it must accept
};

const std::vector<SchemaCase>& cases() {
  static const std::vector<SchemaCase> c = {
      {"person",
       R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
           "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}},
           "required": ["name", "age"], "additionalProperties": false})",
       {R"({"name": "x"})", R"({"name": "x", "age": 151})", R"({"name": "x", "age": -1})",
        R"({"name": "x", "age": 1, "tags": ["a","b","c","d"]})",
        R"({"name": "x", "age": 1, "email": "A@b.com"})", R"({"name": "x", "age": 1, "extra": 1})",
        R"({"name": "abcdefghijklm", "age": 1})"},
       {R"({"name": "x", "age": 150})", R"({ "name" : "é\n", "age" : 0, "email": "ab@cd.org", "tags": [] })",
        R"({"name": "x", "age": 7, "tags": ["a", "bc"]})"}},
      {"types",
       R"({"type": "object", "properties": {"n": {"type": ["number", "null"]}, "b": {"type": "boolean"}, "e": {"enum": ["red", 1, null, {"k": [1]}]},
           "c": {"const": "fixed"}, "x": {"type": "number", "exclusiveMinimum": -2.5, "maximum": 10}}, "required": ["n", "b", "e", "c", "x"]})",
       {R"({"n": "1", "b": true, "e": "red", "c": "fixed", "x": 1})",
        R"({"n": 1, "b": true, "e": "blue", "c": "fixed", "x": 1})",
        R"({"n": 1, "b": true, "e": 1, "c": "fixed", "x": 10.5})",
        R"({"n": 1, "b": true, "e": 1, "c": "fixed", "x": -2.5})",
        R"({"n": 1, "b": true, "e": 1, "c": "other", "x": 0})"},
       {R"({"n": null, "b": false, "e": {"k":[1]}, "c": "fixed", "x": -1.75})",
        R"({"n": -1.5e3, "b": true, "e": 1, "c": "fixed", "x": 10})"}},
      {"refs",
       R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
           "required": ["value"]}}, "$ref": "#/$defs/node"})",
       {R"({"children": []})", R"({"value": 1, "children": [{"value": "x"}]})"},
       {R"({"value": 1, "children": [{"value": 2, "children": []}, {"value": 3}]})"}},
      {"arrays",
       R"({"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "string", "format": "uuid"}], "items": {"type": "integer", "minimum": 10, "maximum": 99}, "minItems": 3, "maxItems": 5})",
       {R"(["2024-01-01", "123e4567-e89b-12d3-a456-426614174000"])",
        R"(["2024-13-01", "123e4567-e89b-12d3-a456-426614174000", 10])",
        R"(["2024-01-01", "123e4567-e89b-12d3-a456-426614174000", 9])",
        R"(["2024-01-01", "123e4567-e89b-12d3-a456-426614174000", 10, 11, 12, 13])"},
       {R"(["2024-02-29", "123e4567-e89b-12d3-a456-426614174000", 10, 99])"}},
      {"combinations",
       R"({"anyOf": [{"type": "string", "format": "date-time"}, {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
           {"properties": {"b": {"type": "string", "format": "time"}}}]}, {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "null"}}]}]})",
       {R"({"b": "10:00:00Z"})", R"("2024-01-01 10:00:00Z")", R"([1])"},
       {R"("2024-01-01T10:00:00.5+01:00")", R"({"a": 1, "b": "23:59:59Z"})", R"([null, null])", R"(true)"}},
      {"additional",
       R"({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 3}})",
       {R"({"id": 1, "x": ""})", R"({"id": 1, "id": "abc"})", R"({"x": 1})"},
       {R"({"id": 1, "x": "abc", "idx": "a"})", R"({"i": "z"})", R"({})"}},
      {"anything", R"({})", {R"(nul)", R"({"a": })"}, {R"({"a": [1, {"b": null}], "c": "d"})", R"(-0.5)"}},
      {"object", R"({"type": "object"})", {R"([])", R"("x")"}, {R"({"a": [1, {"b": null}]})"}},
      {"oneOf told apart by type, value and a discriminator",
       R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
                     {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind", "side"]},
                     {"enum": [1, 2]}, {"type": "string"}]})",
       {R"({"kind": "circle", "side": 1})", R"({"kind": "tri", "r": 1})", R"(3)", R"({"r": 1})"},
       {R"({"kind": "circle", "r": 1.5})", R"({"kind": "square", "side": 2})", R"(2)", R"("x")"}},
      {"pattern",
       R"({"type": "string", "pattern": "^ab+(c|d)?\\d{2}"})",
       {R"("abx12")", R"("a12")", R"("xab12")"},
       {R"("abbb12yy")", R"("abd00")"}},
  };
  return c;
}

TEST(JsonSchemaTest, RandomWalksValidate) {
  std::mt19937 rng(1234);
  for (const SchemaCase& c : cases()) {
    SCOPED_TRACE(c.name);
    const Json schema = Json::parse(c.schema);
    const std::string gbnf = json_schema_to_gbnf(schema);
    std::shared_ptr<const Grammar> g;
    ASSERT_NO_THROW(g = Grammar::parse(gbnf)) << gbnf;
    int finished = 0;
    for (int i = 0; i < 60; ++i) {
      GrammarMatcher m(g, byte_trie());
      const std::string text = walk(m, rng, 120);
      if (text.empty()) continue;
      ++finished;
      const Json doc = Json::parse(text, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << text << "\n" << gbnf;
      EXPECT_TRUE(valid(doc, schema, schema)) << text << "\n" << gbnf;
    }
    EXPECT_GE(finished, 50);
    for (const std::string& bad : c.invalid) {
      const Json doc = Json::parse(bad, nullptr, false);
      if (!doc.is_discarded()) {
        EXPECT_FALSE(valid(doc, schema, schema)) << "the test's own data: " << bad;
      }
      EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
    }
    for (const std::string& good : c.valid) {
      EXPECT_TRUE(valid(Json::parse(good), schema, schema)) << good;
      EXPECT_TRUE(grammar_accepts(g, good)) << good << "\n" << gbnf;
    }
  }
}

TEST(JsonSchemaTest, UnanchoredPatternsMatchAnywhere) {
  const auto g =
      Grammar::parse(json_schema_to_gbnf(std::string_view(R"({"type": "string", "pattern": "b[0-9]"})")));
  EXPECT_TRUE(grammar_accepts(g, R"("b1")"));
  EXPECT_TRUE(grammar_accepts(g, R"("xx\"b7\n")"));
  EXPECT_FALSE(grammar_accepts(g, R"("xx")"));
  EXPECT_FALSE(grammar_accepts(g, R"("b")"));
}

TEST(JsonSchemaTest, JsonObjectGrammar) {
  const auto g = Grammar::parse(json_object_gbnf());
  EXPECT_TRUE(grammar_accepts(g, R"({"a": [1, 2.5, "x", true, null, {}]})"));
  EXPECT_FALSE(grammar_accepts(g, "[1]"));
  EXPECT_FALSE(grammar_accepts(g, "{\"a\": 1}   \n\n"));
  // Whitespace is bounded: no endless run of spaces.
  EXPECT_FALSE(grammar_accepts(g, "{" + std::string(30, ' ') + "}"));
  EXPECT_FALSE(grammar_accepts(g, "{\n" + std::string(30, ' ') + "}"));
}

std::string refusal(const std::string& schema) {
  try {
    json_schema_to_gbnf(std::string_view(schema));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(JsonSchemaTest, WhatCannotBeEnforcedIsRefusedNamingKeywordAndPath) {
  EXPECT_NE(refusal(R"({"properties": {"a": {"type": "number", "multipleOf": 3}}})")
                .find("'multipleOf' at '/properties/a'"),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"type": "object", "patternProperties": {"x": {}}})").find("'patternProperties' at '/'"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"type": "array", "uniqueItems": true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "format": "email"})").find("format 'email'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "pattern": "(a)\\1"})").find("'pattern' at '/pattern'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "pattern": "(?=a)b"})").find("lookaround"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "pattern": "a$b"})").find("anchors"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "string", "maxLength": 5000})").find("'maxLength'"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "https://example.com/s.json"})").find("'$ref'"), std::string::npos);
  EXPECT_NE(refusal(R"({"$ref": "#/$defs/missing"})").find("names nothing"), std::string::npos);
  EXPECT_NE(refusal(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("'type' at '/allOf/1'"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("no value"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type": "objekt"})").find("unknown type 'objekt'"), std::string::npos);
  EXPECT_NE(refusal(R"({"not": {}})").find("'not'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type": "object", "required": ["a"]})").find("'a' is not among the properties"),
            std::string::npos);
  EXPECT_NE(refusal(R"(false)").find("accepts nothing"), std::string::npos);
  // oneOf whose branches may share a value: exactly-one is not a grammar of alternatives.
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})")
                .find("'oneOf' at '/': branches 0 and 1 may both match"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})").find("branches 0 and 1"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                                  {"type": "object", "properties": {"b": {"type": "string"}}}]})")
                .find("branches 0 and 1"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"oneOf": [{"enum": ["a", "b"]}, {"const": "b"}]})").find("branches 0 and 1"),
            std::string::npos);
  EXPECT_NE(refusal("{").find("not valid JSON"), std::string::npos);
}

// --- stories260K: constrained generation always gives valid JSON

std::string stories_path() { return std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf"; }

TEST(JsonSchemaTest, Stories260KGeneratesValidJson) {
  if (!std::filesystem::exists(stories_path())) GTEST_SKIP() << "no " << stories_path();
  auto model = Model::load(stories_path());
  const Vocab vocab = Vocab::from_gguf(*model->file());
  EngineOptions eo;
  eo.n_slots = 2;
  eo.n_ctx = 2048;
  eo.n_threads = 2;
  Engine engine(*model, vocab, eo);
  const char* schemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 1, "maximum": 99},
          "happy": {"type": "boolean"}, "friends": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}},
          "required": ["name", "age", "happy"]})",
      R"({"type": "array", "items": {"enum": ["cat", "dog", "bird"]}, "minItems": 1, "maxItems": 4})",
      R"({"type": "object", "properties": {"when": {"type": "string", "format": "date"}, "score": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["when", "score"]})",
  };
  int runs = 0;
  for (const char* text : schemas) {
    const Json schema = Json::parse(text);
    const auto grammar = Grammar::parse(json_schema_to_gbnf(schema));
    for (int sampled = 0; sampled < 2; ++sampled) {
      GenerationParams p;
      p.grammar = grammar;
      p.max_tokens = 600;
      p.sampling.temperature = sampled ? 0.9f : 0.0f;
      p.sampling.seed = 42;
      auto job = engine.submit(vocab.encode("Once upon a time", true), p);
      ASSERT_NE(job, nullptr);
      const GenerationUpdate u = job->wait();
      EXPECT_EQ(u.finish, FinishReason::Stop) << u.text << " " << u.error;
      const Json doc = Json::parse(u.text, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << u.text;
      EXPECT_TRUE(valid(doc, schema, schema)) << u.text;
      ++runs;
    }
  }
  EXPECT_EQ(runs, 6);
}

}  // namespace
}  // namespace tessera::llm
