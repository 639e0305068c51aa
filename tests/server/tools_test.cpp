// Tool calling on /v1/chat/completions with real templates (tests/fixtures/chat_templates):
// tool_choice "required" or a named function makes the reply one valid call, returned as
// tool_calls (the same call streamed as deltas); a conversation with the call and the tool's
// result renders and answers; what cannot be honoured is a 400 naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "server/test_server.h"

namespace tessera {
namespace {

using namespace test_server;

std::string fixture_template(const std::string& name) {
  return std::string(TESSERA_FIXTURES_DIR) + "/chat_templates/" + name + ".jinja";
}

const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
      "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time now",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 8}}, "required": ["zone"]}}}
])");

json ask(const std::string& question, const json& tool_choice, bool stream = false) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", question}}})},
               {"tools", json::parse(kTools.dump())},
               {"tool_choice", tool_choice},
               {"max_tokens", 200},
               {"temperature", 0}};
  if (stream) body["stream"] = true;
  return body;
}

void expect_weather_call(const json& call) {
  ASSERT_TRUE(call.is_object()) << call.dump();
  EXPECT_EQ(call["type"], "function");
  // OpenAI's call_ ids, or the 9 letters and digits Mistral's templates insist on.
  const std::string id = call["id"];
  EXPECT_TRUE(id.rfind("call_", 0) == 0 || (id.size() == 9 && std::all_of(id.begin(), id.end(), ::isalnum)))
      << call.dump();
  EXPECT_EQ(call["function"]["name"], "get_weather") << call.dump();
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_EQ(args.size(), 2u) << call.dump();
  ASSERT_TRUE(args["city"].is_string()) << call.dump();
  EXPECT_LE(args["city"].get<std::string>().size(), 48u);  // 12 characters, up to 4 bytes each
  EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << call.dump();
}

}  // namespace

TEST(ServerTools, RequiredAndNamedCallsAreToolCallsStreamedOrNot) {
  for (const char* name : {"qwen2_5", "llama3_2", "mistral_nemo"}) {
    SCOPED_TRACE(name);
    TestServer s([&](server::ServerOptions& o) {
      o.chat_template_file = fixture_template(name);
      o.n_ctx = 2048;
    });
    auto r =
        s.post("/v1/chat/completions", ask("What is the weather in Paris?",
                                           {{"type", "function"}, {"function", {{"name", "get_weather"}}}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json out = json::parse(r->body);
    const json& choice = out["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r->body;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r->body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r->body;
    const json call = choice["message"]["tool_calls"][0];
    expect_weather_call(call);

    // Streamed: text deltas (none here), then the call as one delta with index 0, then the finish.
    auto st = s.post("/v1/chat/completions",
                     ask("What is the weather in Paris?",
                         {{"type", "function"}, {"function", {{"name", "get_weather"}}}}, true));
    ASSERT_TRUE(st);
    ASSERT_EQ(st->status, 200) << st->body;
    json streamed_call;
    std::string finish, content;
    for (const std::string& e : sse_events(st->body)) {
      if (e == "[DONE]") continue;
      const json c = json::parse(e);
      ASSERT_TRUE(c.contains("choices")) << e;
      if (c["choices"].empty()) continue;
      const json& d = c["choices"][0]["delta"];
      if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
      if (d.contains("tool_calls")) {
        ASSERT_EQ(d["tool_calls"].size(), 1u);
        EXPECT_EQ(d["tool_calls"][0]["index"], 0);
        streamed_call = d["tool_calls"][0];
      }
      if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(content, "");
    expect_weather_call(streamed_call);
    EXPECT_EQ(streamed_call["function"], call["function"]);  // the same greedy call

    // "required" with both tools: a call of one of them, valid for its schema.
    auto any = s.post("/v1/chat/completions", ask("What time is it?", "required"));
    ASSERT_TRUE(any);
    ASSERT_EQ(any->status, 200) << any->body;
    const json any_message = json::parse(any->body)["choices"][0]["message"];
    ASSERT_TRUE(any_message.contains("tool_calls")) << any->body;
    const json a = any_message["tool_calls"][0];
    ASSERT_TRUE(a["function"]["name"] == "get_weather" || a["function"]["name"] == "get_time") << any->body;

    // The tool loop: the assistant's call and the tool's result go back; the model answers in text.
    json follow = ask("What is the weather in Paris?", "auto");
    follow["messages"].push_back(
        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    follow["messages"].push_back({{"role", "tool"},
                                  {"tool_call_id", call["id"]},
                                  {"name", "get_weather"},
                                  {"content", "21 degrees, sunny"}});
    follow["max_tokens"] = 16;
    auto f = s.post("/v1/chat/completions", follow);
    ASSERT_TRUE(f);
    ASSERT_EQ(f->status, 200) << f->body;
    const json fc = json::parse(f->body)["choices"][0];
    EXPECT_TRUE(fc["finish_reason"] == "length" || fc["finish_reason"] == "stop" ||
                fc["finish_reason"] == "tool_calls")
        << f->body;
  }
}

TEST(ServerTools, WhatCannotBeHonouredIs400) {
  TestServer qwen([](server::ServerOptions& o) { o.chat_template_file = fixture_template("qwen2_5"); });
  auto refused = [&](TestServer& s, const json& body, const std::string& code, const std::string& words) {
    auto r = s.post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["code"], code) << r->body;
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r->body;
  };
  refused(qwen, ask("x", {{"type", "function"}, {"function", {{"name", "nope"}}}}), "invalid_value",
          "'nope'");
  refused(qwen, ask("x", "sometimes"), "invalid_value", "'tool_choice' must be");
  json bad = ask("x", "auto");
  bad["tools"][0]["type"] = "code_interpreter";
  refused(qwen, bad, "unsupported_parameter", "type 'function'");
  bad = ask("x", "required");
  bad["tools"][1]["function"]["name"] = "get_weather";
  refused(qwen, bad, "invalid_value", "two tools are named 'get_weather'");
  bad = ask("x", "required");
  bad["tools"][0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 2;
  refused(qwen, bad, "invalid_tools", "multipleOf");
  bad = ask("x", "required");
  bad["response_format"] = {{"type", "json_object"}};
  refused(qwen, bad, "invalid_value", "cannot be combined");
  json no_tools = {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})},
                   {"tool_choice", "required"}};
  refused(qwen, no_tools, "invalid_value", "'tool_choice' needs 'tools'");
  // A template whose tool syntax this server does not read.
  TestServer gemma([](server::ServerOptions& o) { o.chat_template_file = fixture_template("gemma3"); });
  refused(gemma, ask("x", "auto"), "unsupported_tools", "no tool call syntax");
  // /v1/completions takes no tools.
  auto c = qwen.post("/v1/completions", {{"prompt", "x"}, {"tools", json::parse(kTools.dump())}});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 400) << c->body;
}

}  // namespace tessera
