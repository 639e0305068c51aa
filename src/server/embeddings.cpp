// POST /v1/embeddings: request, worker and answer (embeddings.h).
#include "server/embeddings.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "server/api.h"
#include "tessera/error.h"

namespace tessera::server {

using nlohmann::json;

namespace {

std::vector<llm::Token> text_input(const json& text, const std::string& where, const llm::Vocab& vocab) {
  const std::string& s = text.get_ref<const std::string&>();
  if (s.empty()) fail(400, fmt::format("'{}' is an empty string", where), "empty_input");
  return vocab.encode(s, /*add_special=*/true);
}

std::vector<llm::Token> id_input(const json& ids, const std::string& where, const llm::Vocab& vocab) {
  if (ids.empty()) fail(400, fmt::format("'{}' is an empty array of token ids", where), "empty_input");
  return token_ids(ids, where.c_str(), vocab.size());
}

}  // namespace

EmbeddingRequest parse_embeddings(const json& body, const llm::Vocab& vocab, int64_t n_embd,
                                  int64_t max_tokens_per_input, llm::Pooling pooling) {
  static const char* const kKnown[] = {"input", "model", "encoding_format", "dimensions", "user", "pooling"};
  for (auto it = body.begin(); it != body.end(); ++it)
    if (std::find(std::begin(kKnown), std::end(kKnown), it.key()) == std::end(kKnown))
      fail(400, fmt::format("unknown parameter '{}'", it.key().substr(0, 64)), "unknown_parameter");
  EmbeddingRequest r;
  r.pooling = pooling;
  get_string(body, "model");  // any name: the server has one model
  get_string(body, "user");
  if (const auto format = get_string(body, "encoding_format")) {
    if (*format == "base64")
      r.base64 = true;
    else if (*format != "float")
      fail(
          400,
          fmt::format("'encoding_format' must be \"float\" or \"base64\", not \"{}\"", format->substr(0, 32)),
          "invalid_value");
  }
  if (const auto dims = get_int(body, "dimensions"); dims && *dims != n_embd)
    fail(400,
         fmt::format(
             "'dimensions' {} is not supported: this model's embeddings have {} (they are not shortened)",
             *dims, n_embd),
         "unsupported_parameter");
  if (const auto p = get_string(body, "pooling")) {
    const auto parsed = llm::parse_pooling(*p);
    if (!parsed)
      fail(400,
           fmt::format("'pooling' must be \"mean\", \"cls\", \"last\" or \"none\", not \"{}\"",
                       p->substr(0, 32)),
           "invalid_value");
    r.pooling = *parsed;
  }

  const auto in = body.find("input");
  if (in == body.end() || in->is_null()) fail(400, "'input' is required", "missing_input");
  if (in->is_string()) {
    r.inputs.push_back(text_input(*in, "input", vocab));
  } else if (in->is_array()) {
    if (in->empty()) fail(400, "'input' is an empty array", "empty_input");
    const json& first = (*in)[0];
    if (first.is_number()) {
      r.inputs.push_back(id_input(*in, "input", vocab));  // one input of token ids
    } else {
      if (in->size() > kMaxEmbeddingInputs)
        fail(400,
             fmt::format("'input' has {} items; at most {} are embedded per request", in->size(),
                         kMaxEmbeddingInputs),
             "too_many_inputs");
      for (size_t i = 0; i < in->size(); ++i) {
        const json& item = (*in)[i];
        const std::string where = fmt::format("input[{}]", i);
        if (item.is_string())
          r.inputs.push_back(text_input(item, where, vocab));
        else if (item.is_array())
          r.inputs.push_back(id_input(item, where, vocab));
        else
          fail(400, fmt::format("'{}' must be a string or an array of token ids", where), "invalid_type");
      }
    }
  } else {
    fail(400,
         "'input' must be a string, an array of strings, an array of token ids or an array of such arrays",
         "invalid_type");
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(r.inputs[i].size());
    if (n > max_tokens_per_input)
      fail(400,
           fmt::format("input {} has {} tokens, more than the {} an embedding takes", i, n,
                       max_tokens_per_input),
           "context_length_exceeded");
    r.total_tokens += n;
  }
  if (r.total_tokens > kMaxEmbeddingTokens)
    fail(413,
         fmt::format("the inputs have {} tokens in all, more than the {} one request may embed: send fewer",
                     r.total_tokens, kMaxEmbeddingTokens),
         "too_many_tokens");
  return r;
}

std::string base64_encode(const void* data, size_t n) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < n) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string embeddings_body(const std::vector<std::vector<float>>& vectors, int64_t n_embd, bool base64,
                            const std::string& model, int64_t prompt_tokens) {
  static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
  // Written as text: a JSON tree holds each float as a double and prints 17 digits of it.
  std::string out = "{\"object\":\"list\",\"data\":[";
  const size_t row = static_cast<size_t>(n_embd);
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    if (!std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); }))
      fail(500, fmt::format("the embedding of input {} is not finite", i), "internal_error", "server_error");
    if (i > 0) out += ',';
    out += fmt::format("{{\"object\":\"embedding\",\"index\":{},\"embedding\":", i);
    if (base64) {
      out += '"' + base64_encode(v.data(), v.size() * sizeof(float)) + '"';
    } else {
      const bool per_token = v.size() != row;  // Pooling::None: one row per token
      if (per_token) out += '[';
      for (size_t o = 0; o < v.size(); o += row) {
        if (o > 0) out += ',';
        out += '[';
        for (size_t j = 0; j < row; ++j) {
          if (j > 0) out += ',';
          fmt::format_to(std::back_inserter(out), "{}", v[o + j]);
        }
        out += ']';
      }
      if (per_token) out += ']';
    }
    out += '}';
  }
  out += fmt::format("],\"model\":{},\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{}}}}}",
                     dump(json(model)), prompt_tokens, prompt_tokens);
  return out;
}

