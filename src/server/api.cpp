// Request parsing and validation for the OpenAI endpoints.
#include "server/api.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

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
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
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

std::optional<int64_t> get_int(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  // 5.0 is an integer too (JavaScript clients send numbers).
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  wrong_type(key, "an integer");
}

std::optional<double> get_number(const json& body, const char* key) {
  const json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number");
  return v->get<double>();
}

GenerationRequest parse_generation(const json& body, bool chat) {
  GenerationRequest r;
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
    const auto n_vocab = static_cast<int64_t>(vocab.size());
    for (const json& t : p) {
      if (!t.is_number_integer()) fail(400, "'prompt' token ids must be integers", "invalid_type");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= n_vocab)
        fail(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, n_vocab), "invalid_value");
      tokens.push_back(static_cast<llm::Token>(id));
    }
  } else if (p.is_array() && p.empty()) {
    fail(400, "'prompt' is empty", "empty_prompt");
  } else {
    fail(400, "'prompt' must be a string, an array of one string, or an array of token ids", "invalid_type");
  }
  return tokens;
}

const json& chat_messages(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) fail(400, "'messages' is required", "missing_messages");
  if (!it->is_array()) fail(400, "'messages' must be an array", "invalid_type");
  if (it->empty()) fail(400, "'messages' is empty", "empty_messages");
  return *it;
}

}  // namespace tessera::server
