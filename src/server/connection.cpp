#include "server/connection.h"

#include <sys/socket.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <deque>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (beast::iequals(key, name)) return std::string_view(value);
  return std::nullopt;
}

HttpResponse json_error(int status, const std::string& message, const std::string& code,
                        const std::string& type) {
  const nlohmann::json body{{"error",
                             {{"message", message},
                              {"type", type},
                              {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}}}};
  return {
      status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

namespace {

// A response's head (Beast's serializer through its stream operator) and body as bytes.
std::string serialize(const HttpResponse& r, unsigned version, bool keep_alive, bool head_only) {
  http::response<http::empty_body> res{static_cast<http::status>(r.status), version};
  if (!r.content_type.empty()) res.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res.insert(k, v);
  res.keep_alive(keep_alive);
  if (r.status != 204 && r.status != 304) res.content_length(r.body.size());  // HEAD: GET's length
  std::ostringstream out;
  out << res.base();
  std::string bytes = out.str();
  if (!head_only) bytes += r.body;
  return bytes;
}

class Connection;

class ConnectionExchange final : public Exchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> c, uint64_t seq) : conn_(std::move(c)), seq_(seq) {}
  void respond(HttpResponse response) override;
  void begin_stream(int status, std::string content_type, Headers headers) override;
  void write(std::string data) override;
  void end_stream() override;
  void post(std::function<void()> f) override;
  void at(Clock::time_point deadline, std::function<void()> f) override;
  void on_gone(std::function<void()> f) override;
  void keep(std::shared_ptr<void> state) override;
  void log_tokens(int tokens) override;
  void log_status(int status) override;

 private:
  template <typename F>
  void on_strand(F f);
  std::shared_ptr<Connection> conn_;
  const uint64_t seq_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<HttpContext> context)
      : stream_(std::move(socket)), ctx_(std::move(context)) {
    ++ctx_->connections;
    beast::error_code ec;
    std::lock_guard lock(ctx_->mutex);
    id_ = ctx_->next_id++;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string();
  }
  ~Connection() {
    if (current_ && !current_->logged && !aborted_) log_current(current_->gone ? 499 : 500);
    std::lock_guard lock(ctx_->mutex);
    ctx_->aborts.erase(id_);
    --ctx_->connections;
    ctx_->closed.notify_all();
  }

  void start() {
    {
      std::lock_guard lock(ctx_->mutex);
      ctx_->aborts[id_] = [weak = weak_from_this()] {
        if (auto self = weak.lock()) net::post(self->stream_.get_executor(), [self] { self->abort(); });
      };
    }
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_head(); });
  }

 private:
  friend class ConnectionExchange;

  // The state of the request being answered (one at a time; pipelined ones wait in buffer_).
  struct Current {
    uint64_t seq = 0;
    HttpRequest request;
    bool keep_alive = false;
    bool head_only = false;
    Clock::time_point start;
    int tokens = 0;           // for the log line
    int status_override = 0;  // for the log line
    bool answered = false;    // respond() or end_stream() was called
    bool head_sent = false;   // a final response head is queued
    bool gone = false;        // the client left before the end
    bool logged = false;
    std::function<void()> on_gone;
    std::unique_ptr<net::steady_timer> deadline;
    std::vector<std::shared_ptr<void>> kept;  // Exchange::keep
  };

  // The server stops: drop the exchange's state (no answer will be written) and close.
  void abort() {
    aborted_ = true;
    current_.reset();
    drop_queued();
    close_now();
  }

  const HttpLimits& limits() const { return ctx_->limits; }

  // A request's time starts at its first byte: first wait for one (an idle keep-alive connection
  // may wait read_timeout), then give the head and body read_timeout from there.
  void read_head() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits().max_header_bytes));
    parser_->body_limit(limits().max_body_bytes);
    stream_.expires_after(limits().read_timeout);
    if (buffer_.size() > 0) return read_rest_of_head();
    stream_.async_read_some(
        buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) return self->close_now();  // closed, reset or idle past the timeout: nothing to answer
          self->buffer_.commit(n);
          self->read_rest_of_head();
        });
  }

  void read_rest_of_head() {
    read_start_ = Clock::now();
    stream_.expires_after(limits().read_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_head(ec); });
  }

  // Answers a request that could not be read and closes.
  void refuse_unread(const HttpResponse& r, const std::string& method, const std::string& path) {
    const int status = r.status;
    write_raw(serialize(r, 11, false, false), [self = shared_from_this(), method, path, status] {
      self->log_line(method, path, status, 0, self->read_start_);
      self->close_gracefully();
    });
  }

  void on_head(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::connection_reset || ec == net::error::eof)
      return close_now();
    // Past the deadline the stream has closed the socket: log what happened, nothing to send.
    if (ec == beast::error::timeout) return log_line("-", "-", 408, 0, read_start_), close_now();
    if (ec == http::error::header_limit)
      return refuse_unread(json_error(431, "the request head is too large", "headers_too_large"), "-", "-");
    if (ec == http::error::body_limit)
      return refuse_unread(json_error(413, "the request body is too large", "payload_too_large"), "-", "-");
    if (ec == net::error::operation_aborted) return close_now();
    if (ec) return refuse_unread(json_error(400, "malformed HTTP request", "bad_request"), "-", "-");

    current_ = std::make_unique<Current>();
    Current& c = *current_;
    c.seq = ++seq_;
    c.start = read_start_;
    const auto& head = parser_->get();
    c.request.method = std::string(head.method_string());
    c.request.target = std::string(head.target());
    c.request.path = c.request.target.substr(0, c.request.target.find('?'));
    c.request.version = head.version();
    c.request.remote_address = remote_;
    for (const auto& field : head) c.request.headers.emplace_back(field.name_string(), field.value());
    c.keep_alive = head.keep_alive();
    c.head_only = head.method() == http::verb::head;
    if (auto refusal = ctx_->handlers.admit(c.request)) {
      // The body (if any) stays unread: answer and close.
      c.keep_alive = false;
      c.answered = true;
      c.head_sent = true;
      queue(serialize(*refusal, c.request.version, false, c.head_only), c.seq);
      finish_when_written(refusal->status);
      return;
    }
    if (auto expect = c.request.header("expect"); expect && beast::iequals(*expect, "100-continue")) {
      write_raw("HTTP/1.1 100 Continue\r\n\r\n", [self = shared_from_this()] { self->read_body(); });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_at(read_start_ + limits().read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    Current& c = *current_;
    auto refuse = [&](const HttpResponse& r) {
      c.keep_alive = false;
      refuse_unread(r, c.request.method, c.request.path);
    };
    if (ec == beast::error::timeout)
      return log_line(c.request.method, c.request.path, 408, 0, c.start), close_now();
    if (ec == http::error::body_limit)
      return refuse(json_error(413, "the request body is too large", "payload_too_large"));
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted)
      return close_now();
    if (ec) return refuse(json_error(400, "malformed HTTP request body", "bad_request"));
    c.request.body = std::move(parser_->get().body());
    parser_.reset();
    stream_.expires_never();
    // The exchange holds the connection until the request is answered; the connection holds
    // nothing of the exchange (no cycle).
    auto exchange = std::make_shared<ConnectionExchange>(shared_from_this(), c.seq);
    watch(c.seq);
    net::post(*ctx_->workers,
              [handle = ctx_->handlers.handle, request = c.request, ex = std::move(exchange)] {
                try {
                  handle(request, ex);
                } catch (const std::exception& e) {
                  ex->respond(json_error(500, e.what(), "internal_error", "server_error"));
                }
              });
  }

  // Watches the socket while the request is worked on: bytes (a pipelined request) mean the client
  // is there; end-of-file means it closed or half-closed its side. Which one is asked with an
  // interim `100 Continue` (HTTP/1.1 clients must accept 1xx answers): a closed socket answers it
  // with a reset, which the error wait sees; a half-closed one keeps reading and gets its answer.
  void watch(uint64_t seq) {
    stream_.socket().async_wait(
        tcp::socket::wait_read, [self = shared_from_this(), seq](beast::error_code ec) {
          if (ec || !self->active(seq)) return;
          char byte;
          const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n > 0) return;  // a pipelined request is waiting: the client is there
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch(seq);
          if (n < 0) return self->client_gone();
          self->peer_closed_ = true;
          self->stream_.socket().async_wait(tcp::socket::wait_error, [self, seq](beast::error_code e) {
            if (!e && self->active(seq)) self->client_gone();
          });
          Current& c = *self->current_;
          if (!c.head_sent && c.request.version >= 11) self->queue("HTTP/1.1 100 Continue\r\n\r\n", seq);
        });
  }

  bool active(uint64_t seq) const { return current_ && current_->seq == seq && !current_->gone; }

  void client_gone() {
    Current& c = *current_;
    if (c.gone) return;
    c.gone = true;
    if (c.deadline) c.deadline->cancel();
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    drop_queued();
    if (auto f = std::move(c.on_gone)) f();
    stream_.socket().close(ignored);
    // The exchange is logged when its handler gives its last answer (or the connection dies).
    if (c.answered) drop_gone();
  }

  // Logs a request whose client left and whose handler has answered, and lets go of its state.
  void drop_gone() {
    log_current(499);
    current_.reset();
  }

  // Forgets what is not yet written; the buffer of a write under way lives until it completes.
  void drop_queued() {
    if (writing_)
      out_.erase(out_.begin() + 1, out_.end());
    else
      out_.clear();
  }

  // Queues bytes of the current exchange (dropped if it has moved on).
  void queue(std::string bytes, uint64_t seq) {
    if (!active(seq)) return;
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      stream_.expires_never();
      if (current_ && current_->answered && !current_->gone && finish_status_) end_exchange();
      return;
    }
    writing_ = true;
    stream_.expires_after(limits().read_timeout);
    net::async_write(stream_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) {
                         self->writing_ = false;
                         if (self->current_ && !self->current_->gone) return self->client_gone();
                         return self->close_now();
                       }
                       self->out_.pop_front();
                       self->write_next();
                     });
  }

  // Writes bytes outside any exchange (a refusal, `100 Continue` before the body), then `next`.
  void write_raw(std::string bytes, std::function<void()> next) {
    auto data = std::make_shared<std::string>(std::move(bytes));
    stream_.expires_after(limits().read_timeout);
    net::async_write(stream_, net::buffer(*data),
                     [self = shared_from_this(), data, next](beast::error_code ec, size_t) {
                       if (ec) return self->close_now();
                       next();
                     });
  }

  void finish_when_written(int status) {
    finish_status_ = status;
    if (!writing_ && out_.empty()) end_exchange();
  }

  void end_exchange() {
    Current& c = *current_;
    log_current(finish_status_);
    if (c.deadline) c.deadline->cancel();
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // the watch
    const bool keep = c.keep_alive && !peer_closed_;
    current_.reset();
    finish_status_ = 0;
    if (keep)
      read_head();
    else
      close_gracefully();
  }

  void log_current(int status) {
    Current& c = *current_;
    if (c.logged) return;
    c.logged = true;
    if (c.status_override != 0) status = c.status_override;
    log_line(c.request.method, c.request.path, status, c.tokens, c.start);
  }

  void log_line(const std::string& method, const std::string& path, int status, int tokens,
                Clock::time_point start) {
    if (!ctx_->handlers.log) return;
    ctx_->handlers.log({method, path, status, tokens,
                        std::chrono::duration<double, std::milli>(Clock::now() - start).count()});
  }

  void close_now() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  // Stops sending, then reads what the client still sends (a body we did not want) for a while
  // before closing, so that the close does not reset the connection before it reads our answer.
  void close_gracefully() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    drain_ = std::make_shared<std::array<char, 4096>>();
    drain();
  }
  void drain() {
    stream_.async_read_some(net::buffer(*drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close_now();
      self->drain();
    });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpContext> ctx_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point read_start_;
  uint64_t seq_ = 0;
  std::unique_ptr<Current> current_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool peer_closed_ = false;
  bool aborted_ = false;
  uint64_t id_ = 0;
  int finish_status_ = 0;  // set once the last bytes of the exchange are queued
  int stream_status_ = 0;
  std::shared_ptr<std::array<char, 4096>> drain_;
};

