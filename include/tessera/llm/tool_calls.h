#pragma once
// Tool calls (OpenAI's function calling) in the text a model writes: which syntax a model uses,
// read from its chat template; replies split into text and calls; a grammar for a reply that is
// exactly one call, for `tool_choice` "required" or a named function; and a stream that hands out
// text while holding back what may become a call.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::llm {

enum class ToolCallSyntax {
  None,     // the template shows no syntax we read
  Hermes,   // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, any number (Qwen 2.5/3, Hermes)
  Llama3,   // the whole reply is {"name": ..., "parameters": {...}} (Llama 3.1/3.2 JSON tool calling)
  Mistral,  // [TOOL_CALLS] (a control token, so not in the text), then [{"name": ..., "arguments": {...}},
            // ...]
  Harmony,  // gpt-oss: a message to functions.NAME ended by <|call|>, in control tokens the text never
            // holds (llm/harmony.h's HarmonyTokens reads the calls; the text is the final answer)
};
const char* tool_call_syntax_name(ToolCallSyntax syntax) noexcept;
// The syntax a chat template teaches its model (what it writes for an assistant's tool_calls).
ToolCallSyntax tool_call_syntax(std::string_view template_source) noexcept;

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as compact text
};

struct ToolReply {
  std::string content;  // the text outside the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
};

// Splits a finished reply. Text that is not a well-formed call (bad JSON, no name, arguments not
// an object) stays content.
ToolReply parse_tool_calls(ToolCallSyntax syntax, std::string_view text);

// GBNF (tessera/llm/grammar.h) for a reply that is one call of one of `tools` (OpenAI's array of
// {"type": "function", "function": {"name", "description", "parameters"}}), or of the function
// named `only`, its arguments valid against the function's `parameters` JSON schema (absent: no
// arguments). Error(InvalidArgument) for the None syntax, a malformed tool, an unknown `only`, or a
// schema json_schema_to_gbnf refuses (naming the function).
std::string tool_call_gbnf(ToolCallSyntax syntax, const nlohmann::ordered_json& tools,
                           std::string_view only = {});

// A reply as it streams: push() gives the text that can go out now as content, holding back from
// where a call may begin; finish() gives the calls and the content not yet handed out.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallSyntax syntax) : syntax_(syntax) {}
  std::string push(std::string_view piece);
  ToolReply finish();

 private:
  size_t safe_end() const;
  ToolCallSyntax syntax_;
  std::string text_;
  size_t emitted_ = 0;
};

}  // namespace tessera::llm
