// The HTTP server: routes, authentication, errors in OpenAI's shape, one log line per request,
// and the bridge from HTTP handlers (cpp-httplib's thread pool) to the engine's generations.
#include "tessera/server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/check.h"
#include "server/api.h"
#include "server/chat.h"
#include "server/connection.h"
#include "server/page.h"
#include "tessera/error.h"
#include "tessera/llm/engine.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"

namespace tessera::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// What the log line of the request this thread serves reports (handlers, content providers and
// the logger of one request run on one pool thread).
struct RequestLog {
  Clock::time_point start = Clock::now();
  int tokens = 0;
};
thread_local RequestLog t_log;

// Equal strings, in time that depends on their lengths only.
bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  httplib::Server http;
  std::thread listener, loader;
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
  std::unique_ptr<llm::Engine> engine;
  std::string model_name;

  std::mutex metrics_mutex;
  std::map<int, uint64_t> requests_by_status;
  std::atomic<uint64_t> next_id{1};

  void load();
  void install_routes();
  void log_request(const httplib::Request& req, const httplib::Response& res);
  // Runs a handler that needs the model: 503 while loading; errors become OpenAI's JSON.
  template <typename F>
  httplib::Server::Handler with_model(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!ready.load()) fail(503, "the model is loading", "loading", "server_error");
        f(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, {400, e.what(), "invalid_request_error", "invalid_value"});
      } catch (const std::exception& e) {
        send_error(res, {500, e.what(), "server_error", "internal_error"});
      }
    };
  }

  void generate(const httplib::Request& req, httplib::Response& res, std::vector<llm::Token> prompt,
                const GenerationRequest& g, bool chat_api);
  std::string metrics_text();
};

