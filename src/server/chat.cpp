#include "server/chat.h"

#include <fstream>
#include <sstream>

#include "server/api.h"
#include "tessera/error.h"
#include "tessera/llm/chat_template.h"

namespace tessera::server {

ChatFormatter::ChatFormatter(const llm::Vocab& vocab, std::unique_ptr<llm::ChatTemplate> tmpl)
    : vocab_(&vocab), template_(std::move(tmpl)) {}
ChatFormatter::ChatFormatter(ChatFormatter&&) noexcept = default;
ChatFormatter::~ChatFormatter() = default;

ChatFormatter ChatFormatter::create(const gguf::File& file, const llm::Vocab& vocab,
                                    const std::string& template_file) {
  std::string source;
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in)
      throw Error(ErrorCode::InvalidArgument, "cannot read the chat template file '" + template_file + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    source = ss.str();
  }
  if (source.empty()) {
    if (auto s = llm::chat_template_source(file)) source = *s;
  }
  if (source.empty()) return ChatFormatter(vocab, nullptr);
  return ChatFormatter(vocab, std::make_unique<llm::ChatTemplate>(source));
}

std::vector<llm::Token> ChatFormatter::prompt(const nlohmann::json& messages) const {
  if (!template_)
    fail(400, "the model has no chat template: start the server with --chat-template-file",
         "no_chat_template");
  llm::ChatOptions options;
  options.add_generation_prompt = true;
  if (vocab_->bos() != llm::kNoToken) options.bos_token = vocab_->text(vocab_->bos());
  if (vocab_->eos() != llm::kNoToken) options.eos_token = vocab_->text(vocab_->eos());
  std::string text;
  try {
    text = template_->apply(nlohmann::ordered_json(messages), options);
  } catch (const Error& e) {
    fail(400, e.what(), "invalid_messages");
  }
  if (text.empty()) fail(400, "the chat template rendered an empty prompt", "empty_prompt");
  // Templates that write the BOS text themselves get no second BOS.
  const bool has_bos = !options.bos_token.empty() && text.rfind(options.bos_token, 0) == 0;
  return vocab_->encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace tessera::server
