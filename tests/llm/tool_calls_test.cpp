// Tool calls: the syntax each real template teaches (tests/fixtures/chat_templates), replies split
// into text and calls, the one-call grammar (hand-written calls accepted or refused), and the
// stream that holds back what may become a call (its pieces joined equal the whole reply's split).
#include "tessera/llm/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tessera/error.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/grammar_state.h"

using namespace tessera;
using namespace tessera::llm;
using Json = nlohmann::ordered_json;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(TESSERA_FIXTURES_DIR) + "/chat_templates/" + name + ".jinja");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                     "unit": {"enum": ["c", "f"]}},
                   "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}},
  {"type": "function", "function": {"name": "route", "parameters": {"type": "object",
    "properties": {"stops": {"type": "array", "items": {"$ref": "#/$defs/place"}, "maxItems": 3}},
    "required": ["stops"], "$defs": {"place": {"type": "string", "maxLength": 8}}}}}
])");

bool accepts(const std::string& gbnf, const std::string& text) {
  GrammarState s(Grammar::parse(gbnf));
  return s.accept(text) && s.complete();
}

}  // namespace

TEST(ToolCalls, EachTemplatesSyntax) {
  EXPECT_EQ(tool_call_syntax(fixture("qwen2_5")), ToolCallSyntax::Hermes);
  EXPECT_EQ(tool_call_syntax(fixture("qwen3")), ToolCallSyntax::Hermes);
  EXPECT_EQ(tool_call_syntax(fixture("llama3_2")), ToolCallSyntax::Llama3);
  EXPECT_EQ(tool_call_syntax(fixture("mistral_nemo")), ToolCallSyntax::Mistral);
  EXPECT_EQ(tool_call_syntax(fixture("gemma3")), ToolCallSyntax::None);
  EXPECT_EQ(tool_call_syntax(fixture("deepseek_v3")), ToolCallSyntax::None);
}

