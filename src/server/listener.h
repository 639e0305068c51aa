#pragma once
// Accepts HTTP connections on one address (Boost.Asio): a listen backlog of the system's maximum,
// at most HttpLimits::max_connections open at once (the next ones get 503 and close), a few I/O
// threads for every connection and a pool of workers for the routes' own work.
#include <memory>
#include <string>

#include "server/connection.h"

namespace tessera::server {

class HttpListener {
 public:
  HttpListener(HttpLimits limits, HttpHandlers handlers);
  ~HttpListener();  // stop()
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds host:port (port 0: any free port) and returns the port; Error when it cannot.
  int bind(const std::string& host, int port);
  // Accepts and serves in background threads.
  void start(int io_threads, int workers);
  // Stops accepting and serving; joins every thread. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::server
