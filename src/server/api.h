#pragma once
// The OpenAI request and response shapes: JSON bodies to generation parameters (with errors in
// OpenAI's shape), and generation results to JSON.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/llm/engine.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/tool_calls.h"
#include "tessera/llm/vocab.h"

namespace tessera::server {

// A request the server refuses: HTTP status and OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;
};
[[noreturn]] void fail(int status, std::string message, std::string code = {},
                       std::string type = "invalid_request_error");
nlohmann::json error_body(const ApiError& e);

// JSON nested deeper than this is refused while it is parsed (every later walk of a request is
// recursive: conversion, the chat template, serialization).
inline constexpr int kMaxJsonDepth = 64;
// The body as a JSON object; malformed JSON, a non-object or nesting beyond kMaxJsonDepth is a 400.
nlohmann::json parse_body(const std::string& body);

// What /v1/completions and /v1/chat/completions share.
struct GenerationRequest {
  llm::GenerationParams params;
  std::optional<int> max_tokens;  // unset: as much as the context allows
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // What isolates this request's prefix cache from other clients' (with the client's address and
  // API key): `user` and `cache_salt`.
  std::string cache_salt;
};
// Reads max_tokens, temperature, top_p, top_k, min_p, repeat_penalty, presence_penalty,
// frequency_penalty, logit_bias (ids inside [0, n_vocab)), seed, stop, ignore_eos, stream,
// stream_options, n, user, cache_salt, and the output constraint: response_format (text,
// json_object, json_schema {name, schema, strict}), llama.cpp's `grammar` (GBNF) or `json_schema`
// (at most one; a bad grammar or schema is a 400 naming why). `raw_body` is the body's text, read
// again for a schema so that its properties keep their order (empty: the sorted `body`). A
// parameter of OpenAI's API we do not implement (tools, logprobs, echo, best_of > 1, suffix, ...)
// and any unknown parameter is a 400 naming it. Wrong types are 400, values out of range 422.
GenerationRequest parse_generation(const nlohmann::json& body, bool chat, size_t n_vocab,
                                   std::string_view raw_body = {});

// A chat request's tools: OpenAI's `tools` (functions only) and `tool_choice`.
struct ToolRequest {
  enum class Choice { Auto, None, Required, Named };
  nlohmann::ordered_json tools;  // as given (the schemas' properties in the request's order)
  Choice choice = Choice::Auto;
  std::string name;  // Named: the function that must be called
};
// `tools` (an array of {"type": "function", "function": {"name", "description"?, "parameters"?}},
// names unique) and `tool_choice` ("auto", "none", "required", or {"type": "function",
// "function": {"name": ...}} naming one of them); nullopt without tools (tool_choice then must be
// absent or "none"). Anything else is a 400 naming it.
std::optional<ToolRequest> parse_tools(const nlohmann::json& body, std::string_view raw_body = {});
// The grammar of exactly one call for tool_choice "required" or a named function (nullptr for
// auto and none); 400 when the template's syntax is not one Tessera reads or a schema cannot be
// enforced.
std::shared_ptr<const llm::Grammar> tool_call_grammar(const ToolRequest& tools, llm::ToolCallSyntax syntax);

// A JSON array of token ids (member `key` of the request) inside [0, n_vocab), else a 400.
std::vector<llm::Token> token_ids(const nlohmann::json& ids, const char* key, size_t n_vocab);
// /v1/completions' prompt: a string (tokenized with BOS as the vocabulary asks, special tokens
// not parsed), an array of one string, or an array of token ids inside the vocabulary; else a 400.
std::vector<llm::Token> prompt_tokens(const nlohmann::json& body, const llm::Vocab& vocab);
// /v1/chat/completions' messages: a non-empty array of objects with a string `role`; content
// given as parts (`[{"type": "text", "text": ...}]`) becomes the parts' text joined, any other
// part type (image_url, input_audio, ...) is a 400; an assistant's `tool_calls` reach the
// template with each function's `arguments` as a JSON object (OpenAI sends a string; templates
// write it with tojson), `function_call` is a 400; else the template judges.
nlohmann::json chat_messages(const nlohmann::json& body);

// Typed accessors: nullopt when the member is absent or null, 400 naming it when of another type.
std::optional<std::string> get_string(const nlohmann::json& body, const char* key);
std::optional<bool> get_bool(const nlohmann::json& body, const char* key);
std::optional<int64_t> get_int(const nlohmann::json& body, const char* key);
// A JSON number as a 64-bit integer; nullopt when it does not fit (never wrapped).
std::optional<int64_t> checked_integer(const nlohmann::json& value);
std::optional<double> get_number(const nlohmann::json& body, const char* key);

// A JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace tessera::server
