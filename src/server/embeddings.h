#pragma once
// POST /v1/embeddings: the request (OpenAI's shape), the worker that evaluates it on a Session of
// its own in embeddings mode (never on the connection or route threads), and the answer's body.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/llm/embeddings.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

namespace tessera::server {

// Inputs one request may hold (OpenAI's limit), and tokens in all (413 beyond).
inline constexpr size_t kMaxEmbeddingInputs = 2048;
inline constexpr int64_t kMaxEmbeddingTokens = 65536;

struct EmbeddingRequest {
  std::vector<std::vector<llm::Token>> inputs;
  llm::Pooling pooling = llm::Pooling::Mean;
  bool base64 = false;
  int64_t total_tokens = 0;
};

// Reads `input` (a string, an array of strings, an array of token ids or an array of arrays of
// token ids; strings tokenized with the vocabulary's BOS/CLS and EOS/SEP as it asks, special
// tokens not parsed), `model` (any string), `encoding_format` ("float" or "base64"), `dimensions`
// (only n_embd: we do not shorten vectors), `user`, and Tessera's `pooling` ("mean", "cls",
// "last", "none"; default `pooling`). An unknown member, a wrong type or an empty input is a 400
// naming it; more than kMaxEmbeddingInputs inputs or one longer than `max_tokens_per_input` is a
// 400, more than kMaxEmbeddingTokens tokens in all a 413.
EmbeddingRequest parse_embeddings(const nlohmann::json& body, const llm::Vocab& vocab, int64_t n_embd,
                                  int64_t max_tokens_per_input, llm::Pooling pooling);

// The answer: {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}. An embedding is an array of floats or, with
// base64, its little-endian float32 bytes in base64; with Pooling::None, an array of per-token
// arrays (base64: every token's floats in order). 500 when a vector is not finite.
std::string embeddings_body(const std::vector<std::vector<float>>& vectors, int64_t n_embd, bool base64,
                            const std::string& model, int64_t prompt_tokens);

// Base64 (RFC 4648, padded) of bytes.
std::string base64_encode(const void* data, size_t n);

// Evaluates embedding requests one at a time on a thread of its own, with a Session in embeddings
// mode made on first use (its context: the model's training context, at most 4096; encoders
// evaluate each input in one batch).
class Embedder {
 public:
  struct Result {
    std::vector<std::vector<float>> vectors;  // one per input, in order (each L2-normalized)
    std::string error;                        // non-empty: the request failed
  };
  using Done = std::function<void(Result)>;

  Embedder(const llm::Model& model, int n_threads, size_t max_queue);
  ~Embedder();
  Embedder(const Embedder&) = delete;
  Embedder& operator=(const Embedder&) = delete;

  // The longest input the session takes.
  int64_t max_tokens_per_input() const noexcept { return n_ctx_; }
  // Queues a request; `done` runs on the worker thread. False when the queue is full. A set
  // `cancelled` flag skips what is left of the request (done then gets an error).
  bool submit(std::vector<std::vector<llm::Token>> inputs, llm::Pooling pooling,
              std::shared_ptr<std::atomic<bool>> cancelled, Done done);
  // Fails every queued request, finishes the running one and joins the thread. Idempotent.
  void shutdown();

 private:
  struct Job {
    std::vector<std::vector<llm::Token>> inputs;
    llm::Pooling pooling;
    std::shared_ptr<std::atomic<bool>> cancelled;
    Done done;
  };
  void run();

  const llm::Model& model_;
  const int n_threads_;
  const size_t max_queue_;
  const int64_t n_ctx_;
  std::unique_ptr<llm::Session> session_;  // the worker's only
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::server
