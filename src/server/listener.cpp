#include "server/listener.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "core/check.h"
#include "tessera/error.h"

namespace tessera::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpListener::Impl {
  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{io};
  net::steady_timer retry{io};
  std::shared_ptr<HttpContext> context = std::make_shared<HttpContext>();
  std::unique_ptr<net::thread_pool> workers;
  std::vector<std::thread> threads;
  bool stopped = false;

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        // Out of descriptors (EMFILE) and the like: try again shortly rather than spin.
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](boost::system::error_code e) {
          if (!e) accept();
        });
        return;
      }
      if (context->connections.load() >= context->limits.max_connections)
        refuse_connection(std::move(socket));
      else
        serve_connection(std::move(socket), context);
      accept();
    });
  }
};

HttpListener::HttpListener(HttpLimits limits, HttpHandlers handlers) : impl_(std::make_unique<Impl>()) {
  impl_->context->limits = limits;
  impl_->context->handlers = std::move(handlers);
}

HttpListener::~HttpListener() { stop(); }

int HttpListener::bind(const std::string& host, int port) {
  Impl& s = *impl_;
  boost::system::error_code ec;
  tcp::resolver resolver(s.io);
  const auto endpoints = resolver.resolve(host, std::to_string(port),
                                          tcp::resolver::numeric_service | tcp::resolver::passive, ec);
  if (ec || endpoints.empty())
    tessera::raise(ErrorCode::InvalidArgument, "cannot resolve '{}': {}", host, ec.message());
  const tcp::endpoint ep = endpoints.begin()->endpoint();
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    tessera::raise(ErrorCode::InvalidArgument,
                   "cannot bind {}:{} ({}: in use, or not an address of this machine)", host, port,
                   ec.message());
  return s.acceptor.local_endpoint().port();
}

void HttpListener::start(int io_threads, int workers) {
  Impl& s = *impl_;
  s.workers = std::make_unique<net::thread_pool>(static_cast<size_t>(std::max(1, workers)));
  s.context->workers = s.workers.get();
  s.work.emplace(s.io.get_executor());
  s.accept();
  for (int i = 0; i < std::max(1, io_threads); ++i) s.threads.emplace_back([&s] { s.io.run(); });
}

void HttpListener::stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  net::post(s.io, [&s] {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    s.retry.cancel();
  });
  if (s.workers) s.workers->join();
  // Every connection closes on its strand; then the threads run out of work.
  std::vector<std::function<void()>> aborts;
  {
    std::lock_guard lock(s.context->mutex);
    for (auto& [id, abort] : s.context->aborts) aborts.push_back(abort);
  }
  for (auto& abort : aborts) abort();
  {
    std::unique_lock lock(s.context->mutex);
    s.context->closed.wait_for(lock, std::chrono::seconds(2),
                               [&] { return s.context->connections.load() == 0; });
  }
  s.work.reset();
  s.io.stop();
  for (auto& t : s.threads) t.join();
  // What still holds a connection (a generation's handle) may release it later: it must not call
  // into a server that is going away.
  s.context->handlers = {};
}

}  // namespace tessera::server
