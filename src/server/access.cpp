#include "server/access.h"

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/string.hpp>

namespace beast = boost::beast;

#include <algorithm>

namespace tessera::server {

namespace {

// The host part of a Host header or an authority: "[::1]:8080" -> "::1", "a.b:80" -> "a.b".
std::string host_of(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::string(authority);
    return std::string(authority.substr(1, close - 1));
  }
  const size_t colon = authority.find(':');
  return std::string(authority.substr(0, colon));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

std::vector<std::string> AccessPolicy::hosts_for_address(const std::string& address,
                                                         const std::vector<std::string>& extra) {
  std::vector<std::string> hosts;
  for (const std::string& e : extra) {
    if (e == "*") return {};
    hosts.push_back(lower(e));
  }
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  if (!ec && ip.is_unspecified()) return hosts;  // every name this machine has; `extra` narrows it
  hosts.push_back(lower(address));
  if (address == "localhost" || (!ec && ip.is_loopback()))
    for (const char* name : {"localhost", "127.0.0.1", "::1"}) hosts.emplace_back(name);
  return hosts;
}

bool AccessPolicy::host_allowed(const HttpRequest& request) const {
  const auto host = request.header("host");
  if (!host) return request.version < 11;
  if (allowed_hosts.empty()) return true;
  return contains(allowed_hosts, lower(host_of(*host)));
}

bool AccessPolicy::origin_allowed(std::string_view origin, const HttpRequest& request) const {
  if (contains(cors_origins, "*") || contains(cors_origins, origin)) return true;
  // Same origin: the page was served by this server under the Host the request names.
  const auto host = request.header("host");
  return host && (beast::iequals(origin, "http://" + std::string(*host)));
}

Headers AccessPolicy::cors_headers(const HttpRequest& request) const {
  const auto origin = request.header("origin");
  if (!origin) return {};
  const auto host = request.header("host");
  if (host && beast::iequals(*origin, "http://" + std::string(*host))) return {};
  if (!contains(cors_origins, "*") && !contains(cors_origins, *origin)) return {};
  return {{"Access-Control-Allow-Origin", std::string(*origin)}, {"Vary", "Origin"}};
}

std::string AccessPolicy::bearer_token(const HttpRequest& request) {
  const auto auth = request.header("authorization");
  if (!auth || auth->size() < 7 || !beast::iequals(auth->substr(0, 7), "bearer ")) return {};
  std::string_view token = auth->substr(7);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return std::string(token);
}

bool AccessPolicy::authorized(const HttpRequest& request) const {
  if (api_key.empty()) return true;
  const std::string token = bearer_token(request);
  // Equal strings, in time that depends on their lengths only.
  const size_t n = std::max(token.size(), api_key.size());
  unsigned diff = token.size() == api_key.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < token.size() ? static_cast<unsigned char>(token[i]) : 0;
    const unsigned char y = i < api_key.size() ? static_cast<unsigned char>(api_key[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

std::string escape_for_log(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = std::min(text.size(), max_bytes);
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x21 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace tessera::server