TEST(ToolCalls, RepliesSplitIntoTextAndCalls) {
  ToolReply r = parse_tool_calls(ToolCallSyntax::Hermes,
                                 "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
                                 "\"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.calls[1].name, "now");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "Let me look.");
  // Not a call: bad JSON, no name, arguments not an object, an unclosed tag.
  for (const char* text : {"<tool_call>\n{\"name\": \"x\", \"arguments\": {}\n</tool_call>",
                           "<tool_call>{\"arguments\": {}}</tool_call>",
                           "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>",
                           "<tool_call>{\"name\": \"x\", \"arguments\": {}}"}) {
    r = parse_tool_calls(ToolCallSyntax::Hermes, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  r = parse_tool_calls(ToolCallSyntax::Llama3, " {\"name\": \"now\", \"parameters\": {\"tz\": \"UTC\"}} ");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.content, "");
  // Arguments given as a JSON string of an object are read too.
  r = parse_tool_calls(ToolCallSyntax::Mistral,
                       "[{\"name\": \"now\", \"arguments\": \"{\\\"a\\\": 1}\"}, {\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Rome\"}}]");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(r.calls[1].name, "get_weather");
  EXPECT_TRUE(parse_tool_calls(ToolCallSyntax::Mistral, "[1, 2]").calls.empty());
  EXPECT_EQ(parse_tool_calls(ToolCallSyntax::None, "<tool_call>{}</tool_call>").content,
            "<tool_call>{}</tool_call>");
}

TEST(ToolCalls, TheGrammarAllowsExactlyOneValidCall) {
  const std::string hermes = tool_call_gbnf(ToolCallSyntax::Hermes, kTools);
  EXPECT_TRUE(accepts(hermes,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                      "\"unit\": \"c\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(accepts(hermes,
                      "<tool_call>\n{\"name\": \"route\", \"arguments\": {\"stops\": [\"a\", \"b\"]}}\n"
                      "</tool_call>"));
  for (const char* bad :
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>",  // no
                                                                                                     // city
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"O\", \"unit\": "
        "\"k\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": 1}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"route\", \"arguments\": {\"stops\": [\"far too long\"]}}\n</tool_call>",
        "{\"name\": \"now\", \"arguments\": {}}",
        "Sure! <tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"})
    EXPECT_FALSE(accepts(hermes, bad)) << bad;
  // A named function: only it.
  const std::string named = tool_call_gbnf(ToolCallSyntax::Hermes, kTools, "now");
  EXPECT_TRUE(accepts(named, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(
      named, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n</tool_call>"));
  // Llama 3 writes "parameters"; Mistral an array after its control token.
  const std::string llama = tool_call_gbnf(ToolCallSyntax::Llama3, kTools);
  EXPECT_TRUE(accepts(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"));
  EXPECT_FALSE(accepts(llama, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"));
  EXPECT_TRUE(
      accepts(tool_call_gbnf(ToolCallSyntax::Mistral, kTools), "[{\"name\": \"now\", \"arguments\": {}}]"));
  // What cannot be enforced or named is an Error.
  EXPECT_THROW(tool_call_gbnf(ToolCallSyntax::None, kTools), Error);
  EXPECT_THROW(tool_call_gbnf(ToolCallSyntax::Hermes, kTools, "missing"), Error);
  EXPECT_THROW(
      tool_call_gbnf(ToolCallSyntax::Hermes, Json::parse(R"([{"type": "function", "function": {"name": "a",
      "parameters": {"type": "number", "multipleOf": 2}}}])")),
      Error);
  EXPECT_THROW(tool_call_gbnf(ToolCallSyntax::Hermes, Json::parse(R"([{"type": "code_interpreter"}])")),
               Error);
  EXPECT_THROW(
      tool_call_gbnf(ToolCallSyntax::Hermes, Json::parse(R"([{"type": "function", "function": {"name": "a"}},
      {"type": "function", "function": {"name": "a"}}])")),
      Error);
}

TEST(ToolCalls, TheStreamHoldsBackWhatMayBecomeACall) {
  const std::string reply =
      "I will check.<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call> Done.";
  ToolReply whole = parse_tool_calls(ToolCallSyntax::Hermes, reply);
  // Every split into two pieces and into single bytes: the same content and calls.
  std::vector<std::vector<std::string>> splits;
  for (size_t cut = 0; cut <= reply.size(); ++cut)
    splits.push_back({reply.substr(0, cut), reply.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : reply) bytes.emplace_back(1, c);
  splits.push_back(bytes);
  for (const auto& pieces : splits) {
    ToolCallStream s(ToolCallSyntax::Hermes);
    ToolReply end;
    std::string streamed;
    for (const auto& p : pieces) {
      const std::string out = s.push(p);
      EXPECT_EQ(out.find('<'), std::string::npos) << "a tag went out as text";
      streamed += out;
    }
    end = s.finish();
    EXPECT_EQ(streamed, "I will check.");
    ASSERT_EQ(end.calls.size(), 1u);
    EXPECT_EQ(end.calls[0].name, "now");
    EXPECT_EQ(streamed + end.content, "I will check. Done.");
    EXPECT_EQ(whole.content, "I will check. Done.");
  }
  // Plain text streams as it comes; a '<' that never becomes a tag comes out at the end.
  ToolCallStream plain(ToolCallSyntax::Hermes);
  EXPECT_EQ(plain.push("Hello "), "Hello ");
  EXPECT_EQ(plain.push("<tool"), "");
  EXPECT_EQ(plain.push("s> and more"), "<tools> and more");
  EXPECT_EQ(plain.push(" <tool_"), " ");
  ToolReply end = plain.finish();
  EXPECT_TRUE(end.calls.empty());
  EXPECT_EQ(end.content, "<tool_");
  // Llama 3: a reply that starts with '{' is held whole; one that does not streams.
  ToolCallStream llama(ToolCallSyntax::Llama3);
  EXPECT_EQ(llama.push(" {\"name\": \"now\", "), "");
  EXPECT_EQ(llama.push("\"parameters\": {}}"), "");
  end = llama.finish();
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "");
  ToolCallStream text(ToolCallSyntax::Llama3);
  EXPECT_EQ(text.push("It is {sunny}"), "It is {sunny}");
  EXPECT_TRUE(text.finish().calls.empty());
}
