// The HTTP server: who may ask (access.h), routes, errors in OpenAI's shape, one log line per
// request, and the bridge from a request's Exchange to the engine's generations (pushed by the
// engine as tokens are sampled, never polled).
#include "tessera/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "core/check.h"
#include "server/access.h"
#include "server/api.h"
#include "server/chat.h"
#include "server/embeddings.h"
#include "server/listener.h"
#include "server/page.h"
#include "tessera/error.h"
#include "tessera/llm/engine.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"

namespace tessera::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Answers one request: its exchange and the headers every answer to it carries (CORS).
struct Reply {
  std::shared_ptr<Exchange> exchange;
  Headers headers;

  void json_body(int status, const json& body) const {
    exchange->respond({status, "application/json", dump(body), headers});
  }
  void error(const ApiError& e) const { json_body(e.status, error_body(e)); }
  void text(int status, std::string content_type, std::string body) const {
    exchange->respond({status, std::move(content_type), std::move(body), headers});
  }
};

HttpResponse error_response(const ApiError& e, Headers headers = {}) {
  return {e.status, "application/json", dump(error_body(e)), std::move(headers)};
}

struct Route {
  std::string path;
  std::vector<std::string> methods;  // HEAD is answered wherever GET is
  bool public_route = false;         // needs no API key
  std::function<void(const HttpRequest&, const Reply&)> handler;

  bool allows(const std::string& method) const {
    return std::find(methods.begin(), methods.end(), method) != methods.end() ||
           (method == "HEAD" && allows("GET")) || method == "OPTIONS";
  }
  std::string allow_header() const {
    std::string out;
    for (const std::string& m : methods) out += m + ", ";
    if (allows("GET")) out += "HEAD, ";
    return out + "OPTIONS";
  }
};

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  AccessPolicy access;
  std::vector<Route> routes;
  std::unique_ptr<HttpListener> http;
  std::thread loader;
  int port = 0;
  bool started = false, stopped = false;

  std::mutex load_mutex;
  std::condition_variable load_cv;
  bool load_finished = false;
  std::exception_ptr load_error;
  std::atomic<bool> ready{false};
  std::unique_ptr<llm::Model> model;
  std::optional<llm::Vocab> vocab;
  std::optional<ChatFormatter> chat;
  std::unique_ptr<llm::Engine> engine;  // nullptr: embeddings only
  std::unique_ptr<Embedder> embedder;
  llm::Pooling pooling = llm::Pooling::Mean;  // /v1/embeddings' default
  std::string model_name;

  std::mutex metrics_mutex;
  std::map<int, uint64_t> requests_by_status;

  // Requests admitted to a route and not yet ended (each exchange keeps an InFlight), and the drain.
  std::atomic<bool> draining{false};
  std::mutex flight_mutex;
  std::condition_variable flight_cv;
  int64_t in_flight = 0;
  struct InFlight {
    Impl& s;
    explicit InFlight(Impl& impl) : s(impl) {
      std::lock_guard lock(s.flight_mutex);
      ++s.in_flight;
    }
    ~InFlight() {
      std::lock_guard lock(s.flight_mutex);
      if (--s.in_flight == 0) s.flight_cv.notify_all();
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
  };
  std::atomic<uint64_t> next_id{1};

  void load();
  void install_routes();
  const Route* find_route(const std::string& path) const {
    for (const Route& r : routes)
      if (r.path == path) return &r;
    return nullptr;
  }
  std::optional<HttpResponse> admit(const HttpRequest& req);
  void handle(const HttpRequest& req, const std::shared_ptr<Exchange>& exchange);
  void log_request(const RequestLogEntry& entry);
  // `tools`: the syntax the reply's tool calls are read in (None: no tools, the reply is text).
  void generate(const HttpRequest& req, const Reply& reply, std::vector<llm::Token> prompt,
                const GenerationRequest& g, bool chat_api,
                llm::ToolCallSyntax tools = llm::ToolCallSyntax::None);
  std::string metrics_text();
  void require_model() const {
    if (!ready.load()) fail(503, "the model is loading", "loading", "server_error");
  }
  void require_engine() const {
    require_model();
    if (!engine)
      fail(501,
           model->hparams().encoder
               ? fmt::format(
                     "the model ('{}') is an embedding model: it generates nothing (use /v1/embeddings)",
                     model->hparams().arch)
               : std::string("the server was started with --embeddings: it serves /v1/embeddings only"),
           "not_supported", "not_supported_error");
  }
  void embeddings(const HttpRequest& req, const Reply& reply);
};

