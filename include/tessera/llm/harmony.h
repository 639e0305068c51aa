#pragma once
// gpt-oss's replies in OpenAI's Harmony format: a reply is a run of messages, each
// "<|start|>ROLE[ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]<|message|>TEXT"
// ended by <|end|> (more follows), <|return|> (the reply is done) or <|call|> (a tool call: the
// recipient is "functions.NAME", the text its arguments). A generation prompt ends with
// "<|start|>assistant", so the first message's header starts mid-way. The analysis channel is the
// model's reasoning, final its answer, commentary its preambles and tool calls.
//
// HarmonyReader reads a reply as it is generated: control tokens by their text, everything else as
// text; each message's text goes to on_text as it comes.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/llm/token_streamer.h"
#include "tessera/llm/tool_calls.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

struct HarmonyMessage {
  std::string role;          // "assistant"
  std::string channel;       // "analysis", "commentary", "final" (as the model wrote it)
  std::string recipient;     // "functions.get_weather" for a tool call; "" otherwise
  std::string content_type;  // "json" (after <|constrain|> or the channel), "" when none
  std::string text;
  std::string end;  // "<|end|>", "<|return|>", "<|call|>"; "" while open or when the reply stopped
};

class HarmonyReader {
 public:
  // Text of a message body as it comes (the message so far: its header is complete).
  using OnText = std::function<void(const HarmonyMessage& message, std::string_view text)>;

  // `role`: the role the prompt's trailing "<|start|>" names ("assistant").
  explicit HarmonyReader(OnText on_text = {}, std::string role = "assistant");

  // True for the control tokens Harmony's structure is made of (<|start|>, <|channel|>,
  // <|constrain|>, <|message|>, <|end|>, <|return|>, <|call|>).
  static bool is_structure(std::string_view token) noexcept;

  // A control token of the structure (another control token is dropped, as a reply prints none).
  void control(std::string_view token);
  // Text of ordinary tokens.
  void text(std::string_view piece);

  // The messages read so far, the last one possibly open (its `end` empty).
  const std::vector<HarmonyMessage>& messages() const noexcept { return messages_; }
  // The texts of every message in `channel` (to no recipient), joined.
  std::string channel_text(std::string_view channel) const;
  // The reply's tool calls: each message to "functions.NAME" ended by <|call|> whose text is a JSON
  // object (the arguments, compacted). Any other message is no call.
  std::vector<ToolCall> tool_calls() const;

 private:
  enum class Part { Header, Channel, Constrain, Body, Between };
  void finish_header();

  OnText on_text_;
  std::vector<HarmonyMessage> messages_;
  Part part_ = Part::Header;
  std::string header_, channel_, constrain_;
};

// True when a chat template writes Harmony (<|channel|>) and the vocabulary has <|channel|> as a
// control token, so that a reply's structure can be told from its text.
bool uses_harmony(const Vocab& vocab, std::string_view template_source);

// A Harmony reply read token by token as a generation samples them: control tokens by their text,
// the others' text in whole UTF-8 characters. `on_final` gets the final channel's text (to no
// recipient) as it comes: the answer a user is shown. The vocabulary must outlive it.
class HarmonyTokens {
 public:
  HarmonyTokens(const Vocab& vocab, std::function<void(std::string_view)> on_final);
  void push(Token id);
  // The reply has ended: the text still held (an incomplete UTF-8 tail) goes to its message.
  void finish();
  const HarmonyReader& reader() const noexcept { return reader_; }

 private:
  const Vocab& vocab_;
  TokenStreamer text_;
  HarmonyReader reader_;
};

}  // namespace tessera::llm
