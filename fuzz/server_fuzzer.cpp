// libFuzzer target for the server's request parsing (src/server/api.h), without a socket: the
// input is a request body as /v1/completions and /v1/chat/completions receive it, taken through
// parse_body, parse_generation (both APIs), prompt_tokens and chat_messages with a small vocabulary,
// and the chat formatter with a ChatML template. What must hold:
// - every refusal is an ApiError with status 400 or 422 (the routes turn anything else into a 500,
//   which a malformed request must never cause) and an error body that serializes; tessera::Error
//   from the tokenizer or template, which the routes answer with a 400, is allowed;
// - accepted values are inside the ranges the parser promises;
// - an accepted body nests no deeper than kMaxJsonDepth (deeper ones are refused while parsing:
//   every later walk of the request recurses);
// - prompt token ids are inside the vocabulary.
// Exceptions of any other type escape and are reported by the fuzzer as crashes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "server/api.h"
#include "server/chat.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"
#include "tessera/log.h"

namespace {

using namespace tessera;
using namespace tessera::server;
using nlohmann::json;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "server_fuzzer: %s: %s\n", what, detail.c_str());
  __builtin_trap();
}

// ChatML, as many models' templates write it.
constexpr const char* kTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// A SentencePiece vocabulary: unknown, BOS, EOS, the 256 byte tokens, the ChatML markers, a piece.
llm::Vocab make_vocab() {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<llm::TokenType> types{llm::TokenType::Unknown, llm::TokenType::Control,
                                    llm::TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    tokens.emplace_back(text);
    types.push_back(llm::TokenType::Byte);
  }
  for (const char* t : {"<|im_start|>", "<|im_end|>"}) {
    tokens.emplace_back(t);
    types.push_back(llm::TokenType::Control);
  }
  tokens.emplace_back("\xe2\x96\x81");
  types.push_back(llm::TokenType::Normal);
  return llm::Vocab("llama", tokens, {}, types);
}

struct Fixture {
  llm::Vocab vocab = make_vocab();
  std::vector<std::byte> bytes = [] {
    gguf::Writer w;
    w.set("general.architecture", std::string("llama"));
    w.set("tokenizer.chat_template", std::string(kTemplate));
    return w.to_bytes();
  }();
  gguf::File file = gguf::File::parse(bytes, "chat");  // reads `bytes`, which outlive it
  ChatFormatter chat = ChatFormatter::create(file, vocab, "");
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void refused(const ApiError& e) {
  if (e.status != 400 && e.status != 422) bug("refusal status", std::to_string(e.status) + " " + e.message);
  if (e.message.empty()) bug("refusal", "no message");
  (void)dump(error_body(e));
}

template <typename Fn>
void request(Fn&& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    refused(e);
  } catch (const Error&) {
  }
}

void check_generation(const GenerationRequest& g) {
  const llm::SamplerOptions& s = g.params.sampling;
  if (g.max_tokens && *g.max_tokens <= 0) bug("max_tokens", std::to_string(*g.max_tokens));
  if (!(s.temperature >= 0 && s.temperature <= 100)) bug("temperature", std::to_string(s.temperature));
  if (!(s.top_p > 0 && s.top_p <= 1)) bug("top_p", std::to_string(s.top_p));
  if (s.top_k < 0) bug("top_k", std::to_string(s.top_k));
  if (!(s.min_p >= 0 && s.min_p <= 1)) bug("min_p", std::to_string(s.min_p));
  if (!(s.repeat_penalty > 0 && s.repeat_penalty <= 100))
    bug("repeat_penalty", std::to_string(s.repeat_penalty));
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2))
    bug("presence_penalty", std::to_string(s.presence_penalty));
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2))
    bug("frequency_penalty", std::to_string(s.frequency_penalty));
  for (const auto& [id, bias] : s.logit_bias)
    if (id < 0 || static_cast<size_t>(id) >= fixture().vocab.size() || !(bias >= -100 && bias <= 100))
      bug("logit_bias", std::to_string(id) + " " + std::to_string(bias));
  if (g.params.stop.size() > 16) bug("stop", "more than 16");
  for (const std::string& x : g.params.stop)
    if (x.empty()) bug("stop", "an empty string");
}

// The nesting depth of a JSON value, walked without recursion.
int depth_of(const json& root) {
  int deepest = 0;
  std::vector<std::pair<const json*, int>> todo{{&root, 1}};
  while (!todo.empty()) {
    auto [v, d] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d);
    for (const json& child : *v) todo.emplace_back(&child, d + 1);
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level(LogLevel::Error);
  (void)fixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  try {
    body = parse_body(text);
  } catch (const ApiError& e) {
    refused(e);
    return 0;
  }
  if (!body.is_object()) bug("parse_body", "accepted a non-object");
  if (depth_of(body) > kMaxJsonDepth) bug("parse_body", "accepted nesting deeper than kMaxJsonDepth");
  for (bool chat : {false, true})
    request([&] { check_generation(parse_generation(body, chat, f.vocab.size())); });
  request([&] {
    for (llm::Token id : prompt_tokens(body, f.vocab))
      if (id < 0 || static_cast<size_t>(id) >= f.vocab.size()) bug("prompt_tokens", std::to_string(id));
  });
  request([&] {
    for (llm::Token id : f.chat.prompt(chat_messages(body)))
      if (id < 0 || static_cast<size_t>(id) >= f.vocab.size()) bug("chat prompt", std::to_string(id));
  });
  return 0;
}
