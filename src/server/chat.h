#pragma once
// Chat messages to prompt tokens through the chat template (--chat-template-file, else the
// model's tokenizer.chat_template).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/llm/tool_calls.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {
class ChatTemplate;
}

namespace tessera::server {

class ChatFormatter {
 public:
  // Error(InvalidArgument) when template_file cannot be read or the template does not parse.
  // A model without a template and no file gives a formatter whose prompt() is a 400.
  static ChatFormatter create(const gguf::File& file, const llm::Vocab& vocab,
                              const std::string& template_file);
  ChatFormatter(ChatFormatter&&) noexcept;
  ~ChatFormatter();

  // The messages (OpenAI's array) rendered with a generation prompt and `variables` (a JSON
  // object: tools, ...) and tokenized; a template or message error is an ApiError 400.
  std::vector<llm::Token> prompt(const nlohmann::json& messages, const nlohmann::ordered_json& variables =
                                                                     nlohmann::ordered_json::object()) const;
  // How the template's model writes tool calls (None without a template).
  llm::ToolCallSyntax tool_syntax() const;
  // The template's replies are Harmony (gpt-oss: llm::uses_harmony).
  bool harmony() const;

 private:
  ChatFormatter(const llm::Vocab& vocab, std::unique_ptr<llm::ChatTemplate> tmpl);
  const llm::Vocab* vocab_;
  std::unique_ptr<llm::ChatTemplate> template_;
};

}  // namespace tessera::server