template <typename F>
void ConnectionExchange::on_strand(F f) {
  net::post(conn_->stream_.get_executor(), [c = conn_, seq = seq_, f = std::move(f)]() mutable {
    if (!c->current_ || c->current_->seq != seq) return;
    f(*c, *c->current_);
  });
}

void ConnectionExchange::respond(HttpResponse response) {
  on_strand([r = std::move(response)](Connection& c, Connection::Current& cur) {
    if (cur.answered) return;
    cur.answered = true;
    if (cur.gone) return c.drop_gone();
    cur.head_sent = true;
    c.queue(serialize(r, cur.request.version, cur.keep_alive && !c.peer_closed_, cur.head_only), cur.seq);
    c.finish_when_written(r.status);
  });
}

void ConnectionExchange::begin_stream(int status, std::string content_type, Headers headers) {
  on_strand([=](Connection& c, Connection::Current& cur) {
    if (cur.answered || cur.head_sent || cur.gone) return;
    cur.head_sent = true;
    c.finish_status_ = 0;
    http::response<http::empty_body> res{static_cast<http::status>(status), cur.request.version};
    res.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) res.insert(k, v);
    res.keep_alive(cur.keep_alive && !c.peer_closed_);
    res.chunked(true);
    std::ostringstream out;
    out << res.base();
    c.stream_status_ = status;
    c.queue(out.str(), cur.seq);
  });
}