void Server::Impl::load() {
  try {
    llm::LoadOptions lo;
    lo.n_gpu_layers = opt.n_gpu_layers;
    lo.device = opt.device;
    model = llm::Model::load(opt.model_path, lo);
    vocab.emplace(llm::Vocab::from_gguf(*model->file()));
    chat.emplace(ChatFormatter::create(*model->file(), *vocab, opt.chat_template_file));
    llm::EngineOptions eo;
    eo.n_slots = opt.n_slots;
    eo.n_ctx = opt.n_ctx;
    eo.n_threads = opt.n_threads;
    eo.max_queue = opt.max_queue;
    eo.prompt_chunk = opt.prompt_chunk;
    engine = std::make_unique<llm::Engine>(*model, *vocab, eo);
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

void Server::Impl::log_request(const httplib::Request& req, const httplib::Response& res) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t_log.start).count();
  {
    std::lock_guard lock(metrics_mutex);
    ++requests_by_status[res.status];
  }
  const std::string line =
      fmt::format("{} {} {} tokens={} {:.1f} ms", req.method, req.path, res.status, t_log.tokens, ms);
  if (opt.log)
    opt.log(line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

void Server::Impl::generate(const httplib::Request& req, httplib::Response& res,
                            std::vector<llm::Token> prompt, const GenerationRequest& g, bool chat_api) {
  const int64_t ctx = engine->slot_ctx();
  if (static_cast<int64_t>(prompt.size()) > ctx)
    fail(400, fmt::format("the prompt has {} tokens, more than the context of {}", prompt.size(), ctx),
         "context_length_exceeded");
  if (g.max_tokens && *g.max_tokens > ctx)
    fail(400, fmt::format("'max_tokens' {} is beyond the context of {}", *g.max_tokens, ctx),
         "context_length_exceeded");
  llm::GenerationParams params = g.params;
  params.max_tokens = g.max_tokens.value_or(static_cast<int>(ctx));
  std::shared_ptr<llm::Generation> job = engine->submit(std::move(prompt), params);
  if (!job)
    fail(503, "the server is busy: every slot is in use and the queue is full", "queue_full", "server_error");

  const std::string id = fmt::format("{}-{}", chat_api ? "chatcmpl" : "cmpl", next_id.fetch_add(1));
  const int64_t created = unix_time();
  const std::string object = chat_api ? "chat.completion" : "text_completion";
  auto usage = [](const llm::GenerationUpdate& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  };
  auto watch = std::make_shared<ClientWatch>(req.remote_addr, req.remote_port, req.local_port);
  static constexpr auto kPoll = std::chrono::milliseconds(100);
  // --timeout bounds the whole request (waiting for a slot included), not only each socket read.
  const Clock::time_point deadline = t_log.start + std::chrono::seconds(opt.timeout_s);
  const ApiError timed_out{
      408, fmt::format("the request ran past the server's timeout of {} s (--timeout)", opt.timeout_s),
      "timeout_error", "request_timeout"};
  // Each wait for the engine ends by the deadline.
  auto poll_wait = [deadline] {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    return std::clamp(left, std::chrono::milliseconds(0), kPoll);
  };

  if (!g.stream) {
    llm::GenerationUpdate u;
    std::string text;
    do {
      if (watch->gone()) {
        job->cancel();
        job->wait();
        fail(499, "the client closed the connection", "cancelled");
      }
      if (Clock::now() >= deadline) {
        job->cancel();
        t_log.tokens = job->wait().completion_tokens;
        throw timed_out;
      }
      u = job->poll(poll_wait());
      text += u.text;
    } while (!u.done);
    t_log.tokens = u.prompt_tokens + u.completion_tokens;
    if (u.finish == llm::FinishReason::Error) fail(500, u.error, "generation_failed", "server_error");
    if (u.finish == llm::FinishReason::Cancelled)
      fail(503, "the generation was cancelled", "cancelled", "server_error");
    json choice{{"index", 0}, {"finish_reason", llm::finish_reason_name(u.finish)}};
    if (chat_api)
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    else
      choice["text"] = text, choice["logprobs"] = nullptr;
    send_json(res, 200,
              {{"id", id},
               {"object", object},
               {"created", created},
               {"model", model_name},
               {"choices", json::array({choice})},
               {"usage", usage(u)}});
    return;
  }

  // Server-Sent Events: a chunk per piece of text, the finish chunk, usage if asked, [DONE].
  struct StreamState {
    bool sent_role = false;
    bool finished = false;
  };
  auto state = std::make_shared<StreamState>();
  const std::string chunk_object = chat_api ? "chat.completion.chunk" : "text_completion";
  auto chunk = [=, this](const std::string& text, const char* finish) {
    json choice{{"index", 0}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
    if (chat_api) {
      json delta = json::object();
      if (!state->sent_role) delta["role"] = "assistant", state->sent_role = true;
      if (!text.empty() || finish == nullptr) delta["content"] = text;
      choice["delta"] = delta;
    } else {
      choice["text"] = text, choice["logprobs"] = nullptr;
    }
    return json{{"id", id},
                {"object", chunk_object},
                {"created", created},
                {"model", model_name},
                {"choices", json::array({choice})}};
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this, include_usage = g.include_usage](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string event = "data: " + dump(j) + "\n\n";
          return sink.write(event.data(), event.size());
        };
        if (watch->gone()) {
          job->cancel();
          return false;
        }
        if (Clock::now() >= deadline) {
          // The stream ends cleanly: an error event in OpenAI's shape, then [DONE].
          job->cancel();
          t_log.tokens = job->wait().completion_tokens;
          state->finished = true;
          send(error_body(timed_out));
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        }
        const llm::GenerationUpdate u = job->poll(poll_wait());
        for (const std::string& piece : u.pieces)  // one event per settled piece, as generated
          if (!send(chunk(piece, nullptr))) {
            job->cancel();
            return false;
          }
        if (!u.done) return true;
        t_log.tokens = u.prompt_tokens + u.completion_tokens;
        state->finished = true;
        if (u.finish == llm::FinishReason::Error || u.finish == llm::FinishReason::Cancelled) {
          send(error_body({500, u.error.empty() ? "the generation was cancelled" : u.error, "server_error",
                           "generation_failed"}));
        } else {
          json last = chunk("", llm::finish_reason_name(u.finish));
          if (include_usage) {
            send(last);
            last = {{"id", id},
                    {"object", chunk_object},
                    {"created", created},
                    {"model", model_name},
                    {"choices", json::array()},
                    {"usage", usage(u)}};
          } else {
            last["usage"] = usage(u);  // harmless to clients that ignore it
          }
          send(last);
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      },
      [job, state](bool) {
        if (!state->finished) job->cancel();  // the client went away mid-stream
      });
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
  metric("tessera_slots", "gauge", "Slots in all.", engine->n_slots());
  metric("tessera_queue_depth", "gauge", "Requests waiting for a slot.", s.queue_depth);
  metric("tessera_kv_cells_used", "gauge", "KV cache cells holding a sequence.", s.kv_cells_used);
  metric("tessera_kv_cells", "gauge", "KV cache cells in all.", s.kv_cells);
  metric("tessera_activation_bytes", "gauge", "Memory for intermediates, grown to the largest step so far.",
         s.activation_bytes);
  return out;
}

void Server::Impl::install_routes() {
  http.set_payload_max_length(opt.max_body_bytes);
  http.set_read_timeout(opt.timeout_s, 0);
  http.set_write_timeout(opt.timeout_s, 0);
  // Every generating request holds a pool thread; queued ones too. A few more for the rest.
  const size_t threads = static_cast<size_t>(opt.n_slots) + std::min<size_t>(opt.max_queue, 64) + 4;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_log = RequestLog{};
    if (opt.api_key.empty() || req.path == "/health" || (req.path == "/" && req.method == "GET"))
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    const bool ok =
        auth.rfind(bearer, 0) == 0 && constant_time_equal(auth.substr(bearer.size()), opt.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401, "a valid API key is required (Authorization: Bearer <key>)", "authentication_error",
                     "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (unknown route, body too large, malformed HTTP) get a JSON body.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                 httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404)
      send_error(res, {404, fmt::format("no route {} {}", req.method, req.path), "invalid_request_error",
                       "not_found"});
    else if (res.status == 413)
      send_error(res, {413, "the request body is too large", "invalid_request_error", "payload_too_large"});
    else
      send_error(res, {res.status, fmt::format("HTTP error {}", res.status), "invalid_request_error", {}});
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_logger(
      [this](const httplib::Request& req, const httplib::Response& res) { log_request(req, res); });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready.load()) {
      send_json(res, 200, {{"status", "ok"}});
    } else {
      bool failed;
      {
        std::lock_guard lock(load_mutex);
        failed = load_error != nullptr;
      }
      send_json(res, 503, {{"status", failed ? "error" : "loading"}});
    }
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page()), "text/html; charset=utf-8");
  });
  http.Get("/v1/models", with_model([this](const httplib::Request&, httplib::Response& res) {
             send_json(res, 200,
                       {{"object", "list"},
                        {"data", json::array({{{"id", model_name},
                                               {"object", "model"},
                                               {"created", unix_time()},
                                               {"owned_by", "tessera"},
                                               {"meta",
                                                {{"n_ctx_slot", engine->slot_ctx()},
                                                 {"n_slots", engine->n_slots()},
                                                 {"n_vocab", vocab->size()}}}}})}});
           }));
  http.Post("/v1/completions", with_model([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req.body);
              GenerationRequest g = parse_generation(body, false);
              std::vector<llm::Token> prompt = prompt_tokens(body, *vocab);
              generate(req, res, std::move(prompt), g, false);
            }));
  http.Post("/v1/chat/completions", with_model([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req.body);
              GenerationRequest g = parse_generation(body, true);
              std::vector<llm::Token> prompt = chat->prompt(chat_messages(body));
              generate(req, res, std::move(prompt), g, true);
            }));
  http.Post("/tokenize", with_model([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req.body);
              const auto content = get_string(body, "content");
              if (!content) fail(400, "'content' (a string) is required", "missing_content");
              const bool add_special = get_bool(body, "add_special").value_or(false);
              const bool with_pieces = get_bool(body, "with_pieces").value_or(false);
              const auto tokens = vocab->encode(*content, add_special, /*parse_special=*/true);
              json out = json::array();
              for (llm::Token t : tokens) {
                if (with_pieces)
                  out.push_back({{"id", t}, {"piece", vocab->token_to_piece(t, true)}});
                else
                  out.push_back(t);
              }
              t_log.tokens = static_cast<int>(tokens.size());
              send_json(res, 200, {{"tokens", out}});
            }));
  http.Post("/detokenize", with_model([this](const httplib::Request& req, httplib::Response& res) {
              const json body = parse_body(req.body);
              auto it = body.find("tokens");
              if (it == body.end() || !it->is_array())
                fail(400, "'tokens' (an array of ids) is required", "invalid_type");
              std::vector<llm::Token> ids;
              const auto n_vocab = static_cast<int64_t>(vocab->size());
              for (const json& t : *it) {
                if (!t.is_number_integer()) fail(400, "'tokens' must hold integers", "invalid_type");
                const int64_t id = t.get<int64_t>();
                if (id < 0 || id >= n_vocab)
                  fail(400, fmt::format("token id {} is outside the vocabulary [0, {})", id, n_vocab),
                       "invalid_value");
                ids.push_back(static_cast<llm::Token>(id));
              }
              std::string text;
              for (llm::Token t : ids) text += vocab->token_to_piece(t);
              t_log.tokens = static_cast<int>(ids.size());
              send_json(res, 200, {{"content", text}});
            }));
  http.Get("/metrics", with_model([this](const httplib::Request&, httplib::Response& res) {
             res.set_content(metrics_text(), "text/plain; version=0.0.4");
           }));
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) { impl_->opt = std::move(options); }

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  if (s.started) raise(ErrorCode::InvalidArgument, "the server is already started");
  if (s.opt.n_slots <= 0) raise(ErrorCode::InvalidArgument, "slots must be positive, got {}", s.opt.n_slots);
  s.install_routes();
  if (s.opt.port == 0) {
    s.port = s.http.bind_to_any_port(s.opt.host);
    if (s.port <= 0) raise(ErrorCode::InvalidArgument, "cannot bind {} to any port", s.opt.host);
  } else {
    if (!s.http.bind_to_port(s.opt.host, s.opt.port))
      raise(ErrorCode::InvalidArgument, "cannot bind {}:{} (in use, or not an address of this machine)",
            s.opt.host, s.opt.port);
    s.port = s.opt.port;
  }
  s.started = true;
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  s.loader = std::thread([&s] { s.load(); });
}

void Server::wait_loaded() {
  Impl& s = *impl_;
  std::unique_lock lock(s.load_mutex);
  s.load_cv.wait(lock, [&] { return s.load_finished; });
  if (s.load_error) std::rethrow_exception(s.load_error);
}

int Server::port() const noexcept { return impl_->port; }

void Server::stop() {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  if (s.loader.joinable()) s.loader.join();
  // Generations end first (their handlers answer), then the listener and its pool stop.
  if (s.engine) s.engine->shutdown();
  s.http.stop();
  if (s.listener.joinable()) s.listener.join();
}

}  // namespace tessera::server
