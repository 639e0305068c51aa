#include "tessera/llm/chat_template.h"

#include <fmt/format.h>

#include <variant>

#include "llm/jinja/interpreter.h"
#include "tessera/error.h"
#include "tessera/gguf.h"

namespace tessera::llm {

using Json = nlohmann::ordered_json;

struct ChatTemplate::Impl {
  jinja::Template program;
};

namespace {

[[noreturn]] void bad_messages(const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, message);
}

void validate_messages(const Json& messages) {
  if (!messages.is_array()) bad_messages("chat messages must be a JSON array of message objects");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) bad_messages(fmt::format("chat message {}: not a JSON object", i));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      bad_messages(fmt::format("chat message {}: \"role\" must be a string", i));
    const auto content = m.find("content");
    if (content != m.end() && !content->is_string() && !content->is_array() && !content->is_null())
      bad_messages(
          fmt::format("chat message {}: \"content\" must be a string, an array of parts or null", i));
    if (content != m.end() && content->is_array())
      for (const Json& part : *content)
        if (!part.is_object())
          bad_messages(fmt::format("chat message {}: every content part must be an object", i));
  }
}

// Deep JSON is refused before anything walks it recursively (copies, conversion): walked here
// with an explicit stack.
void check_nesting(const Json& j, const char* what) {
  std::vector<std::pair<const Json*, int>> stack{{&j, 0}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > jinja::kMaxNesting)
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("{}: JSON nested deeper than {}", what, jinja::kMaxNesting));
    if (v->is_structured())
      for (const Json& child : *v) stack.emplace_back(&child, depth + 1);
  }
}

jinja::Value value_from_json(const Json& j, bool from_data) {
  try {
    return jinja::from_json(j, from_data);
  } catch (const jinja::RuntimeError& e) {
    throw Error(ErrorCode::InvalidArgument, std::string("chat template: ") + e.what());
  }
}

RenderedPrompt to_prompt(jinja::MarkedString rendered) {
  RenderedPrompt out;
  for (const jinja::ByteRange& r : rendered.data()) out.data_ranges.emplace_back(r.begin, r.end);
  out.text = rendered.text();
  return out;
}

jinja::Limits to_limits(const ChatTemplateLimits& l) {
  jinja::Limits out;
  out.max_output = l.max_output;
  out.max_iterations = l.max_iterations;
  out.max_call_depth = l.max_call_depth;
  out.max_work_bytes = l.max_work_bytes;
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, const ChatTemplateLimits& limits)
    : source_(source), limits_(limits), impl_(std::make_unique<Impl>(Impl{jinja::Template(source)})) {}

ChatTemplate ChatTemplate::from_gguf(const gguf::File& file, const ChatTemplateLimits& limits) {
  const auto source = chat_template_source(file);
  if (!source)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{}: no chat template ({} is missing)", file.source(), kChatTemplateKey));
  return ChatTemplate(*source, limits);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const Json& variables,
                                 std::optional<std::chrono::system_clock::time_point> now) const {
  if (!variables.is_object())
    throw Error(ErrorCode::InvalidArgument, "chat template variables must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (const auto& [k, v] : variables.items()) vars.emplace_back(k, value_from_json(v, true));
  return impl_->program.render(vars, to_limits(limits_), now.value_or(std::chrono::system_clock::now()))
      .text();
}

RenderedPrompt ChatTemplate::render_prompt(const Json& messages, const ChatOptions& options) const {
  validate_messages(messages);
  if (!options.extra.is_object())
    throw Error(ErrorCode::InvalidArgument, "extra chat template variables must be a JSON object");
  // The request's data (messages, extra variables) is marked as such; BOS and EOS are the
  // vocabulary's own texts, which templates write where control tokens belong.
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("messages", value_from_json(messages, true));
  vars.emplace_back("add_generation_prompt", jinja::Value(options.add_generation_prompt));
  vars.emplace_back("bos_token", jinja::Value(options.bos_token));
  vars.emplace_back("eos_token", jinja::Value(options.eos_token));
  for (const auto& [k, v] : options.extra.items()) vars.emplace_back(k, value_from_json(v, true));
  return to_prompt(impl_->program.render(vars, to_limits(limits_),
                                         options.now.value_or(std::chrono::system_clock::now())));
}

RenderedPrompt ChatTemplate::render_prompt(const std::vector<ChatMessage>& messages,
                                           const ChatOptions& options) const {
  Json list = Json::array();
  for (const ChatMessage& m : messages) list.push_back(Json{{"role", m.role}, {"content", m.content}});
  return render_prompt(list, options);
}

std::string ChatTemplate::apply(const Json& messages, const ChatOptions& options) const {
  return render_prompt(messages, options).text;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  return render_prompt(messages, options).text;
}

ChatOptions chat_options_for(const Vocab& vocab) {
  ChatOptions options;
  if (vocab.bos() != kNoToken) options.bos_token = vocab.text(vocab.bos());
  if (vocab.eos() != kNoToken) options.eos_token = vocab.text(vocab.eos());
  return options;
}

std::vector<Token> tokenize_chat_prompt(const Vocab& vocab, const RenderedPrompt& prompt,
                                        const ChatOptions& options) {
  const std::string& text = prompt.text;
  // Templates that write the BOS text themselves get no second BOS (a message's text at the
  // start does not count: it is plain text, so the prompt still needs its BOS).
  const bool literal_start =
      prompt.data_ranges.empty() || prompt.data_ranges.front().first >= options.bos_token.size();
  const bool has_bos = !options.bos_token.empty() && text.rfind(options.bos_token, 0) == 0 && literal_start;
  return vocab.encode_with_plain_ranges(text, /*add_special=*/!has_bos, prompt.data_ranges);
}

std::optional<std::string> chat_template_source(const gguf::File& file) {
  const gguf::Value* v = file.find(kChatTemplateKey);
  if (v == nullptr) return std::nullopt;
  if (!std::holds_alternative<std::string>(*v))
    throw Error(ErrorCode::CorruptFile,
                fmt::format("{}: {} is not a string", file.source(), kChatTemplateKey));
  return std::get<std::string>(*v);
}

ChatRequest parse_chat_request(std::string_view json_text, std::string_view source) {
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  check_nesting(j, std::string(source).c_str());
  ChatRequest r;
  const auto fail = [&](const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("{}: {}", source, what));
  };
  if (j.is_array()) {
    r.messages = std::move(j);
  } else if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (k == "messages") {
        r.messages = v;
      } else if (k == "add_generation_prompt") {
        if (!v.is_boolean()) fail("\"add_generation_prompt\" must be true or false");
        r.add_generation_prompt = v.get<bool>();
      } else if (k == "bos_token" || k == "eos_token") {
        if (!v.is_string()) fail(fmt::format("\"{}\" must be a string", k));
        (k == "bos_token" ? r.bos_token : r.eos_token) = v.get<std::string>();
      } else {
        r.extra[k] = v;
      }
    }
    if (r.messages.is_null()) fail("the object has no \"messages\" array");
  } else {
    fail("expected a JSON array of messages or an object with \"messages\"");
  }
  try {
    validate_messages(r.messages);
  } catch (const Error& e) {
    fail(e.what());
  }
  return r;
}

}  // namespace tessera::llm