namespace {

// One generation's answer: takes what the engine pushes and writes it to the exchange (one JSON
// body at the end, or Server-Sent Events as the text comes). Every member runs on the exchange's
// strand. The engine's notification holds this object until the generation ends.
class GenerationReply : public std::enable_shared_from_this<GenerationReply> {
 public:
  GenerationReply(Reply reply, std::shared_ptr<llm::Generation> job, const GenerationRequest& g, bool chat,
                  std::string model, uint64_t id, int timeout_s, llm::ToolCallSyntax tools)
      : tools_(tools),
        tool_stream_(tools),
        reply_(std::move(reply)),
        job_(std::move(job)),
        chat_(chat),
        stream_(g.stream),
        include_usage_(g.include_usage),
        model_(std::move(model)),
        id_(fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", id)),
        created_(unix_time()),
        timed_out_error_{
            408, fmt::format("the request ran past the server's timeout of {} s (--timeout)", timeout_s),
            "timeout_error", "request_timeout"} {}

  void start(Clock::time_point deadline) {
    // The exchange owns this reply; everything else holds it weakly (no cycle through the job).
    const std::weak_ptr<GenerationReply> weak = weak_from_this();
    reply_.exchange->keep(shared_from_this());
    reply_.exchange->on_gone([weak] {
      if (auto self = weak.lock()) self->gone_ = true, self->job_->cancel();
    });
    reply_.exchange->at(deadline, [weak] {
      if (auto self = weak.lock()) self->timed_out_ = true, self->job_->cancel();
    });
    if (stream_) {
      Headers headers = reply_.headers;
      headers.emplace_back("Cache-Control", "no-cache");
      reply_.exchange->begin_stream(200, "text/event-stream", std::move(headers));
    }
    // A reply sent whole hears only of the end: no wake-up of the connection's thread per token.
    job_->subscribe(
        [weak, exchange = reply_.exchange] {
          exchange->post([weak] {
            if (auto self = weak.lock()) self->drain();
          });
        },
        stream_);
  }

 private:
  json usage(const llm::GenerationUpdate& u) const {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  }

  json chunk(const std::string& text, const char* finish) {
    json choice{{"index", 0}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
    if (chat_) {
      json delta = json::object();
      if (!sent_role_) delta["role"] = "assistant", sent_role_ = true;
      if (!text.empty() || finish == nullptr) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text, choice["logprobs"] = nullptr;
    }
    return {{"id", id_},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({choice})}};
  }

  void event(const json& j) { reply_.exchange->write("data: " + dump(j) + "\n\n"); }

  // A tool call as OpenAI writes it: a fresh id, the function's name and its arguments as text.
  // Mistral's templates accept only ids of 9 letters and digits; others get OpenAI's call_ form.
  json tool_call_json(const llm::ToolCall& call) const {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const bool mistral = tools_ == llm::ToolCallSyntax::Mistral;
    std::string id = mistral ? "" : "call_";
    for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
    return {
        {"id", id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  }

  // The finish reason: "tool_calls" when the reply is calls, else the engine's.
  static const char* finish_name(const llm::GenerationUpdate& u, const llm::ToolReply& tools) {
    return tools.calls.empty() ? llm::finish_reason_name(u.finish) : "tool_calls";
  }

  void drain() {
    if (finished_) return;
    const llm::GenerationUpdate u = job_->take();
    if (stream_) {
      for (const std::string& piece : u.pieces) {  // one event per piece
        if (tools_ == llm::ToolCallSyntax::None) {
          event(chunk(piece, nullptr));
        } else if (const std::string text = tool_stream_.push(piece); !text.empty()) {
          event(chunk(text, nullptr));  // text until what may become a call
        }
      }
    } else {
      text_ += u.text;
    }
    if (!u.done) return;
    finished_ = true;
    job_->subscribe({});
    finish(u);
  }

  void finish(const llm::GenerationUpdate& u) {
    Exchange& ex = *reply_.exchange;
    ex.log_tokens(u.prompt_tokens + u.completion_tokens);
    if (gone_) {
      ex.log_status(499);
      return stream_ ? ex.end_stream() : ex.respond({499, "", "", {}});
    }
    if (!stream_) {
      if (timed_out_) return reply_.error(timed_out_error_);
      if (u.finish == llm::FinishReason::Error)
        return reply_.error({500, u.error, "server_error", "generation_failed"});
      if (u.finish == llm::FinishReason::Cancelled)
        return reply_.error({503, "the generation was cancelled", "server_error", "cancelled"});
      llm::ToolReply tools = tools_ == llm::ToolCallSyntax::None ? llm::ToolReply{text_, {}}
                                                                 : llm::parse_tool_calls(tools_, text_);
      if (tools_ == llm::ToolCallSyntax::Harmony) tools.calls = u.tool_calls;
      json choice{{"index", 0}, {"finish_reason", finish_name(u, tools)}};
      if (chat_ && tools.calls.empty()) {
        choice["message"] = {{"role", "assistant"}, {"content", text_}};
      } else if (chat_) {
        json calls = json::array();
        for (const llm::ToolCall& call : tools.calls) calls.push_back(tool_call_json(call));
        choice["message"] = {{"role", "assistant"},
                             {"content", tools.content.empty() ? json(nullptr) : json(tools.content)},
                             {"tool_calls", calls}};
      }
      if (chat_ && !u.reasoning.empty()) choice["message"]["reasoning_content"] = u.reasoning;
      if (!chat_) choice["text"] = text_, choice["logprobs"] = nullptr;
      return reply_.json_body(200, {{"id", id_},
                                    {"object", chat_ ? "chat.completion" : "text_completion"},
                                    {"created", created_},
                                    {"model", model_},
                                    {"choices", json::array({choice})},
                                    {"usage", usage(u)}});
    }
    // A stream that has begun ends cleanly: an error event in OpenAI's shape, or the finish chunk
    // (and usage), then [DONE].
    if (timed_out_) {
      event(error_body(timed_out_error_));
    } else if (u.finish == llm::FinishReason::Error || u.finish == llm::FinishReason::Cancelled) {
      event(error_body({500, u.error.empty() ? "the generation was cancelled" : u.error, "server_error",
                        "generation_failed"}));
    } else {
      if (chat_ && !u.reasoning.empty()) {  // a Harmony reply's analysis, whole, after its answer
        json c = chunk("", nullptr);
        c["choices"][0]["delta"].erase("content");
        c["choices"][0]["delta"]["reasoning_content"] = u.reasoning;
        event(c);
      }
      llm::ToolReply tools;
      if (tools_ != llm::ToolCallSyntax::None) {
        tools = tool_stream_.finish();
        if (tools_ == llm::ToolCallSyntax::Harmony) tools.calls = u.tool_calls;
        if (!tools.content.empty()) event(chunk(tools.content, nullptr));
        for (size_t i = 0; i < tools.calls.size(); ++i) {
          json call = tool_call_json(tools.calls[i]);
          call["index"] = i;
          json c = chunk("", nullptr);
          c["choices"][0]["delta"].erase("content");
          c["choices"][0]["delta"]["tool_calls"] = json::array({call});
          event(c);
        }
      }
      json last = chunk("", finish_name(u, tools));
      if (include_usage_) {
        event(last);
        last = {{"id", id_},
                {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", json::array()},
                {"usage", usage(u)}};
      } else {
        last["usage"] = usage(u);  // harmless to clients that ignore it
      }
      event(last);
    }
    ex.write("data: [DONE]\n\n");
    ex.end_stream();
  }

  const llm::ToolCallSyntax tools_;  // None: the reply is text
  llm::ToolCallStream tool_stream_;
  Reply reply_;
  std::shared_ptr<llm::Generation> job_;
  const bool chat_, stream_, include_usage_;
  const std::string model_, id_;
  const int64_t created_;
  const ApiError timed_out_error_;
  std::string text_;
  bool sent_role_ = false, finished_ = false, gone_ = false, timed_out_ = false;
};

}  // namespace

llm::EngineOptions engine_options(const ServerOptions& options) {
  llm::EngineOptions eo;
  eo.n_slots = options.n_slots;
  eo.n_ctx = options.n_ctx;
  eo.n_threads = options.n_threads;
  eo.max_queue = options.max_queue;
  eo.prompt_chunk = options.prompt_chunk;
  return eo;
}

void Server::Impl::load() {
  try {
    llm::LoadOptions lo;
    lo.n_gpu_layers = opt.n_gpu_layers;
    lo.device = opt.device;
    lo.split_mode = opt.split_layers ? llm::SplitMode::Layer : llm::SplitMode::None;
    lo.tensor_split = opt.tensor_split;
    if (opt.pipeline) {
      if (opt.embeddings_only)
        tessera::raise(ErrorCode::Unsupported,
                       "--embeddings is not served by a pipeline (--pipeline): embeddings need every layer "
                       "in one process");
      lo.stage = opt.pipeline->layers;
    }
    model = llm::Model::load(opt.model_path, lo);
    vocab.emplace(llm::Vocab::from_gguf(*model->file()));
    chat.emplace(ChatFormatter::create(*model->file(), *vocab, opt.chat_template_file));
    pooling = llm::default_pooling(*model);
    if (!opt.pooling.empty()) {
      const auto p = llm::parse_pooling(opt.pooling);
      if (!p)
        tessera::raise(ErrorCode::InvalidArgument, "pooling '{}' is none of mean, cls, last, none",
                       opt.pooling);
      pooling = *p;
    }
    if (!opt.embeddings_only && !model->hparams().encoder) {
      llm::EngineOptions eo = engine_options(opt);
      if (opt.pipeline) eo.stage_link = opt.pipeline->link;
      engine = std::make_unique<llm::Engine>(*model, *vocab, eo);
    }
    if (opt.pipeline) {
      if (opt.pipeline->wait_for_stages) opt.pipeline->wait_for_stages();
    } else {
      embedder = std::make_unique<Embedder>(*model, opt.n_threads, opt.max_queue);
    }
    model_name = std::filesystem::path(opt.model_path).filename().string();
    ready.store(true);
  } catch (...) {
    std::lock_guard lock(load_mutex);
    load_error = std::current_exception();
  }
  {
    std::lock_guard lock(load_mutex);
    load_finished = true;
  }
  load_cv.notify_all();
}

void Server::Impl::log_request(const RequestLogEntry& e) {
  {
    std::lock_guard lock(metrics_mutex);
    ++requests_by_status[e.status];
  }
  // What the client sent is escaped and bounded: it cannot forge log lines or send escapes.
  const std::string line = fmt::format("{} {} {} tokens={} {:.1f} ms", escape_for_log(e.method, 32),
                                       escape_for_log(e.path), e.status, e.tokens, e.ms);
  if (opt.log)
    opt.log(line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

std::optional<HttpResponse> Server::Impl::admit(const HttpRequest& req) {
  if (!access.host_allowed(req))
    return error_response({403, "the Host header does not name this server (see --allowed-hosts)",
                           "invalid_request_error", "host_not_allowed"});
  const auto origin = req.header("origin");
  if (origin && !access.origin_allowed(*origin, req))
    return error_response({403, "requests from this origin are not allowed (see --cors-origin)",
                           "invalid_request_error", "origin_not_allowed"});
  Headers cors = access.cors_headers(req);
  const Route* route = find_route(req.path);
  if (route == nullptr)
    return error_response(
        {404, fmt::format("no route {}", escape_for_log(req.path)), "invalid_request_error", "not_found"},
        cors);
  if (!route->allows(req.method)) {
    cors.emplace_back("Allow", route->allow_header());
    return error_response(
        {405, fmt::format("{} does not answer {}", route->path, escape_for_log(req.method, 32)),
         "invalid_request_error", "method_not_allowed"},
        cors);
  }
  if (req.method == "OPTIONS") {
    // A CORS preflight (from an allowed origin: checked above) or a plain question.
    cors.emplace_back("Allow", route->allow_header());
    if (origin) {
      cors.emplace_back("Access-Control-Allow-Methods", route->allow_header());
      cors.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
      cors.emplace_back("Access-Control-Max-Age", "600");
    }
    return HttpResponse{204, "", "", cors};
  }
  if (draining.load() && route->path != "/health" && route->path != "/metrics")
    return error_response(
        {503, "the server is shutting down: it finishes the requests it has and takes no new ones",
         "server_error", "draining"},
        cors);
  if (!route->public_route && !access.authorized(req)) {
    cors.emplace_back("WWW-Authenticate", "Bearer");
    return error_response({401, "a valid API key is required (Authorization: Bearer <key>)",
                           "authentication_error", "invalid_api_key"},
                          cors);
  }
  if (req.method == "POST") {
    const auto type = req.header("content-type");
    const std::string_view media = type ? type->substr(0, type->find(';')) : std::string_view();
    std::string lowered(media);
    std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    while (!lowered.empty() && lowered.back() == ' ') lowered.pop_back();
    if (lowered != "application/json")
      return error_response({415, "the request body must be JSON sent as Content-Type: application/json",
                             "invalid_request_error", "unsupported_media_type"},
                            cors);
    if (const auto enc = req.header("content-encoding"); enc && *enc != "identity")
      return error_response({415,
                             fmt::format("Content-Encoding '{}' is not supported: send the body uncompressed",
                                         escape_for_log(*enc, 32)),
                             "invalid_request_error", "unsupported_media_type"},
                            cors);
  }
  return std::nullopt;
}

void Server::Impl::handle(const HttpRequest& req, const std::shared_ptr<Exchange>& exchange) {
  const Reply reply{exchange, access.cors_headers(req)};
  exchange->keep(std::make_shared<InFlight>(*this));
  try {
    find_route(req.path)->handler(req, reply);
  } catch (const ApiError& e) {
    reply.error(e);
  } catch (const Error& e) {
    reply.error({400, e.what(), "invalid_request_error", "invalid_value"});
  } catch (const std::exception& e) {
    reply.error({500, e.what(), "server_error", "internal_error"});
  }
}

void Server::Impl::generate(const HttpRequest& req, const Reply& reply, std::vector<llm::Token> prompt,
                            const GenerationRequest& g, bool chat_api, llm::ToolCallSyntax tools) {
  const int64_t ctx = engine->slot_ctx();
  if (static_cast<int64_t>(prompt.size()) > ctx)
    fail(400, fmt::format("the prompt has {} tokens, more than the context of {}", prompt.size(), ctx),
         "context_length_exceeded");
  if (g.max_tokens && *g.max_tokens > ctx)
    fail(400, fmt::format("'max_tokens' {} is beyond the context of {}", *g.max_tokens, ctx),
         "context_length_exceeded");
  llm::GenerationParams params = g.params;
  params.max_tokens = g.max_tokens.value_or(static_cast<int>(ctx));
  // A finished slot's tokens are reused only by requests of the same scope: the same client
  // address, API key, `user` and `cache_salt`. Nothing another scope cached is observable.
  params.cache_scope = req.remote_address + "\n" + AccessPolicy::bearer_token(req) + "\n" + g.cache_salt;
  std::shared_ptr<llm::Generation> job = engine->submit(std::move(prompt), params);
  if (!job)
    fail(503, "the server is busy: every slot is in use and the queue is full", "queue_full", "server_error");
  auto answer = std::make_shared<GenerationReply>(reply, std::move(job), g, chat_api, model_name,
                                                  next_id.fetch_add(1), opt.timeout_s, tools);
  // --timeout bounds the whole request (waiting for a slot included), not only each socket read.
  answer->start(Clock::now() + std::chrono::seconds(opt.timeout_s));
}

void Server::Impl::embeddings(const HttpRequest& req, const Reply& reply) {
  require_model();
  if (!embedder)
    fail(501, "embeddings are not served by a pipeline (--pipeline): they need every layer in one process",
         "not_supported", "not_supported_error");
  const json body = parse_body(req.body);
  EmbeddingRequest r =
      parse_embeddings(body, *vocab, model->hparams().n_embd, embedder->max_tokens_per_input(), pooling);
  // The worker evaluates; the answer is written from its thread (Exchange::respond may be called
  // from any thread). A client that leaves stops what is left of its inputs.
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  reply.exchange->on_gone([cancelled] { cancelled->store(true); });
  const int64_t n_embd = model->hparams().n_embd;
  const int64_t tokens = r.total_tokens;
  const bool base64 = r.base64;
  const bool submitted = embedder->submit(
      std::move(r.inputs), r.pooling, cancelled,
      [reply, n_embd, tokens, base64, name = model_name, cancelled](Embedder::Result result) {
        Exchange& ex = *reply.exchange;
        ex.log_tokens(static_cast<int>(tokens));
        if (cancelled->load()) {
          ex.log_status(499);
          return ex.respond({499, "", "", {}});
        }
        if (!result.error.empty())
          return reply.error({500, result.error, "server_error", "embedding_failed"});
        try {
          reply.text(200, "application/json", embeddings_body(result.vectors, n_embd, base64, name, tokens));
        } catch (const ApiError& e) {
          reply.error(e);
        }
      });
  if (!submitted) fail(503, "the server is busy: the embeddings queue is full", "queue_full", "server_error");
}

std::string Server::Impl::metrics_text() {
  std::string out;
  out += "# HELP tessera_requests_total HTTP requests answered, by status.\n";
  out += "# TYPE tessera_requests_total counter\n";
  {
    std::lock_guard lock(metrics_mutex);
    for (const auto& [status, n] : requests_by_status)
      out += fmt::format("tessera_requests_total{{status=\"{}\"}} {}\n", status, n);
  }
  if (!engine) return out;
  const llm::EngineStats s = engine->stats();
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  metric("tessera_prompt_tokens_total", "counter", "Prompt tokens decoded (reused prefixes not counted).",
         s.prompt_tokens);
  metric("tessera_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  metric("tessera_decode_steps_total", "counter", "Batches decoded (one per engine step).", s.steps);
  metric("tessera_tokens_per_second", "gauge", "Tokens decoded per second of decode time, since the start.",
         s.decode_seconds > 0 ? static_cast<double>(s.prompt_tokens + s.generated_tokens) / s.decode_seconds
                              : 0.0);
  metric("tessera_active_slots", "gauge", "Slots generating now.", s.active_slots);
  {
    std::lock_guard lock(flight_mutex);  // (this /metrics request itself is one of them)
    metric("tessera_requests_in_flight", "gauge", "Requests admitted and not yet answered in full.",
           in_flight);
  }
  metric("tessera_draining", "gauge", "1 while the server drains before it stops.", draining.load() ? 1 : 0);
  metric("tessera_slots", "gauge", "Slots in all.", engine->n_slots());
  metric("tessera_queue_depth", "gauge", "Requests waiting for a slot.", s.queue_depth);
  metric("tessera_kv_cells_used", "gauge", "KV cache cells holding a sequence.", s.kv_cells_used);
  metric("tessera_kv_cells", "gauge", "KV cache cells in all.", s.kv_cells);
  metric("tessera_activation_bytes", "gauge", "Memory for intermediates, grown to the largest step so far.",
         s.activation_bytes);
  return out;
}

void Server::Impl::install_routes() {
  routes.push_back({"/health", {"GET"}, true, [this](const HttpRequest&, const Reply& reply) {
                      if (draining.load()) return reply.json_body(503, {{"status", "draining"}});
                      if (ready.load()) return reply.json_body(200, {{"status", "ok"}});
                      bool failed;
                      {
                        std::lock_guard lock(load_mutex);
                        failed = load_error != nullptr;
                      }
                      reply.json_body(503, {{"status", failed ? "error" : "loading"}});
                    }});
  routes.push_back({"/", {"GET"}, true, [](const HttpRequest&, const Reply& reply) {
                      reply.text(200, "text/html; charset=utf-8", std::string(chat_page()));
                    }});
  routes.push_back({"/v1/models", {"GET"}, false, [this](const HttpRequest&, const Reply& reply) {
                      require_model();
                      reply.json_body(
                          200, {{"object", "list"},
                                {"data", json::array({{{"id", model_name},
                                                       {"object", "model"},
                                                       {"created", unix_time()},
                                                       {"owned_by", "tessera"},
                                                       {"meta",
                                                        {{"n_ctx_slot", engine ? engine->slot_ctx() : 0},
                                                         {"n_slots", engine ? engine->n_slots() : 0},
                                                         {"n_vocab", vocab->size()},
                                                         {"n_embd", model->hparams().n_embd}}}}})}});
                    }});
  routes.push_back({"/v1/completions", {"POST"}, false, [this](const HttpRequest& req, const Reply& reply) {
                      require_engine();
                      const json body = parse_body(req.body);
                      GenerationRequest g = parse_generation(body, false, vocab->size(), req.body);
                      std::vector<llm::Token> prompt = prompt_tokens(body, *vocab);
                      generate(req, reply, std::move(prompt), g, false);
                    }});
  routes.push_back(
      {"/v1/chat/completions", {"POST"}, false, [this](const HttpRequest& req, const Reply& reply) {
         require_engine();
         const json body = parse_body(req.body);
         GenerationRequest g = parse_generation(body, true, vocab->size(), req.body);
         // Tools reach the template (as `tools`) and the reply is read for calls in the template's
         // syntax; "required" or a named function constrain the reply to one call.
         const std::optional<ToolRequest> tools = parse_tools(body, req.body);
         const bool use_tools = tools && tools->choice != ToolRequest::Choice::None;
         nlohmann::ordered_json variables = nlohmann::ordered_json::object();
         if (chat->harmony()) {  // gpt-oss: the answer is the final channel, the analysis reasoning_content
           if (!g.params.stop.empty())
             fail(400, "'stop' is not applied to a Harmony reply (gpt-oss): it would cut its channels",
                  "invalid_value");
           if (g.params.grammar)
             fail(
                 400,
                 "response_format and grammar are not applied to a Harmony reply (gpt-oss): its channels are "
                 "not text a grammar could constrain",
                 "invalid_value");
           g.params.harmony = true;
         }
         llm::ToolCallSyntax syntax = llm::ToolCallSyntax::None;
         if (use_tools) {
           syntax = chat->tool_syntax();
           if (syntax == llm::ToolCallSyntax::None)
             fail(
                 400,
                 "the model's chat template shows no tool call syntax this server reads (Hermes <tool_call>, "
                 "Llama 3 JSON, Mistral [TOOL_CALLS], Harmony): its calls could not be returned as "
                 "tool_calls",
                 "unsupported_tools");
           variables["tools"] = tools->tools;
           if (auto grammar = tool_call_grammar(*tools, syntax)) {
             if (g.params.grammar)
               fail(400,
                    "'tool_choice' that requires a call cannot be combined with response_format or a grammar",
                    "invalid_value");
             g.params.grammar = std::move(grammar);
           }
         }
         std::vector<llm::Token> prompt = chat->prompt(chat_messages(body), variables);
         generate(req, reply, std::move(prompt), g, true, syntax);
       }});
  routes.push_back({"/v1/embeddings", {"POST"}, false, [this](const HttpRequest& req, const Reply& reply) {
                      embeddings(req, reply);
                    }});
  routes.push_back({"/tokenize", {"POST"}, false, [this](const HttpRequest& req, const Reply& reply) {
                      require_model();
                      const json body = parse_body(req.body);
                      const auto content = get_string(body, "content");
                      if (!content) fail(400, "'content' (a string) is required", "missing_content");
                      const bool add_special = get_bool(body, "add_special").value_or(false);
                      const bool parse_special = get_bool(body, "parse_special").value_or(true);
                      const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
                      const auto tokens = vocab->encode(*content, add_special, parse_special);
                      // Written as text token by token: a JSON tree of a megabyte's tokens would
                      // take hundreds of bytes per token.
                      std::string out = "{\"tokens\":[";
                      for (size_t i = 0; i < tokens.size(); ++i) {
                        if (i > 0) out += ',';
                        if (with_pieces)
                          out += fmt::format("{{\"id\":{},\"piece\":{}}}", tokens[i],
                                             dump(json(vocab->token_to_piece(tokens[i], true))));
                        else
                          out += std::to_string(tokens[i]);
                      }
                      out += "]}";
                      reply.exchange->log_tokens(static_cast<int>(tokens.size()));
                      reply.text(200, "application/json", std::move(out));
                    }});
  routes.push_back({"/detokenize", {"POST"}, false, [this](const HttpRequest& req, const Reply& reply) {
                      require_model();
                      const json body = parse_body(req.body);
                      auto it = body.find("tokens");
                      if (it == body.end() || !it->is_array())
                        fail(400, "'tokens' (an array of ids) is required", "invalid_type");
                      const std::vector<llm::Token> ids = token_ids(*it, "tokens", vocab->size());
                      std::string text;
                      for (llm::Token t : ids) text += vocab->token_to_piece(t);
                      reply.exchange->log_tokens(static_cast<int>(ids.size()));
                      reply.json_body(200, {{"content", text}});
                    }});
  routes.push_back({"/metrics", {"GET"}, false, [this](const HttpRequest&, const Reply& reply) {
                      require_model();
                      reply.text(200, "text/plain; version=0.0.4", metrics_text());
                    }});
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(options); }

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  if (s.started) tessera::raise(ErrorCode::InvalidArgument, "the server is already started");
  if (s.opt.n_slots <= 0)
    tessera::raise(ErrorCode::InvalidArgument, "slots must be positive, got {}", s.opt.n_slots);
  if (s.opt.read_timeout_s <= 0)
    tessera::raise(ErrorCode::InvalidArgument, "the read timeout must be positive, got {}",
                   s.opt.read_timeout_s);
  if (s.opt.max_connections <= 0)
    tessera::raise(ErrorCode::InvalidArgument, "max connections must be positive, got {}",
                   s.opt.max_connections);
  s.access.allowed_hosts = AccessPolicy::hosts_for_address(s.opt.host, s.opt.allowed_hosts);
  s.access.cors_origins = s.opt.cors_origins;
  s.access.api_key = s.opt.api_key;
  s.install_routes();
  HttpLimits limits;
  limits.max_body_bytes = s.opt.max_body_bytes;
  limits.read_timeout = std::chrono::seconds(s.opt.read_timeout_s);
  limits.max_connections = s.opt.max_connections;
  HttpHandlers handlers;
  handlers.admit = [&s](const HttpRequest& req) { return s.admit(req); };
  handlers.handle = [&s](const HttpRequest& req, const std::shared_ptr<Exchange>& ex) { s.handle(req, ex); };
  handlers.log = [&s](const RequestLogEntry& e) { s.log_request(e); };
  s.http = std::make_unique<HttpListener>(limits, std::move(handlers));
  s.port = s.http->bind(s.opt.host, s.opt.port);
  s.started = true;
  // Two threads move the bytes of every connection; the routes' work (parsing, tokenizing,
  // templates) runs on a few workers so that a slow one never holds the sockets.
  s.http->start(2, 4);
  s.loader = std::thread([&s] { s.load(); });
}

void Server::wait_loaded() {
  Impl& s = *impl_;
  std::unique_lock lock(s.load_mutex);
  s.load_cv.wait(lock, [&] { return s.load_finished; });
  if (s.load_error) std::rethrow_exception(s.load_error);
}

int Server::port() const noexcept { return impl_->port; }

bool Server::drain(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return true;
  s.draining.store(true);
  std::unique_lock lock(s.flight_mutex);
  return s.flight_cv.wait_for(lock, grace, [&] { return s.in_flight == 0; });
}

void Server::stop() {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  if (s.loader.joinable()) s.loader.join();
  // Generations end first (their answers are queued), then the connections and threads stop.
  if (s.engine) s.engine->shutdown();
  if (s.embedder) s.embedder->shutdown();
  s.http->stop();
}

}  // namespace tessera::server