namespace {

int64_t embedding_context(const llm::Model& model) {
  return std::min<int64_t>(model.hparams().n_ctx_train, 4096);
}

}  // namespace

Embedder::Embedder(const llm::Model& model, int n_threads, size_t max_queue)
    : model_(model), n_threads_(n_threads), max_queue_(max_queue), n_ctx_(embedding_context(model)) {
  thread_ = std::thread([this] { run(); });
}

Embedder::~Embedder() { shutdown(); }

bool Embedder::submit(std::vector<std::vector<llm::Token>> inputs, llm::Pooling pooling,
                      std::shared_ptr<std::atomic<bool>> cancelled, Done done) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queue_) return false;
    queue_.push_back({std::move(inputs), pooling, std::move(cancelled), std::move(done)});
  }
  cv_.notify_one();
  return true;
}

void Embedder::shutdown() {
  std::deque<Job> left;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    left.swap(queue_);
  }
  cv_.notify_all();
  for (Job& j : left) j.done({{}, "the server is stopping"});
  if (thread_.joinable()) thread_.join();
}

void Embedder::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Result result;
    try {
      if (!session_) {
        llm::SessionOptions so;
        so.n_ctx = n_ctx_;
        so.n_threads = n_threads_;
        so.embeddings = true;
        // An encoder's attention sees the whole sequence: every input in one batch.
        if (model_.hparams().encoder) so.n_batch = n_ctx_;
        session_ = std::make_unique<llm::Session>(model_, so);
      }
      for (const auto& tokens : job.inputs) {
        if (job.cancelled && job.cancelled->load()) {
          result.error = "cancelled";
          break;
        }
        result.vectors.push_back(llm::embed(*session_, tokens, job.pooling, /*normalize=*/true));
      }
    } catch (const std::exception& e) {
      result.error = e.what();
      if (session_) session_->cache().clear();
    }
    if (!result.error.empty()) result.vectors.clear();
    job.done(std::move(result));
  }
}

}  // namespace tessera::server
