// Harmony replies (tessera/llm/harmony.h).
#include "tessera/llm/harmony.h"

#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::llm {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kConstrain = "<|constrain|>",
                           kMessage = "<|message|>", kEnd = "<|end|>", kReturn = "<|return|>",
                           kCall = "<|call|>";

// The words of a header section; "to=X" names the recipient, any other word after the first is
// what the section says about the content ("json", "<|constrain|>json").
std::vector<std::string> words(std::string_view s) {
  std::istringstream in{std::string(s)};
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

HarmonyReader::HarmonyReader(OnText on_text, std::string role) : on_text_(std::move(on_text)) {
  messages_.push_back({});
  messages_.back().role = std::move(role);
}

bool HarmonyReader::is_structure(std::string_view token) noexcept {
  for (std::string_view t : {kStart, kChannel, kConstrain, kMessage, kEnd, kReturn, kCall})
    if (token == t) return true;
  return false;
}

void HarmonyReader::finish_header() {
  HarmonyMessage& m = messages_.back();
  // The role section: "assistant", "assistant to=functions.x", or (continuing the prompt's role)
  // " to=functions.x"; then the channel section: "commentary to=functions.x json".
  std::vector<std::string> role_words = words(header_), channel_words = words(channel_);
  for (size_t i = 0; i < role_words.size(); ++i) {
    if (role_words[i].rfind("to=", 0) == 0)
      m.recipient = role_words[i].substr(3);
    else if (i == 0)
      m.role = role_words[i];
  }
  for (size_t i = 0; i < channel_words.size(); ++i) {
    if (channel_words[i].rfind("to=", 0) == 0)
      m.recipient = channel_words[i].substr(3);
    else if (i == 0)
      m.channel = channel_words[i];
    else
      m.content_type = channel_words[i];
  }
  if (const std::vector<std::string> c = words(constrain_); !c.empty()) m.content_type = c.front();
  header_.clear();
  channel_.clear();
  constrain_.clear();
}

void HarmonyReader::control(std::string_view token) {
  if (token == kStart) {
    HarmonyMessage& m = messages_.back();
    const bool unused = part_ == Part::Header && header_.empty() && m.channel.empty() && m.text.empty();
    if (!unused) {
      if (part_ == Part::Header || part_ == Part::Channel || part_ == Part::Constrain) finish_header();
      messages_.push_back({});
    }
    part_ = Part::Header;
  } else if (token == kChannel) {
    if (part_ == Part::Header) part_ = Part::Channel;
  } else if (token == kConstrain) {
    if (part_ == Part::Header || part_ == Part::Channel) part_ = Part::Constrain;
  } else if (token == kMessage) {
    if (part_ != Part::Body && part_ != Part::Between) {
      finish_header();
      part_ = Part::Body;
    }
  } else if (token == kEnd || token == kReturn || token == kCall) {
    if (part_ != Part::Body && part_ != Part::Between) finish_header();
    if (part_ != Part::Between) messages_.back().end = std::string(token);
    part_ = Part::Between;
  }
}

void HarmonyReader::text(std::string_view piece) {
  switch (part_) {
    case Part::Header:
      header_ += piece;
      break;
    case Part::Channel:
      channel_ += piece;
      break;
    case Part::Constrain:
      constrain_ += piece;
      break;
    case Part::Body:
      messages_.back().text += piece;
      if (on_text_ && !piece.empty()) on_text_(messages_.back(), piece);
      break;
    case Part::Between:
      break;  // text outside any message (a malformed reply) belongs to none
  }
}

std::string HarmonyReader::channel_text(std::string_view channel) const {
  std::string out;
  for (const HarmonyMessage& m : messages_)
    if (m.channel == channel && m.recipient.empty()) out += m.text;
  return out;
}

std::vector<ToolCall> HarmonyReader::tool_calls() const {
  constexpr std::string_view kFunctions = "functions.";
  std::vector<ToolCall> calls;
  for (const HarmonyMessage& m : messages_) {
    if (m.end != kCall || !m.recipient.starts_with(kFunctions) || m.recipient.size() == kFunctions.size())
      continue;
    const auto args = nlohmann::json::parse(m.text, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) continue;
    calls.push_back({m.recipient.substr(kFunctions.size()), args.dump()});
  }
  return calls;
}

bool uses_harmony(const Vocab& vocab, std::string_view template_source) {
  const Token channel = vocab.find(std::string(kChannel));
  return template_source.find(kChannel) != std::string_view::npos && channel != kNoToken &&
         vocab.type(channel) == TokenType::Control;
}

HarmonyTokens::HarmonyTokens(const Vocab& vocab, std::function<void(std::string_view)> on_final)
    : vocab_(vocab),
      text_(vocab),
      reader_([on_final = std::move(on_final)](const HarmonyMessage& m, std::string_view text) {
        if (on_final && m.channel == "final" && m.recipient.empty()) on_final(text);
      }) {}

void HarmonyTokens::push(Token id) {
  if (vocab_.type(id) == TokenType::Control) {
    reader_.text(text_.finish());
    reader_.control(vocab_.text(id));
  } else {
    reader_.text(text_.push(id));
  }
}

void HarmonyTokens::finish() { reader_.text(text_.finish()); }

}  // namespace tessera::llm
