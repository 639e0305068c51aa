#pragma once
// Chat templates: a model's Jinja template (GGUF key tokenizer.chat_template) turning a
// conversation into the prompt text the model was trained on. Rendered by a sandboxed interpreter
// of our own (src/llm/jinja/) that matches Hugging Face's renderer byte for byte on real templates:
// no file, environment or network access; bounded output, loops and macro recursion. Any template
// problem (syntax, unknown filter, runtime error, raise_exception, a limit) is an
// Error(InvalidArgument) "chat template: line L, column C: ...".
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::gguf {
class File;
}

namespace tessera::llm {

inline constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = false;  // end with the header of an assistant turn
  std::string bos_token, eos_token;    // the texts of the vocabulary's BOS and EOS tokens
  // More template variables (tools, enable_thinking, date_string, ...), a JSON object.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // What strftime_now() formats (UTC); unset: the system clock at render time.
  std::optional<std::chrono::system_clock::time_point> now;
};

// A rendered conversation and where its text came from, for tokenizing it safely
// (Vocab::encode_with_plain_ranges): only the template's own text may spell control tokens.
struct RenderedPrompt {
  std::string text;
  // [begin, end) byte ranges of `text` that came from the messages and the extra variables (or
  // anything the template computed from them); sorted, disjoint. The rest is the template's own
  // text, or bos_token / eos_token, which the caller vouches for.
  std::vector<std::pair<size_t, size_t>> data_ranges;
};

// Bounds on one render (the defaults suit any real chat template and conversation).
struct ChatTemplateLimits {
  size_t max_output = size_t{8} << 20;            // bytes of rendered text
  uint64_t max_iterations = 100'000;              // loop iterations, all loops of a render together
  int max_call_depth = 100;                       // nested macro calls
  uint64_t max_work_bytes = uint64_t{256} << 20;  // bytes of strings built during a render
};

class ChatTemplate {
 public:
  // Parses the template: a syntax error or an unknown filter or test is an Error.
  explicit ChatTemplate(std::string_view source, const ChatTemplateLimits& limits = {});
  // The file's tokenizer.chat_template; Error(InvalidArgument) naming the file when it has none.
  static ChatTemplate from_gguf(const gguf::File& file, const ChatTemplateLimits& limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  const std::string& source() const noexcept { return source_; }

  std::string apply(const std::vector<ChatMessage>& messages, const ChatOptions& options = {}) const;
  // Messages as JSON: an array of objects, each with a string "role" and a "content" that is a
  // string, an array of parts ({"type": "text", "text": ...}) or null; other fields (tool_calls,
  // tool_call_id, reasoning_content, ...) reach the template as they are. Error(InvalidArgument)
  // naming the message otherwise.
  std::string apply(const nlohmann::ordered_json& messages, const ChatOptions& options = {}) const;
  // apply() with the byte ranges of the text that came from the messages and options.extra.
  RenderedPrompt render_prompt(const nlohmann::ordered_json& messages, const ChatOptions& options = {}) const;
  RenderedPrompt render_prompt(const std::vector<ChatMessage>& messages,
                               const ChatOptions& options = {}) const;
  // Renders with exactly these variables (a JSON object), e.g. for templates used in other ways.
  // JSON nested deeper than 256 levels (anywhere: messages, variables) is an Error(InvalidArgument).
  std::string render(const nlohmann::ordered_json& variables,
                     std::optional<std::chrono::system_clock::time_point> now = std::nullopt) const;

 private:
  struct Impl;
  std::string source_;
  ChatTemplateLimits limits_;
  std::unique_ptr<Impl> impl_;
};

// ChatOptions carrying the vocabulary's BOS and EOS texts (what templates print as bos_token).
ChatOptions chat_options_for(const Vocab& vocab);
// A rendered conversation's tokens. Only the template's own text may spell control tokens (a
// message's "</s>" or "<|im_start|>" stays text), and the prompt gets the vocabulary's BOS unless
// the template wrote the BOS text itself at the start (a message's text there does not count).
// `options` are those it was rendered with.
std::vector<Token> tokenize_chat_prompt(const Vocab& vocab, const RenderedPrompt& prompt,
                                        const ChatOptions& options);

// The file's tokenizer.chat_template, or nullopt when it has none.
std::optional<std::string> chat_template_source(const gguf::File& file);

// A conversation to render, as a messages file holds it: a JSON array of messages, or an object
// with "messages" and optionally "add_generation_prompt" (bool), "bos_token" and "eos_token"
// (strings); any other member of the object becomes a template variable (e.g. "tools").
struct ChatRequest {
  nlohmann::ordered_json messages;  // validated as ChatTemplate::apply requires
  std::optional<bool> add_generation_prompt;
  std::optional<std::string> bos_token, eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};
// Error(InvalidArgument) "<source>: ..." on malformed JSON or a member of the wrong type.
ChatRequest parse_chat_request(std::string_view json_text, std::string_view source = "messages");

}  // namespace tessera::llm
