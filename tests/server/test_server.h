#pragma once
// The server under test: in-process on 127.0.0.1 (a free port) with stories260K, its log lines
// collected; cpp-httplib's client for ordinary requests, a raw socket for what a hostile client
// does (partial heads, pipelining, half-closes, chosen source addresses).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/server.h"

namespace tessera::test_server {

using nlohmann::json;

inline const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
inline const std::string kLily =
    ", there was a little girl named Lily. She loved to play outside in the park.";

struct TestServer {
  // `configure` changes the defaults (one slot, 256 cells per slot, any free port).
  explicit TestServer(const std::function<void(server::ServerOptions&)>& configure = {}) {
    server::ServerOptions o;
    o.model_path = kModel;
    if (configure) configure(o);
    o.port = 0;
    if (o.n_ctx == 0) o.n_ctx = 256 * o.n_slots;
    o.log = [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
    srv = std::make_unique<server::Server>(o);
    srv->start();
    srv->wait_loaded();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", srv->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const json& body, const httplib::Headers& h = {}) const {
    return client().Post(path.c_str(), h, body.dump(), "application/json");
  }
  std::vector<std::string> log() {
    std::lock_guard lock(mutex);
    return lines;
  }
  // The log outlives the server (its threads log until it stops).
  std::mutex mutex;
  std::vector<std::string> lines;
  std::unique_ptr<server::Server> srv;
};

inline json greedy(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// The SSE events of a streamed body: each `data:` payload, in order.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

// Text and finish reason of a streamed completion; fails the test on a malformed stream.
inline std::pair<std::string, std::string> streamed_text(const std::string& body, bool chat = false) {
  const auto events = sse_events(body);
  EXPECT_FALSE(events.empty());
  if (events.empty()) return {};
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json j = json::parse(events[i]);
    EXPECT_EQ(j["object"], chat ? "chat.completion.chunk" : "text_completion");
    if (j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (chat) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    } else {
      text += c["text"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) {
      EXPECT_TRUE(finish.empty()) << "two finish chunks";
      finish = c["finish_reason"];
    }
  }
  return {text, finish};
}

inline void expect_error(const httplib::Result& r, int status, const std::string& code) {
  ASSERT_TRUE(r) << "no response";
  EXPECT_EQ(r->status, status) << r->body;
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  ASSERT_TRUE(j.contains("error")) << r->body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  if (!code.empty()) {
    EXPECT_EQ(j["error"]["code"], code) << r->body;
  }
}

// One TCP connection spoken to byte by byte.
class RawClient {
 public:
  // Connects to 127.0.0.1:port, from `source` (another loopback address, e.g. 127.0.0.2) if given.
  explicit RawClient(int port, const char* source = nullptr);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool send(std::string_view bytes);  // false once the server has closed or reset
  void shutdown_write();
  // Reads until the server closes (or `seconds` pass): everything it sent.
  std::string read_all(double seconds = 30);
  // The next response (interim 1xx answers skipped): status, lowercase headers, the decoded body;
  // nullopt when the connection closes first or `seconds` pass.
  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
    int interim = 0;  // 1xx answers before it
  };
  std::optional<Response> read_response(double seconds = 30);
  // Whether the server has closed the connection (EOF or reset) within `seconds`.
  bool closed_within(double seconds);

 private:
  bool fill(double seconds);  // reads more into buffer_; false on close or timeout
  int fd_ = -1;
  std::string buffer_;
};

// A request as bytes: METHOD PATH HTTP/1.1, Host, the headers given, Content-Length when a body.
std::string http_request(const std::string& method, const std::string& path, const std::string& body = {},
                         const std::vector<std::string>& headers = {"Content-Type: application/json"});

inline RawClient::RawClient(int port, const char* source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("socket");
  if (source != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) throw std::runtime_error("bind");
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) throw std::runtime_error("connect");
}

inline RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

inline bool RawClient::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

inline void RawClient::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

inline bool RawClient::fill(double seconds) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return false;
  char chunk[65536];
  const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
  if (n <= 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

inline std::string RawClient::read_all(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    if (!fill(left)) break;
  }
  return std::exchange(buffer_, {});
}

inline bool RawClient::closed_within(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd_, POLLIN, 0};
    const double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return true;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  return false;
}

inline std::optional<RawClient::Response> RawClient::read_response(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  auto more = [&] {
    const double left = std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
    return left > 0 && fill(left);
  };
  Response r;
  for (;;) {
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!more()) return std::nullopt;
    const std::string head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    r.status = std::stoi(head.substr(9, 3));
    r.headers.clear();
    size_t at = head.find("\r\n");
    while (at != std::string::npos) {
      const size_t next = head.find("\r\n", at + 2);
      const std::string line =
          head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      }
      at = next;
    }
    if (r.status >= 200) break;
    ++r.interim;
  }
  if (r.headers.count("transfer-encoding")) {
    for (;;) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos)
        if (!more()) return std::nullopt;
      const size_t size = std::stoul(buffer_.substr(0, line_end), nullptr, 16);
      while (buffer_.size() < line_end + 2 + size + 2)
        if (!more()) return std::nullopt;
      r.body += buffer_.substr(line_end + 2, size);
      buffer_.erase(0, line_end + 2 + size + 2);
      if (size == 0) break;
    }
  } else if (r.headers.count("content-length")) {
    const size_t size = std::stoul(r.headers["content-length"]);
    while (buffer_.size() < size)
      if (!more()) return std::nullopt;
    r.body = buffer_.substr(0, size);
    buffer_.erase(0, size);
  }
  return r;
}

inline std::string http_request(const std::string& method, const std::string& path, const std::string& body,
                                const std::vector<std::string>& headers) {
  std::string out = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const std::string& h : headers) out += h + "\r\n";
  if (!body.empty() || method == "POST") out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return out + "\r\n" + body;
}

}  // namespace tessera::test_server