void ConnectionExchange::write(std::string data) {
  if (data.empty()) return;
  on_strand([d = std::move(data)](Connection& c, Connection::Current& cur) {
    if (cur.answered || !cur.head_sent || cur.gone || cur.head_only) return;
    c.queue(beast::buffers_to_string(http::make_chunk(net::buffer(d))), cur.seq);
  });
}

void ConnectionExchange::end_stream() {
  on_strand([](Connection& c, Connection::Current& cur) {
    if (cur.answered) return;
    cur.answered = true;
    if (cur.gone) return c.drop_gone();
    if (!cur.head_only) c.queue(beast::buffers_to_string(http::make_chunk_last()), cur.seq);
    c.finish_when_written(c.stream_status_);
  });
}

void ConnectionExchange::keep(std::shared_ptr<void> state) {
  on_strand([state = std::move(state)](Connection&, Connection::Current& cur) { cur.kept.push_back(state); });
}

void ConnectionExchange::log_tokens(int tokens) {
  on_strand([tokens](Connection&, Connection::Current& cur) { cur.tokens = tokens; });
}

void ConnectionExchange::log_status(int status) {
  on_strand([status](Connection&, Connection::Current& cur) { cur.status_override = status; });
}

void ConnectionExchange::post(std::function<void()> f) {
  on_strand([f = std::move(f)](Connection&, Connection::Current&) { f(); });
}

