// Harmony replies (gpt-oss): messages, channels, recipients and content types read from a reply
// as generated (control tokens by their text), and a Harmony vocabulary's ends of generation.
#include "tessera/llm/harmony.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/llm/tool_calls.h"
#include "tessera/llm/vocab.h"

using namespace tessera::llm;

namespace {

// Feeds `reply` as a model generates it: each control token alone, the text between them in
// pieces of at most three bytes.
void feed(HarmonyReader& r, std::string_view reply) {
  while (!reply.empty()) {
    if (reply.front() == '<') {
      const size_t close = reply.find("|>");
      if (close != std::string_view::npos && HarmonyReader::is_structure(reply.substr(0, close + 2))) {
        r.control(reply.substr(0, close + 2));
        reply.remove_prefix(close + 2);
        continue;
      }
    }
    size_t n = std::min<size_t>(3, reply.size());
    if (const size_t next = reply.find('<', 1); next < n) n = next;
    r.text(reply.substr(0, n));
    reply.remove_prefix(n);
  }
}

}  // namespace

TEST(Harmony, AnalysisThenFinal) {
  std::string streamed;
  HarmonyReader r([&](const HarmonyMessage& m, std::string_view text) {
    if (m.channel == "final") streamed += text;
  });
  // What follows the prompt's "<|start|>assistant".
  feed(r,
       "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|>"
       "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.");
  r.control("<|return|>");
  ASSERT_EQ(r.messages().size(), 2u);
  EXPECT_EQ(r.messages()[0].role, "assistant");
  EXPECT_EQ(r.messages()[0].channel, "analysis");
  EXPECT_EQ(r.messages()[0].text, "User asks 2+2. Answer 4.");
  EXPECT_EQ(r.messages()[0].end, "<|end|>");
  EXPECT_EQ(r.messages()[1].role, "assistant");
  EXPECT_EQ(r.messages()[1].channel, "final");
  EXPECT_EQ(r.messages()[1].text, "2 + 2 = 4.");
  EXPECT_EQ(r.messages()[1].end, "<|return|>");
  EXPECT_EQ(streamed, "2 + 2 = 4.");
  EXPECT_EQ(r.channel_text("final"), "2 + 2 = 4.");
  EXPECT_EQ(r.channel_text("analysis"), "User asks 2+2. Answer 4.");
}

// A tool call: the recipient in the role section (or in the channel section), the content type
// after <|constrain|>, ended by <|call|>; it is no channel's plain text.
TEST(Harmony, ToolCalls) {
  HarmonyReader r;
  feed(r,
       "<|channel|>analysis<|message|>Need weather.<|end|>"
       "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
       "{\"city\":\"Paris\"}<|call|>");
  ASSERT_EQ(r.messages().size(), 2u);
  const HarmonyMessage& call = r.messages()[1];
  EXPECT_EQ(call.recipient, "functions.get_weather");
  EXPECT_EQ(call.channel, "commentary");
  EXPECT_EQ(call.content_type, "json");
  EXPECT_EQ(call.text, "{\"city\":\"Paris\"}");
  EXPECT_EQ(call.end, "<|call|>");
  EXPECT_EQ(r.channel_text("commentary"), "");

  HarmonyReader other;  // the recipient after the channel, the type as a word of that section
  feed(other, "<|channel|>commentary to=functions.lookup json<|message|>{}<|call|>");
  ASSERT_EQ(other.messages().size(), 1u);
  EXPECT_EQ(other.messages()[0].recipient, "functions.lookup");
  EXPECT_EQ(other.messages()[0].content_type, "json");
  EXPECT_EQ(other.messages()[0].channel, "commentary");
}

// A reply cut off (token limit) leaves its last message open; text outside any message and
// unknown control tokens belong to no message.
TEST(Harmony, OpenAndMalformedReplies) {
  HarmonyReader r;
  feed(r, "<|channel|>final<|message|>Partial answ");
  ASSERT_EQ(r.messages().size(), 1u);
  EXPECT_EQ(r.messages()[0].text, "Partial answ");
  EXPECT_EQ(r.messages()[0].end, "");

  HarmonyReader m;
  feed(m,
       "<|channel|>final<|message|>A<|end|>stray "
       "text<|start|>assistant<|channel|>final<|message|>B<|return|>");
  ASSERT_EQ(m.messages().size(), 2u);
  EXPECT_EQ(m.channel_text("final"), "AB");
  EXPECT_FALSE(HarmonyReader::is_structure("<|eot_id|>"));
  EXPECT_TRUE(HarmonyReader::is_structure("<|constrain|>"));
}

// With <|return|> and <|call|> in the vocabulary, <|end|> ends a message, not the reply (as
// llama.cpp decides); without them it still ends generation (Phi-3's <|end|>).
TEST(Harmony, EndIsNotTheEndOfGenerationInAHarmonyVocabulary) {
  const std::vector<std::string> base = {"<unk>", "<s>", "</s>", "a", "b", "<|start|>", "<|end|>"};
  auto vocab = [&](std::vector<std::string> extra) {
    std::vector<std::string> tokens = base;
    tokens.insert(tokens.end(), extra.begin(), extra.end());
    std::vector<TokenType> types(tokens.size(), TokenType::Normal);
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i].front() == '<' && tokens[i] != "<unk>") types[i] = TokenType::Control;
    types[0] = TokenType::Unknown;
    SpecialTokens sp;
    sp.unk = 0;
    sp.bos = 1;
    sp.eos = 2;
    return Vocab("llama", tokens, {}, types, sp);
  };
  const Vocab harmony = vocab({"<|return|>", "<|call|>"});
  EXPECT_FALSE(harmony.is_end_of_generation(harmony.find("<|end|>")));
  EXPECT_TRUE(harmony.is_end_of_generation(harmony.find("<|return|>")));
  EXPECT_TRUE(harmony.is_end_of_generation(harmony.find("<|call|>")));
  EXPECT_EQ(harmony.type(harmony.find("<|end|>")), TokenType::Control);  // still no text
  const Vocab phi3 = vocab({});
  EXPECT_TRUE(phi3.is_end_of_generation(phi3.find("<|end|>")));
  const Vocab only_return = vocab({"<|return|>"});
  EXPECT_TRUE(only_return.is_end_of_generation(only_return.find("<|end|>")));
}

