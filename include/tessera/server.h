#pragma once
// An OpenAI-compatible HTTP server over the continuous-batching engine (llm/engine.h):
// /v1/completions, /v1/chat/completions (streamed as Server-Sent Events or not), /v1/models,
// /tokenize, /detokenize, /health and /metrics. Apps may embed it; `tessera serve` is a thin CLI.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/llm/engine.h"
#include "tessera/llm/model.h"

namespace tessera::server {

// The server as the first stage of a pipeline (`tessera serve --pipeline`, mpi/pipeline.h): it loads
// only `layers`, its engine sends each step's hidden states down `link` (nullptr: a pipeline of one
// stage), and /health says ready once `wait_for_stages` returns (the other stages have loaded).
struct PipelineStage {
  llm::LayerRange layers;
  llm::StageLink* link = nullptr;
  std::function<void()> wait_for_stages;
};

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                 // 0: any free port (see Server::port)
  int n_slots = 1;                 // sequences generated together
  int64_t n_ctx = 0;  // KV cells in all, shared by the slots (0: 4096 per slot, capped at the model's)
  int n_threads = 0;  // CPU threads (0: all cores)
  int n_gpu_layers = 0;
  std::string device;               // or several, OpenCL0,OpenCL1
  bool split_layers = true;         // --split-mode layer (false: none, the first device only)
  std::vector<float> tensor_split;  // the devices' shares of the offloaded layers
  std::string api_key;              // non-empty: every route but /health needs "Authorization: Bearer <key>"
  std::string chat_template_file;   // empty: the model's tokenizer.chat_template
  size_t max_queue = 64;            // requests waiting for a slot; beyond, 503 at once
  int timeout_s =
      600;  // the longest a request may run, waiting for a slot included (past it: cancelled, 408)
  // A request's head and body must arrive within this many seconds (past it: 408, closed); idle
  // keep-alive connections close after it, and so does one that stops reading an answer.
  int read_timeout_s = 10;
  int max_connections = 512;                // open at once; beyond, 503 and close
  size_t max_body_bytes = size_t{1} << 20;  // larger bodies, chunked ones too: 413
  // Host names requests may name besides the listening address (loopback: also localhost,
  // 127.0.0.1, ::1); "*" allows any. A wildcard address (0.0.0.0) allows any unless this names some.
  std::vector<std::string> allowed_hosts;
  // Origins whose web pages may call the API (CORS); "*" allows every origin. Empty: only the
  // server's own page.
  std::vector<std::string> cors_origins;
  int64_t prompt_chunk = 128;  // prompt tokens read per step, all slots together
  // Serve embeddings only (llama.cpp's --embeddings): no generation engine (and no KV cache for
  // it); the completion routes answer 501. Encoder models (bert, nomic-bert) are always so.
  // /v1/embeddings answers either way, on a Session of its own made on first use.
  bool embeddings_only = false;
  // /v1/embeddings' default pooling ("mean", "cls", "last", "none"); empty: the file's
  // <arch>.pooling_type, else mean.
  std::string pooling;
  // One line per request (method, path, status, tokens, ms); unset: stderr.
  std::function<void(const std::string&)> log;
  // Set: the server is a pipeline's first stage. It serves no embeddings then (their model would
  // need every layer here): /v1/embeddings answers 501, and embeddings_only is an Error.
  std::optional<PipelineStage> pipeline;
};

// The engine a server with these options runs (the later stages of a pipeline make their sessions
// as it does: llm::Engine::make_session).
llm::EngineOptions engine_options(const ServerOptions& options);

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds (Error when the address cannot be bound) and serves in background threads; the model
  // loads in the background, /health answers 503 until it is ready.
  void start();
  // Blocks until the model is loaded; rethrows the load's Error when it failed.
  void wait_loaded();
  int port() const noexcept;  // the bound port
  // Graceful shutdown, as a load balancer expects: from now on /health answers 503 "draining" and
  // every new request but /health and /metrics a 503 (code "draining"), while the requests already
  // admitted (streams included) run to their end. Returns true once none is left, false when
  // `grace` passed first. stop() follows it.
  bool drain(std::chrono::milliseconds grace);
  // Stops accepting, cancels every generation and joins the threads. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::server