void ConnectionExchange::at(Clock::time_point deadline, std::function<void()> f) {
  on_strand([deadline, f = std::move(f)](Connection& c, Connection::Current& cur) {
    cur.deadline = std::make_unique<net::steady_timer>(c.stream_.get_executor(), deadline);
    cur.deadline->async_wait([conn = c.shared_from_this(), seq = cur.seq, f](beast::error_code ec) {
      if (ec || !conn->active(seq) || conn->current_->answered) return;
      f();
    });
  });
}

void ConnectionExchange::on_gone(std::function<void()> f) {
  on_strand([f = std::move(f)](Connection&, Connection::Current& cur) {
    if (cur.gone) return f();
    cur.on_gone = f;
  });
}

}  // namespace

void serve_connection(tcp::socket socket, std::shared_ptr<HttpContext> context) {
  std::make_shared<Connection>(std::move(socket), std::move(context))->start();
}

void refuse_connection(tcp::socket socket) {
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  auto bytes = std::make_shared<std::string>(
      serialize(json_error(503, "the server has too many connections; try again later",
                           "too_many_connections", "server_error"),
                11, false, false));
  net::async_write(*s, net::buffer(*bytes), [s, bytes](beast::error_code, size_t) {
    beast::error_code ignored;
    s->shutdown(tcp::socket::shutdown_both, ignored);
    s->close(ignored);
  });
}

}  // namespace tessera::server
