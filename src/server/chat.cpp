#include "server/chat.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "server/api.h"
#include "tessera/error.h"
#include "tessera/llm/chat_template.h"
#include "tessera/llm/harmony.h"

namespace tessera::server {
namespace {

constexpr int kMaxMessagesNesting = 256;

// Whether j nests deeper than `limit`, found with an explicit stack: converting or copying deeper
// JSON would recurse that deep.
bool nesting_exceeds(const nlohmann::json& j, int limit) {
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&j, 0}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > limit) return true;
    if (v->is_structured())
      for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

}  // namespace

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

llm::ToolCallSyntax ChatFormatter::tool_syntax() const {
  if (!template_) return llm::ToolCallSyntax::None;
  // A template that writes <|channel|> as text, for a vocabulary without it as a control token,
  // teaches no syntax whose calls could be read.
  const llm::ToolCallSyntax syntax = llm::tool_call_syntax(template_->source());
  return syntax == llm::ToolCallSyntax::Harmony && !harmony() ? llm::ToolCallSyntax::None : syntax;
}

bool ChatFormatter::harmony() const { return template_ && llm::uses_harmony(*vocab_, template_->source()); }

std::vector<llm::Token> ChatFormatter::prompt(const nlohmann::json& messages,
                                              const nlohmann::ordered_json& variables) const {
  if (!template_)
    fail(400, "the model has no chat template: start the server with --chat-template-file",
         "no_chat_template");
  llm::ChatOptions options = llm::chat_options_for(*vocab_);
  options.add_generation_prompt = true;
  options.extra = variables;
  if (nesting_exceeds(messages, kMaxMessagesNesting))
    fail(400, fmt::format("the messages are nested deeper than {} levels", kMaxMessagesNesting),
         "invalid_messages");
  llm::RenderedPrompt prompt;
  try {
    prompt = template_->render_prompt(nlohmann::ordered_json(messages), options);
  } catch (const Error& e) {
    fail(400, e.what(), "invalid_messages");
  }
  if (prompt.text.empty()) fail(400, "the chat template rendered an empty prompt", "empty_prompt");
  return llm::tokenize_chat_prompt(*vocab_, prompt, options);
}

}  // namespace tessera::server
