// Tool call syntaxes, parsing, grammars and streaming (tessera/llm/tool_calls.h).
#include "tessera/llm/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/check.h"
#include "tessera/llm/json_schema.h"

namespace tessera::llm {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// {"name": string, <args_key>: object} (or `arguments` as a JSON string of an object) -> a call.
bool call_of(const Json& j, const char* args_key, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    return false;
  Json args = Json::object();
  for (const char* key : {args_key, "arguments"}) {
    if (!j.contains(key)) continue;
    args = j[key];
    if (args.is_string()) args = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    break;
  }
  if (!args.is_object()) return false;
  out.name = j["name"].get<std::string>();
  out.arguments = args.dump();
  return true;
}

Json parse_json(std::string_view text) { return Json::parse(text, nullptr, /*allow_exceptions=*/false); }

// Where a call may begin in `text`: the Hermes opening tag, or a tail that may become one.
size_t hermes_hold(std::string_view text) {
  if (const size_t at = text.find(kHermesOpen); at != std::string_view::npos) return at;
  for (size_t k = std::min(kHermesOpen.size() - 1, text.size()); k > 0; --k)
    if (text.substr(text.size() - k) == kHermesOpen.substr(0, k)) return text.size() - k;
  return text.size();
}

std::string quoted(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

}  // namespace

const char* tool_call_syntax_name(ToolCallSyntax syntax) noexcept {
  switch (syntax) {
    case ToolCallSyntax::None:
      return "none";
    case ToolCallSyntax::Hermes:
      return "hermes";
    case ToolCallSyntax::Llama3:
      return "llama3";
    case ToolCallSyntax::Mistral:
      return "mistral";
    case ToolCallSyntax::Harmony:
      return "harmony";
  }
  return "none";
}

ToolCallSyntax tool_call_syntax(std::string_view source) noexcept {
  if (source.find("<|channel|>") != std::string_view::npos) return ToolCallSyntax::Harmony;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallSyntax::Hermes;
  if (source.find(kMistralMarker) != std::string_view::npos) return ToolCallSyntax::Mistral;
  if (source.find("\"parameters\": dictionary of argument name") != std::string_view::npos)
    return ToolCallSyntax::Llama3;
  return ToolCallSyntax::None;
}

ToolReply parse_tool_calls(ToolCallSyntax syntax, std::string_view text) {
  ToolReply r;
  switch (syntax) {
    case ToolCallSyntax::Hermes: {
      size_t at = 0;
      std::string content;
      while (true) {
        const size_t open = text.find(kHermesOpen, at);
        if (open == std::string_view::npos) break;
        const size_t body = open + kHermesOpen.size();
        const size_t close = text.find(kHermesClose, body);
        ToolCall call;
        if (close == std::string_view::npos ||
            !call_of(parse_json(trim(text.substr(body, close - body))), "arguments", call))
          break;  // the rest is text
        content += text.substr(at, open - at);
        r.calls.push_back(std::move(call));
        at = close + kHermesClose.size();
      }
      content += text.substr(at);
      r.content = r.calls.empty() ? std::string(text) : std::string(trim(content));
      return r;
    }
    case ToolCallSyntax::Llama3: {
      ToolCall call;
      if (call_of(parse_json(trim(text)), "parameters", call)) {
        r.calls.push_back(std::move(call));
        return r;
      }
      break;
    }
    case ToolCallSyntax::Mistral: {
      std::string_view body = trim(text);
      if (body.substr(0, kMistralMarker.size()) == kMistralMarker)
        body = trim(body.substr(kMistralMarker.size()));
      const Json j = parse_json(body);
      std::vector<ToolCall> calls;
      if (j.is_array() && !j.empty()) {
        for (const Json& e : j) {
          ToolCall call;
          if (!call_of(e, "arguments", call)) {
            calls.clear();
            break;
          }
          calls.push_back(std::move(call));
        }
      }
      if (!calls.empty()) {
        r.calls = std::move(calls);
        return r;
      }
      break;
    }
    case ToolCallSyntax::Harmony:  // the calls are not in the text
    case ToolCallSyntax::None:
      break;
  }
  r.content = std::string(text);
  return r;
}

std::string tool_call_gbnf(ToolCallSyntax syntax, const Json& tools, std::string_view only) {
  if (syntax == ToolCallSyntax::None)
    raise(ErrorCode::InvalidArgument, "the model's chat template shows no tool call syntax Tessera reads");
  if (syntax == ToolCallSyntax::Harmony)
    raise(
        ErrorCode::InvalidArgument,
        "a Harmony reply (gpt-oss) calls a tool in control tokens, which a grammar over text cannot require: "
        "use \"auto\"");
  if (!tools.is_array() || tools.empty()) raise(ErrorCode::InvalidArgument, "no tools to call");
  const char* args_key = syntax == ToolCallSyntax::Llama3 ? "parameters" : "arguments";
  Json branches = Json::array();
  Json defs = Json::object();  // every function's $defs / definitions, which its $refs name from the root
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object())
      raise(ErrorCode::InvalidArgument, "tool {} is not {{\"type\": \"function\", \"function\": {{...}}}}",
            i);
    const Json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      raise(ErrorCode::InvalidArgument, "tool {} has no function name", i);
    const std::string name = f["name"];
    if (!names.insert(name).second) raise(ErrorCode::InvalidArgument, "two tools are named '{}'", name);
    if (!only.empty() && name != only) continue;
    Json params =
        f.contains("parameters") && !f["parameters"].is_null()
            ? f["parameters"]
            : Json{{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    for (const char* key : {"$defs", "definitions"}) {
      if (!params.is_object() || !params.contains(key)) continue;
      if (!params[key].is_object())
        raise(ErrorCode::InvalidArgument, "function '{}': '{}' is not an object", name, key);
      for (auto it = params[key].begin(); it != params[key].end(); ++it) {
        Json& slot = defs[key][it.key()];
        if (!slot.is_null() && slot != it.value())
          raise(ErrorCode::InvalidArgument, "functions define '{}/{}' differently: rename one", key,
                it.key());
        slot = it.value();
      }
      params.erase(key);
    }
    // The call's members in the order the syntax writes them, the name fixed.
    Json props = Json::object();
    props["name"] = Json{{"const", name}};
    props[args_key] = params;
    branches.push_back(Json{{"type", "object"},
                            {"properties", props},
                            {"required", Json::array({"name", args_key})},
                            {"additionalProperties", false}});
  }
  if (branches.empty()) raise(ErrorCode::InvalidArgument, "no tool is named '{}'", std::string(only));
  // One branch per function, told apart by its name: a oneOf json_schema_to_gbnf enforces. A
  // function's local $refs ("#/$defs/...") keep working: its $defs move to the new root.
  Json schema = branches.size() == 1 ? branches[0] : Json{{"oneOf", branches}};
  for (auto it = defs.begin(); it != defs.end(); ++it) schema[it.key()] = it.value();
  std::string gbnf;
  try {
    gbnf = json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    raise(ErrorCode::InvalidArgument, "tool parameters: {}", e.what());
  }
  // json_schema_to_gbnf's start rule becomes the call, wrapped as the syntax writes it.
  constexpr std::string_view kRoot = "root ::= ";
  TESSERA_ASSERT(gbnf.compare(0, kRoot.size(), kRoot) == 0);
  gbnf = "tool-call ::= " + gbnf.substr(kRoot.size());
  switch (syntax) {
    case ToolCallSyntax::Hermes:
      return fmt::format("root ::= {} \"\\n\" tool-call \"\\n\" {}\n", quoted(kHermesOpen),
                         quoted(kHermesClose)) +
             gbnf;
    case ToolCallSyntax::Llama3:
      return "root ::= tool-call\n" + gbnf;
    case ToolCallSyntax::Mistral:
      return "root ::= \"[\" tool-call \"]\"\n" + gbnf;
    case ToolCallSyntax::Harmony:
    case ToolCallSyntax::None:
      break;
  }
  return gbnf;
}

size_t ToolCallStream::safe_end() const {
  switch (syntax_) {
    case ToolCallSyntax::Hermes:
      // What went out holds no tag nor a tag's beginning: look only after it.
      return emitted_ + hermes_hold(std::string_view(text_).substr(emitted_));
    case ToolCallSyntax::Llama3:
    case ToolCallSyntax::Mistral: {
      // A call is the whole reply: held while the reply could still be one.
      const std::string_view t = trim(text_);
      if (t.empty()) return 0;
      const char first = syntax_ == ToolCallSyntax::Llama3 ? '{' : '[';
      return t.front() == first ? 0 : text_.size();
    }
    case ToolCallSyntax::Harmony:  // the text holds no call
    case ToolCallSyntax::None:
      break;
  }
  return text_.size();
}

std::string ToolCallStream::push(std::string_view piece) {
  text_ += piece;
  const size_t end = std::max(safe_end(), emitted_);
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

ToolReply ToolCallStream::finish() {
  ToolReply r = parse_tool_calls(syntax_, text_);
  if (r.calls.empty()) {
    r.content = text_.substr(emitted_);  // what was held back turned out to be text
    return r;
  }
  // The content handed out already is the text before the first call; the rest goes now.
  const std::string_view sent = trim(std::string_view(text_).substr(0, emitted_));
  r.content = r.content.compare(0, sent.size(), sent) == 0 ? r.content.substr(sent.size()) : std::string();
  return r;
}

}  // namespace tessera::llm
