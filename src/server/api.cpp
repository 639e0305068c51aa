// Request parsing and validation for the OpenAI endpoints.
#include "server/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>

#include "tessera/error.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/json_schema.h"

namespace tessera::server {

using nlohmann::json;

void fail(int status, std::string message, std::string code, std::string type) {
  throw ApiError{status, std::move(message), std::move(type), std::move(code)};
}

json error_body(const ApiError& e) {
  return {
      {"error",
       {{"message", e.message}, {"type", e.type}, {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const std::string& body) {
  // The parser itself does not recurse, but everything after it does: refuse depth as it is read.
  const json::parser_callback_t bound_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      fail(400, fmt::format("the request body nests JSON deeper than {} levels", kMaxJsonDepth),
           "invalid_json");
    return true;
  };
  json j = json::parse(body, bound_depth, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(400, "the request body is not valid JSON", "invalid_json");
  if (!j.is_object()) fail(400, "the request body must be a JSON object", "invalid_json");
  return j;
}

namespace {

const json* member(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(const char* key, const char* want) {
  fail(400, std::string("'") + key + "' must be " + want, "invalid_type");
}

[[noreturn]] void out_of_range(const char* key, const std::string& range) {
  fail(422, std::string("'") + key + "' must be " + range, "invalid_value");
}

}  // namespace

std::optional<std::string> get_string(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string");
  return v->get<std::string>();
}

std::optional<bool> get_bool(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<int64_t> checked_integer(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();  // JSON integers above 2^63 - 1 arrive unsigned: never wrap
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  const double d = v.get<double>();
  if (std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  return std::nullopt;
}

std::optional<int64_t> get_int(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  // 5.0 is an integer too (JavaScript clients send numbers).
  const bool integral = v->is_number_integer() || (v->is_number_float() && std::isfinite(v->get<double>()) &&
                                                   v->get<double>() == std::floor(v->get<double>()));
  if (!integral) wrong_type(key, "an integer");
  const auto i = checked_integer(*v);
  if (!i) out_of_range(key, fmt::format("an integer of at most 64 bits, got {}", v->dump()));
  return i;
}

namespace {

// OpenAI parameters this server does not implement: refused by name unless given their default.
struct Unsupported {
  const char* key;
  bool (*is_default)(const json&);
};
bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_one(const json& v) { return v.is_number() && v.get<double>() == 1.0; }
bool is_empty_string(const json& v) { return v.is_string() && v.get<std::string>().empty(); }
bool is_empty_array(const json& v) { return v.is_array() && v.empty(); }
bool is_never(const json&) { return false; }
bool is_no_tool(const json& v) { return v.is_string() && v.get<std::string>() == "none"; }
bool is_text_modality(const json& v) { return v == json::array({"text"}); }
bool is_default_tier(const json& v) { return v == "auto" || v == "default"; }

const Unsupported kUnsupported[] = {
    {"logprobs", is_false},
    {"top_logprobs", is_never},
    {"echo", is_false},
    {"best_of", is_one},
    {"suffix", is_empty_string},
    {"tools", is_empty_array},
    {"tool_choice", is_no_tool},
    {"functions", is_empty_array},
    {"function_call", is_no_tool},
    {"modalities", is_text_modality},
    {"audio", is_never},
    {"prediction", is_never},
    {"reasoning_effort", is_never},
    {"web_search_options", is_never},
    {"metadata", is_never},
    {"store", is_false},
    {"service_tier", is_default_tier},
    {"verbosity", is_never},
};

// Every member of the body is a parameter we read, or a 400 naming it.
void check_parameters(const json& body, bool chat) {
  static const std::set<std::string> common{"model",
                                            "max_tokens",
                                            "temperature",
                                            "top_p",
                                            "top_k",
                                            "min_p",
                                            "repeat_penalty",
                                            "presence_penalty",
                                            "frequency_penalty",
                                            "logit_bias",
                                            "seed",
                                            "stop",
                                            "ignore_eos",
                                            "stream",
                                            "stream_options",
                                            "n",
                                            "user",
                                            "cache_salt",
                                            "parallel_tool_calls",
                                            "response_format",
                                            "grammar",
                                            "json_schema"};
  for (auto item = body.begin(); item != body.end(); ++item) {
    const std::string& key = item.key();
    const json& value = item.value();
    if (common.count(key) ||
        (chat ? key == "messages" || key == "max_completion_tokens" || key == "tools" || key == "tool_choice"
              : key == "prompt"))
      continue;
    const auto it = std::find_if(std::begin(kUnsupported), std::end(kUnsupported),
                                 [&](const Unsupported& u) { return key == u.key; });
    if (it == std::end(kUnsupported))
      fail(400, fmt::format("unknown parameter '{}'", key.substr(0, 64)), "unknown_parameter");
    if (!value.is_null() && !it->is_default(value))
      fail(400, fmt::format("'{}' is not supported by this server", key), "unsupported_parameter");
  }
}

}  // namespace

namespace {

// The member `path` (keys from the body down) of the body re-read with its objects' order kept (a
// schema's properties come in its order), or the sorted one when the raw text is not at hand.
nlohmann::ordered_json ordered_member(const json& sorted, std::string_view raw,
                                      std::initializer_list<const char*> path) {
  if (!raw.empty()) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
    const nlohmann::ordered_json* at = &doc;
    for (const char* key : path) {
      if (!at->is_object() || !at->contains(key)) {
        at = nullptr;
        break;
      }
      at = &(*at)[key];
    }
    if (at) return *at;
  }
  const json* at = &sorted;
  for (const char* key : path) at = &(*at)[key];
  return nlohmann::ordered_json::parse(at->dump());
}

std::shared_ptr<const llm::Grammar> compile_grammar(const std::string& gbnf, const char* what) {
  try {
    return llm::Grammar::parse(gbnf);
  } catch (const Error& e) {
    fail(400, fmt::format("{}: {}", what, e.what()), "invalid_grammar");
  }
}

std::shared_ptr<const llm::Grammar> schema_grammar(const nlohmann::ordered_json& schema, const char* what) {
  std::string gbnf;
  try {
    gbnf = llm::json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    fail(400, fmt::format("{}: {}", what, e.what()), "invalid_schema");
  }
  return compile_grammar(gbnf, what);
}

// response_format, grammar and json_schema: at most one constraint on the output.
std::shared_ptr<const llm::Grammar> output_constraint(const json& body, std::string_view raw) {
  std::shared_ptr<const llm::Grammar> grammar;
  int given = 0;
  if (const json* rf = member(body, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      wrong_type("response_format", "an object with a string 'type'");
    const std::string type = (*rf)["type"];
    if (type == "json_object") {
      ++given;
      // llama.cpp's extension: a schema inside json_object.
      if (rf->contains("schema") && !(*rf)["schema"].is_null())
        grammar = schema_grammar(ordered_member(body, raw, {"response_format", "schema"}),
                                 "'response_format.schema'");
      else
        grammar = compile_grammar(llm::json_object_gbnf(), "'response_format'");
    } else if (type == "json_schema") {
      ++given;
      const json* js = member(*rf, "json_schema");
      if (js == nullptr || !js->is_object())
        fail(400, "'response_format.json_schema' must be an object with 'name' and 'schema'", "invalid_type");
      for (auto it = js->begin(); it != js->end(); ++it)
        if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description")
          fail(400, fmt::format("unknown parameter 'response_format.json_schema.{}'", it.key().substr(0, 64)),
               "unknown_parameter");
      if (js->contains("name") && !(*js)["name"].is_string())
        wrong_type("response_format.json_schema.name", "a string");
      if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null())
        wrong_type("response_format.json_schema.strict", "a boolean");
      // Without a schema any JSON value will do, as OpenAI's API allows.
      const nlohmann::ordered_json schema =
          js->contains("schema") && !(*js)["schema"].is_null()
              ? ordered_member(body, raw, {"response_format", "json_schema", "schema"})
              : nlohmann::ordered_json::object();
      grammar = schema_grammar(schema, "'response_format.json_schema.schema'");
    } else if (type != "text") {
      fail(400,
           fmt::format("'response_format' type '{}' is not supported (text, json_object, json_schema are)",
                       type.substr(0, 64)),
           "unsupported_parameter");
    }
  }
  if (auto g = get_string(body, "grammar")) {
    ++given;
    grammar = compile_grammar(*g, "'grammar'");
  }
  if (const json* js = member(body, "json_schema")) {
    if (!js->is_object() && !js->is_boolean()) wrong_type("json_schema", "an object");
    ++given;
    grammar = schema_grammar(ordered_member(body, raw, {"json_schema"}), "'json_schema'");
  }
  if (given > 1)
    fail(400,
         "give at most one of 'response_format' (json_object or json_schema), 'grammar' and 'json_schema'",
         "invalid_value");
  return grammar;
}

}  // namespace

std::optional<double> get_number(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number");
  return v->get<double>();
}

GenerationRequest parse_generation(const json& body, bool chat, size_t n_vocab, std::string_view raw_body) {
  check_parameters(body, chat);
  GenerationRequest r;
  r.params.grammar = output_constraint(body, raw_body);
  llm::SamplerOptions& s = r.params.sampling;
  get_string(body, "model");  // any model name is this server's model; only its type is checked
  std::optional<int64_t> max_tokens = get_int(body, "max_tokens");
  if (chat && !max_tokens) max_tokens = get_int(body, "max_completion_tokens");
  if (max_tokens) {
    if (*max_tokens <= 0) fail(400, "'max_tokens' must be positive", "invalid_value");
    r.max_tokens = static_cast<int>(std::min<int64_t>(*max_tokens, 1 << 30));
  }
  if (auto t = get_number(body, "temperature")) {
    if (!(*t >= 0.0 && *t <= 100.0)) out_of_range("temperature", "in [0, 100]");
    s.temperature = static_cast<float>(*t);
  }
  if (auto p = get_number(body, "top_p")) {
    if (!(*p > 0.0 && *p <= 1.0)) out_of_range("top_p", "in (0, 1]");
    s.top_p = static_cast<float>(*p);
  }
  if (auto k = get_int(body, "top_k")) {
    if (*k < 0) out_of_range("top_k", ">= 0 (0: off)");
    s.top_k = static_cast<int>(std::min<int64_t>(*k, 1 << 30));
  }
  if (auto p = get_number(body, "min_p")) {
    if (!(*p >= 0.0 && *p <= 1.0)) out_of_range("min_p", "in [0, 1]");
    s.min_p = static_cast<float>(*p);
  }
  if (auto p = get_number(body, "repeat_penalty")) {
    if (!(*p > 0.0 && *p <= 100.0)) out_of_range("repeat_penalty", "in (0, 100]");
    s.repeat_penalty = static_cast<float>(*p);
  }
  if (auto p = get_number(body, "presence_penalty")) {
    if (!(*p >= -2.0 && *p <= 2.0)) out_of_range("presence_penalty", "in [-2, 2]");
    s.presence_penalty = static_cast<float>(*p);
  }
  if (auto p = get_number(body, "frequency_penalty")) {
    if (!(*p >= -2.0 && *p <= 2.0)) out_of_range("frequency_penalty", "in [-2, 2]");
    s.frequency_penalty = static_cast<float>(*p);
  }
  if (const json* bias = member(body, "logit_bias")) {
    if (!bias->is_object()) wrong_type("logit_bias", "an object of token ids to numbers");
    if (bias->size() > 1024) out_of_range("logit_bias", "at most 1024 tokens");
    for (const auto& [key, value] : bias->items()) {
      char* end = nullptr;
      errno = 0;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || errno != 0 || id < 0 || static_cast<uint64_t>(id) >= n_vocab)
        fail(400,
             fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key.substr(0, 32), n_vocab),
             "invalid_value");
      if (!value.is_number()) wrong_type("logit_bias", "an object of token ids to numbers");
      const double b = value.get<double>();
      if (!(b >= -100.0 && b <= 100.0)) out_of_range("logit_bias", "values in [-100, 100]");
      s.logit_bias.emplace_back(static_cast<llm::Token>(id), static_cast<float>(b));
    }
  }
  for (const char* key : {"user", "cache_salt"}) {
    if (auto v = get_string(body, key)) {
      if (v->size() > 256) out_of_range(key, "at most 256 bytes");
      r.cache_salt += std::string(key) + "=" + *v + "\n";
    }
  }
  get_bool(body, "parallel_tool_calls");  // without tools there is nothing to run in parallel
  if (auto seed = get_int(body, "seed"))
    s.seed = static_cast<uint64_t>(*seed);
  else
    s.seed = std::random_device{}();
  if (const json* stop = member(body, "stop")) {
    if (stop->is_string()) {
      r.params.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const json& e : *stop) {
        if (!e.is_string()) wrong_type("stop", "a string or an array of strings");
        r.params.stop.push_back(e.get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or an array of strings");
    }
    if (r.params.stop.size() > 16) out_of_range("stop", "at most 16 strings");
    for (const std::string& x : r.params.stop)
      if (x.empty()) out_of_range("stop", "non-empty strings");
  }
  if (auto n = get_int(body, "n"); n && *n != 1) out_of_range("n", "1 (one choice per request)");
  r.params.stop_at_eos = !get_bool(body, "ignore_eos").value_or(false);
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = member(body, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  return r;
}

std::optional<ToolRequest> parse_tools(const json& body, std::string_view raw) {
  const json* tools = member(body, "tools");
  const json* choice = member(body, "tool_choice");
  if (tools == nullptr || (tools->is_array() && tools->empty())) {
    if (choice != nullptr && !is_no_tool(*choice)) fail(400, "'tool_choice' needs 'tools'", "invalid_value");
    return std::nullopt;
  }
  if (!tools->is_array()) wrong_type("tools", "an array of tools");
  if (tools->size() > 128) out_of_range("tools", "at most 128 tools");
  ToolRequest r;
  r.tools = ordered_member(body, raw, {"tools"});
  std::set<std::string> names;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const auto& t = r.tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function")
      fail(400, fmt::format("tool {} is not of type 'function' (the only type this server runs)", i),
           "unsupported_parameter");
    for (auto it = t.begin(); it != t.end(); ++it)
      if (it.key() != "type" && it.key() != "function")
        fail(400, fmt::format("unknown parameter 'tools[{}].{}'", i, it.key().substr(0, 64)),
             "unknown_parameter");
    if (!t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string() || t["function"]["name"].get<std::string>().empty())
      fail(400, fmt::format("tool {} needs a 'function' with a non-empty string 'name'", i), "invalid_type");
    for (auto it = t["function"].begin(); it != t["function"].end(); ++it)
      if (it.key() != "name" && it.key() != "description" && it.key() != "parameters" && it.key() != "strict")
        fail(400, fmt::format("unknown parameter 'tools[{}].function.{}'", i, it.key().substr(0, 64)),
             "unknown_parameter");
    const auto& params = t["function"];
    if (params.contains("parameters") && !params["parameters"].is_object() && !params["parameters"].is_null())
      wrong_type("tools[].function.parameters", "a JSON schema object");
    if (!names.insert(params["name"].get<std::string>()).second)
      fail(400, fmt::format("two tools are named '{}'", params["name"].get<std::string>().substr(0, 64)),
           "invalid_value");
  }
  if (choice == nullptr || (choice->is_string() && *choice == "auto")) {
    r.choice = ToolRequest::Choice::Auto;
  } else if (choice->is_string() && *choice == "none") {
    r.choice = ToolRequest::Choice::None;
  } else if (choice->is_string() && *choice == "required") {
    r.choice = ToolRequest::Choice::Required;
  } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
             (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
    r.choice = ToolRequest::Choice::Named;
    r.name = (*choice)["function"]["name"];
    if (!names.count(r.name))
      fail(400, fmt::format("'tool_choice' names '{}', which is not among the tools", r.name.substr(0, 64)),
           "invalid_value");
  } else {
    fail(400,
         "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": "
         "{\"name\": ...}}",
         "invalid_value");
  }
  return r;
}

std::shared_ptr<const llm::Grammar> tool_call_grammar(const ToolRequest& tools, llm::ToolCallSyntax syntax) {
  if (tools.choice != ToolRequest::Choice::Required && tools.choice != ToolRequest::Choice::Named)
    return nullptr;
  std::string gbnf;
  try {
    gbnf = llm::tool_call_gbnf(syntax, tools.tools, tools.name);
  } catch (const Error& e) {
    fail(400, fmt::format("'tool_choice': {}", e.what()), "invalid_tools");
  }
  return compile_grammar(gbnf, "'tools'");
}

std::vector<llm::Token> token_ids(const json& ids, const char* key, size_t n_vocab) {
  std::vector<llm::Token> tokens;
  tokens.reserve(ids.size());
  for (const json& t : ids) {
    if (!t.is_number_integer())
      fail(400, fmt::format("'{}' token ids must be integers", key), "invalid_type");
    const auto id = checked_integer(t);
    if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_vocab)
      fail(400, fmt::format("token id {} is outside the vocabulary [0, {})", t.dump(), n_vocab),
           "invalid_value");
    tokens.push_back(static_cast<llm::Token>(*id));
  }
  return tokens;
}

std::vector<llm::Token> prompt_tokens(const json& body, const llm::Vocab& vocab) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) fail(400, "'prompt' is required", "missing_prompt");
  const json& p = *it;
  std::vector<llm::Token> tokens;
  if (p.is_string() || (p.is_array() && p.size() == 1 && p[0].is_string())) {
    const std::string text = p.is_string() ? p.get<std::string>() : p[0].get<std::string>();
    if (text.empty()) fail(400, "'prompt' is empty", "empty_prompt");
    tokens = vocab.encode(text, /*add_special=*/true);
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    tokens = token_ids(p, "prompt", vocab.size());
  } else if (p.is_array() && p.empty()) {
    fail(400, "'prompt' is empty", "empty_prompt");
  } else {
    fail(400, "'prompt' must be a string, an array of one string, or an array of token ids", "invalid_type");
  }
  return tokens;
}

json chat_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) fail(400, "'messages' is required", "missing_messages");
  if (!it->is_array()) fail(400, "'messages' must be an array", "invalid_type");
  if (it->empty()) fail(400, "'messages' is empty", "empty_messages");
  json messages = *it;
  for (json& m : messages) {
    if (!m.is_object()) fail(400, "each message must be an object", "invalid_type");
    if (m.contains("function_call") && !m["function_call"].is_null())
      fail(400, "messages with 'function_call' are not supported (use tool_calls)", "unsupported_parameter");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) fail(400, "a message's 'tool_calls' must be an array", "invalid_type");
      for (json& call : m["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
            !call["function"].contains("name") || !call["function"]["name"].is_string())
          fail(400, "each tool call must be an object with a 'function' that has a string 'name'",
               "invalid_type");
        json& args = call["function"]["arguments"];
        if (args.is_string()) {
          json parsed = json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_discarded() || !parsed.is_object())
            fail(400, "a tool call's 'arguments' must be a JSON object (or its text)", "invalid_value");
          args = std::move(parsed);
        } else if (args.is_null()) {
          args = json::object();
        } else if (!args.is_object()) {
          fail(400, "a tool call's 'arguments' must be a JSON object (or its text)", "invalid_type");
        }
      }
    }
    auto content = m.find("content");
    if (content == m.end() || !content->is_array()) continue;
    // Content parts: the text parts' text, in order.
    std::string text;
    for (const json& part : *content) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
        fail(400, "each content part must be an object with a string 'type'", "invalid_type");
      const std::string type = part["type"];
      if (type != "text")
        fail(400,
             fmt::format("content parts of type '{}' are not supported (this server reads text only)",
                         type.substr(0, 64)),
             "unsupported_content");
      if (!part.contains("text") || !part["text"].is_string())
        fail(400, "a text content part needs a string 'text'", "invalid_type");
      text += part["text"].get<std::string>();
    }
    *content = text;
  }
  return messages;
}

}  // namespace tessera::server
