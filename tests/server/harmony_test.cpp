// gpt-oss's Harmony replies on /v1/chat/completions: the answer is the final channel, the analysis
// comes as reasoning_content, a message to functions.NAME ended by <|call|> is a tool call
// (streamed or not), and what cannot apply to a Harmony reply (stop strings, grammars, a required
// call) is a 400. There is no small Harmony model, so stories260K plays one: a copy whose
// vocabulary renames the ids its greedy reply samples, so that the reply reads as Harmony.
#include "tessera/llm/harmony.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "server/test_server.h"
#include "support/stories_model.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"

namespace tessera {
namespace {

using namespace test_server;

// A template that writes <|channel|> (so the server reads its replies as Harmony) and renders one
// user message as its bare text: the prompt is stories260K's "Once upon a time" with BOS.
constexpr const char* kTemplate =
    "{% for m in messages %}{% if m.role == 'assistant' %}<|channel|>final<|message|>{{ m.content }}<|end|>"
    "{% else %}{{ m.content }}{% endif %}{% endfor %}";

// stories260K written to `path` with the k-th sampled id renamed to renames[k] (when not empty),
// a control token when it is one of Harmony's.
void write_renamed_model(const std::string& path, const std::vector<llm::Token>& ids,
                         const std::vector<std::string>& renames) {
  const gguf::File src = gguf::File::open(kModel);
  std::vector<std::string> tokens = src.get_string_array("tokenizer.ggml.tokens");
  std::vector<int32_t> types =
      std::get<std::vector<int32_t>>(src.get_array("tokenizer.ggml.token_type").numbers);
  for (size_t k = 0; k < renames.size(); ++k) {
    if (renames[k].empty()) continue;
    tokens[static_cast<size_t>(ids[k])] = renames[k];
    types[static_cast<size_t>(ids[k])] =
        llm::HarmonyReader::is_structure(renames[k]) ? 3 : 1;  // control, normal
  }
  gguf::Writer w;
  for (const auto& [key, value] : src.kvs())
    if (key != "general.alignment") w.set(key, value);
  w.set("tokenizer.ggml.tokens", gguf::Value(gguf::ArrayValue::of(std::move(tokens))));
  w.set("tokenizer.ggml.token_type", gguf::Value(gguf::ArrayValue::of(std::move(types))));
  for (const gguf::TensorInfo& t : src.tensors())
    w.add_tensor_raw(t.name, t.type_id, std::span<const int64_t>(t.ne.data(), static_cast<size_t>(t.n_dims)),
                     src.tensor_data(t), t.nbytes);
  w.write(path);
}

json chat(bool stream) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
               {"max_tokens", 40},
               {"temperature", 0}};
  if (stream) body["stream"] = true;
  return body;
}

class ServerHarmony : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(testing::TempDir()) /
           ("harmony_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
    template_ = (dir_ / "harmony.jinja").string();
    std::ofstream(template_) << kTemplate;
    auto original = llm::Model::load(kModel);
    vocab_.emplace(llm::Vocab::from_gguf(*original->file()));
    ids_ = testing_support::greedy_ids(*original, *vocab_, "Once upon a time", 20);
    // The renamed ids must differ from each other and from those kept as text.
    ASSERT_EQ(std::set<llm::Token>(ids_.begin(), ids_.begin() + 18).size(), 18u);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A server on stories260K renamed so (both ends, <|return|> and <|call|>, are in every vocabulary:
  // with them <|end|> ends a message, not the reply).
  std::unique_ptr<TestServer> serve(std::vector<std::string> renames) {
    const auto has = [&](const char* t) {
      return std::find(renames.begin(), renames.end(), t) != renames.end();
    };
    const bool has_return = has("<|return|>"), has_call = has("<|call|>");
    renames.resize(18);
    if (!has_return) renames[16] = "<|return|>";
    if (!has_call) renames[17] = "<|call|>";
    const std::string model = (dir_ / "model.gguf").string();
    write_renamed_model(model, ids_, renames);
    return std::make_unique<TestServer>([&](server::ServerOptions& o) {
      o.model_path = model;
      o.chat_template_file = template_;
    });
  }
  std::string piece(size_t k) const { return vocab_->token_to_piece(ids_[k]); }

  std::filesystem::path dir_;
  std::string template_;
  std::vector<llm::Token> ids_;
  std::optional<llm::Vocab> vocab_;
};

}  // namespace

