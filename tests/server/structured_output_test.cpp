// Structured output: response_format (json_object, json_schema), llama.cpp's grammar and
// json_schema fields on both completion routes; bad grammars and schemas are 400s naming why.
#include <gtest/gtest.h>

#include "server/test_server.h"

namespace tessera {
namespace {

using namespace test_server;

const std::string kChatTemplate = std::string(TESSERA_SOURCE_DIR) + "/tests/server/stories.jinja";

// Ordered: the schema's properties keep their order in the request's text.
const nlohmann::ordered_json kSchema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer", "minimum": 1, "maximum": 99},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 3}}, "required": ["name", "age", "pets"],
    "additionalProperties": false})");

void expect_person(const json& doc) {
  ASSERT_TRUE(doc.is_object()) << doc.dump();
  EXPECT_EQ(doc.size(), 3u) << doc.dump();
  ASSERT_TRUE(doc["name"].is_string()) << doc.dump();
  EXPECT_LE(doc["name"].get<std::string>().size(), 64u);
  ASSERT_TRUE(doc["age"].is_number_integer()) << doc.dump();
  EXPECT_GE(doc["age"].get<int>(), 1);
  EXPECT_LE(doc["age"].get<int>(), 99);
  ASSERT_TRUE(doc["pets"].is_array()) << doc.dump();
  EXPECT_LE(doc["pets"].size(), 3u);
  for (const json& p : doc["pets"]) EXPECT_TRUE(p == "cat" || p == "dog") << doc.dump();
}

TEST(ServerStructuredOutput, JsonSchemaOnCompletionsAndChat) {
  TestServer s([](server::ServerOptions& o) {
    o.chat_template_file = kChatTemplate;
    o.n_ctx = 1024;
  });
  for (int temperature : {0, 1}) {
    nlohmann::ordered_json body = {
        {"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", temperature}, {"seed", 3}};
    body["response_format"] = {{"type", "json_schema"},
                               {"json_schema", {{"name", "person"}, {"schema", kSchema}, {"strict", true}}}};
    auto r = s.client().Post("/v1/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json out = json::parse(r->body);
    EXPECT_EQ(out["choices"][0]["finish_reason"], "stop") << r->body;
    const std::string text = out["choices"][0]["text"];
    const json doc = json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    expect_person(doc);
    // The schema's order: name, age, pets.
    EXPECT_LT(text.find("\"name\""), text.find("\"age\""));
    EXPECT_LT(text.find("\"age\""), text.find("\"pets\""));
  }
  json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me about Lily"}}})},
               {"max_tokens", 400},
               {"temperature", 0},
               {"json_schema", json::parse(kSchema.dump())}};
  auto c = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  expect_person(json::parse(json::parse(c->body)["choices"][0]["message"]["content"].get<std::string>()));
  // json_object and a GBNF grammar, streamed.
  chat.erase("json_schema");
  chat["response_format"] = {{"type", "json_object"}};
  auto o = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(o);
  ASSERT_EQ(o->status, 200) << o->body;
  const std::string object_text = json::parse(o->body)["choices"][0]["message"]["content"];
  if (json::parse(o->body)["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(json::parse(object_text, nullptr, false).is_object()) << object_text;
  } else {
    EXPECT_EQ(object_text.rfind("{", 0), 0u) << object_text;
  }
  json g = greedy("Once upon a time", 50);
  g["grammar"] = "root ::= (\" yes\" | \" no\") \".\"";
  g["stream"] = true;
  auto gr = s.post("/v1/completions", g);
  ASSERT_TRUE(gr);
  ASSERT_EQ(gr->status, 200) << gr->body;
  std::string streamed;
  for (const std::string& e : sse_events(gr->body))
    if (e != "[DONE]") streamed += json::parse(e)["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(streamed == " yes." || streamed == " no.") << streamed;
}

TEST(ServerStructuredOutput, BadGrammarsAndSchemasAre400NamingWhy) {
  TestServer s;
  auto refused = [&](const json& extra, const std::string& code, const std::string& words) {
    json body = greedy("Once upon a time", 5);
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    auto r = s.post("/v1/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], code) << r->body;
    EXPECT_NE(r->body.find(words), std::string::npos) << r->body;
  };
  refused({{"grammar", "root ::= \"a\" ("}}, "invalid_grammar", "'grammar': grammar: unclosed '(' at line 1");
  refused({{"grammar", "root ::= x"}}, "invalid_grammar", "rule 'x' is not defined");
  refused({{"grammar", "root ::= root \"a\""}}, "invalid_grammar", "left-recursive");
  refused({{"json_schema", {{"type", "string"}, {"format", "email"}}}}, "invalid_schema", "format 'email'");
  refused({{"response_format",
            {{"type", "json_schema"},
             {"json_schema", {{"name", "x"}, {"schema", {{"properties", {{"a", {{"multipleOf", 2}}}}}}}}}}}},
          "invalid_schema", "'multipleOf' at '/properties/a'");
  refused({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}}, "invalid_value",
          "at most one");
  refused({{"response_format", {{"type", "yaml"}}}}, "unsupported_parameter", "'yaml'");
  // The server keeps serving.
  auto ok = s.post("/v1/completions", greedy("Once upon a time", 5));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

}  // namespace
}  // namespace tessera
