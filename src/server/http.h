#pragma once
// What the routes see of HTTP: a request read whole, a response, and the Exchange through which a
// request is answered at once, later (a generation) or as a stream. The connection
// (connection.h) speaks the protocol; nothing above it sees a socket.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: GET, POST, HEAD, OPTIONS, ...
  std::string target;  // path and query as sent
  std::string path;    // the target without its query
  unsigned version = 11;
  Headers headers;
  std::string body;
  std::string remote_address;  // numeric
  // The first header of that name (case-insensitive), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  Headers headers;
};

// One request's answer. Every member may be called from any thread; the connection runs the work
// on its own strand, in order. Exactly one of respond() or begin_stream() ... end_stream() answers.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  // A chunked response: the head now, then each piece as it comes.
  virtual void begin_stream(int status, std::string content_type, Headers headers) = 0;
  virtual void write(std::string data) = 0;
  virtual void end_stream() = 0;
  // The exchange owns each `state` it is given until it ends (or the connection closes): what
  // answers it later (a generation's reply) lives exactly as long as it can be used, with no
  // reference cycle; what counts requests in flight (the server's drain) learns when they end.
  virtual void keep(std::shared_ptr<void> state) = 0;
  // Runs `f` on the connection's strand (never inline).
  virtual void post(std::function<void()> f) = 0;
  // Runs `f` on the strand at `deadline` unless the exchange has ended by then.
  virtual void at(std::chrono::steady_clock::time_point deadline, std::function<void()> f) = 0;
  // `f` runs once, on the strand, if the client goes away before the exchange ends: its socket was
  // reset, a write failed, or it closed its side and did not answer the interim `100 Continue` the
  // connection then sends to tell a half-close from a close.
  virtual void on_gone(std::function<void()> f) = 0;
  // What the request's log line reports: tokens, and a status other than the one sent (499 for a
  // stream whose client left).
  virtual void log_tokens(int tokens) = 0;
  virtual void log_status(int status) = 0;
};

}  // namespace tessera::server