TEST_F(ServerHarmony, TheAnswerIsTheFinalChannelAndTheAnalysisIsReasoning) {
  auto srv = serve({"<|channel|>", "analysis", "<|message|>", "", "", "", "<|end|>", "<|start|>", "assistant",
                    "<|channel|>", "final", "<|message|>", "", "", "", "<|return|>"});
  const std::string answer = piece(12) + piece(13) + piece(14), analysis = piece(3) + piece(4) + piece(5);

  auto r = srv->post("/v1/chat/completions", chat(false));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], answer) << r->body;
  EXPECT_EQ(message["reasoning_content"], analysis) << r->body;
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 15);

  r = srv->post("/v1/chat/completions", chat(true));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string content, reasoning;
  for (const std::string& e : sse_events(r->body)) {
    if (e == "[DONE]") continue;
    const json delta =
        json::parse(e)["choices"].empty() ? json::object() : json::parse(e)["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(content, answer) << r->body;
  EXPECT_EQ(reasoning, analysis) << r->body;

  // What would read or cut the channels' text is refused by name.
  json stop = chat(false);
  stop["stop"] = "x";
  r = srv->post("/v1/chat/completions", stop);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("Harmony"), std::string::npos) << r->body;
  json format = chat(false);
  format["response_format"] = {{"type", "json_object"}};
  r = srv->post("/v1/chat/completions", format);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("Harmony"), std::string::npos) << r->body;
}

TEST_F(ServerHarmony, AMessageToAFunctionIsAToolCall) {
  auto srv = serve({"<|channel|>", "analysis", "<|message|>", "", "", "", "<|end|>", "<|start|>",
                    "assistant to=functions.get_weather", "<|channel|>", "commentary json", "<|message|>",
                    "{\"city\":", " \"Paris\"}", "<|call|>"});
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  for (const bool stream : {false, true}) {
    json body = chat(stream);
    body["tools"] = tools;
    auto r = srv->post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json call, finish;
    std::string content;
    if (!stream) {
      const json b = json::parse(r->body);
      EXPECT_TRUE(b["choices"][0]["message"]["content"].is_null()) << r->body;
      EXPECT_EQ(b["choices"][0]["message"]["reasoning_content"], piece(3) + piece(4) + piece(5));
      ASSERT_EQ(b["choices"][0]["message"]["tool_calls"].size(), 1u) << r->body;
      call = b["choices"][0]["message"]["tool_calls"][0];
      finish = b["choices"][0]["finish_reason"];
    } else {
      for (const std::string& e : sse_events(r->body)) {
        if (e == "[DONE]") continue;
        const json j = json::parse(e);
        if (j["choices"].empty()) continue;
        const json& delta = j["choices"][0]["delta"];
        if (delta.contains("content")) content += delta["content"].get<std::string>();
        if (delta.contains("tool_calls")) call = delta["tool_calls"][0];
        if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(content, "");
      EXPECT_EQ(call["index"], 0);
    }
    EXPECT_EQ(finish, "tool_calls") << r->body;
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather") << r->body;
    EXPECT_EQ(call["function"]["arguments"], "{\"city\":\"Paris\"}") << r->body;
  }

  // A call cannot be required of a Harmony reply (it is control tokens, which a grammar over text
  // cannot write).
  json required = chat(false);
  required["tools"] = tools;
  required["tool_choice"] = "required";
  auto r = srv->post("/v1/chat/completions", required);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("Harmony"), std::string::npos) << r->body;
}

}  // namespace tessera
