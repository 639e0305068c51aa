#pragma once
// One HTTP/1.1 connection on Boost.Beast: reads requests within bounded time and size, hands each
// to the routes through an Exchange, writes the answers in order (keep-alive and pipelining), and
// notices a client that goes away. Connections are asynchronous: a slow client costs a socket and
// a buffer, never a thread.
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/http.h"

namespace tessera::server {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;      // the request line and every header together (beyond: 431)
  size_t max_body_bytes = size_t{1} << 20;  // after chunked decoding too (beyond: 413)
  // A request's head and body must arrive within this of the read's start (beyond: 408 and the
  // connection closes); an idle keep-alive connection closes after it; a write that makes no
  // progress for this long ends the connection.
  std::chrono::seconds read_timeout{10};
  int max_connections = 512;  // beyond: 503 at once, then the connection closes
};

// One line per answered request.
struct RequestLogEntry {
  std::string method, path;  // as received, not yet escaped ("-" when the request did not parse)
  int status = 0;
  int tokens = 0;
  double ms = 0;
};

struct HttpHandlers {
  // The head of a request (no body yet): a response refuses it before its body is read.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> admit;
  // The whole request, on a worker thread; the Exchange answers it (now or later).
  std::function<void(const HttpRequest&, const std::shared_ptr<Exchange>&)> handle;
  std::function<void(const RequestLogEntry&)> log;
};

// What every connection of one listener shares.
struct HttpContext {
  HttpLimits limits;
  HttpHandlers handlers;
  boost::asio::thread_pool* workers = nullptr;  // where `handle` runs
  std::atomic<int> connections{0};
  // Each open connection's way to be closed at once (HttpListener::stop).
  std::mutex mutex;
  std::condition_variable closed;  // notified as each connection ends
  std::map<uint64_t, std::function<void()>> aborts;
  uint64_t next_id = 0;
};

// Serves `socket` (whose executor is a strand) until the client or the server closes it.
void serve_connection(boost::asio::ip::tcp::socket socket, std::shared_ptr<HttpContext> context);

// Answers 503 (too many connections) and closes.
void refuse_connection(boost::asio::ip::tcp::socket socket);

// An OpenAI-shaped JSON error response.
HttpResponse json_error(int status, const std::string& message, const std::string& code,
                        const std::string& type = "invalid_request_error");

}  // namespace tessera::server