namespace {

// A vocabulary with Harmony's control tokens and a few text pieces ("é" split over two byte
// tokens).
Vocab harmony_vocab() {
  std::vector<std::string> tokens = {
      "<unk>",       "<s>",     "</s>",       "<|start|>", "<|channel|>",
      "<|message|>", "<|end|>", "<|return|>", "<|call|>",  "<|constrain|>",
      "analysis",    "final",   "commentary", "assistant", "\u2581to=functions.get",
      "\u2581Hi",    "<0xC3>",  "<0xA9>",     "{\"a\":",   "\u25811}",
      "json"};
  std::vector<TokenType> types(tokens.size(), TokenType::Normal);
  types[0] = TokenType::Unknown;
  for (size_t i = 1; i <= 9; ++i) types[i] = TokenType::Control;
  types[16] = types[17] = TokenType::Byte;
  SpecialTokens sp;
  sp.unk = 0;
  sp.bos = 1;
  sp.eos = 2;
  return Vocab("llama", tokens, {}, types, sp);
}

}  // namespace

// Token by token: control tokens structure the reply, a character split over byte tokens arrives
// whole, only the final channel reaches on_final, and a call's JSON arguments come out compacted.
TEST(Harmony, TokensReadAsTheyAreSampled) {
  const Vocab v = harmony_vocab();
  const auto id = [&](std::string_view t) { return v.find(t); };
  std::string final_text;
  HarmonyTokens r(v, [&](std::string_view t) { final_text += t; });
  for (Token t :
       {id("<|channel|>"), id("analysis"), id("<|message|>"), id("\u2581Hi"), id("<|end|>"), id("<|start|>"),
        id("assistant"), id("<|channel|>"), id("final"), id("<|message|>"), id("\u2581Hi"), id("<0xC3>")}) {
    r.push(t);
    EXPECT_EQ(final_text.find('\xC3'), std::string::npos) << "half a character went out";
  }
  r.push(id("<0xA9>"));
  r.push(id("<|return|>"));
  r.finish();
  EXPECT_EQ(final_text, " Hi\u00e9");
  EXPECT_EQ(r.reader().channel_text("analysis"), " Hi");
  EXPECT_TRUE(r.reader().tool_calls().empty());

  HarmonyTokens call(v, [&](std::string_view t) { ADD_FAILURE() << "a call's text went out: " << t; });
  for (Token t : {id("<|channel|>"), id("commentary"), id("\u2581to=functions.get"), id("<|constrain|>"),
                  id("json"), id("<|message|>"), id("{\"a\":"), id("\u25811}"), id("<|call|>")})
    call.push(t);
  call.finish();
  const std::vector<ToolCall> calls = call.reader().tool_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get");
  EXPECT_EQ(calls[0].arguments, "{\"a\":1}");
}

// Only a message to functions.NAME ended by <|call|> with a JSON object is a call.
TEST(Harmony, OnlyWholeCallsAreCalls) {
  HarmonyReader r;
  feed(r,
       "<|channel|>commentary to=functions.a<|message|>{\"x\": [1, 2]}<|call|>"
       "<|start|>assistant<|channel|>commentary to=functions.b<|message|>not json<|call|>"
       "<|start|>assistant<|channel|>commentary to=browser.open<|message|>{}<|call|>"
       "<|start|>assistant<|channel|>commentary to=functions.<|message|>{}<|call|>"
       "<|start|>assistant<|channel|>commentary to=functions.c<|message|>[1]<|call|>"
       "<|start|>assistant<|channel|>commentary to=functions.d<|message|>{}<|end|>"
       "<|start|>assistant<|channel|>commentary to=functions.e<|message|>{\"y\":");
  const std::vector<ToolCall> calls = r.tool_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "a");
  EXPECT_EQ(calls[0].arguments, "{\"x\":[1,2]}");
}

// A template that writes <|channel|> speaks Harmony only where the vocabulary has it as a control
// token.
TEST(Harmony, TemplatesSpeakHarmonyWithItsVocabulary) {
  const Vocab v = harmony_vocab();
  EXPECT_TRUE(uses_harmony(v, "{{ '<|start|>assistant<|channel|>final<|message|>' }}"));
  EXPECT_FALSE(uses_harmony(v, "{{ '<|im_start|>assistant' }}"));
  const Vocab plain("llama", {"<unk>", "<s>", "</s>", "<|channel|>"}, {},
                    {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal}, {});
  EXPECT_FALSE(uses_harmony(plain, "{{ '<|channel|>' }}"));
  EXPECT_EQ(tool_call_syntax("{{ '<|channel|>' }}"), ToolCallSyntax::Harmony);
  EXPECT_THROW(
      tool_call_gbnf(ToolCallSyntax::Harmony,
                     nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f"}}])")),
      tessera::Error);
}
