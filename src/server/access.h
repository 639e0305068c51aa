#pragma once
// Who may ask: the Host a request names (against DNS rebinding), the Origin a browser sends (an
// explicit CORS policy, none by default), and the API key. Pure functions of a request's head.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http.h"

namespace tessera::server {

struct AccessPolicy {
  // Host names (without port) requests may name; empty: any. Built by for_address().
  std::vector<std::string> allowed_hosts;
  // Origins (scheme://host[:port]) whose pages may call the API; "*" allows every origin.
  std::vector<std::string> cors_origins;
  std::string api_key;  // empty: none required

  // The names a server listening on `address` answers to: the address itself, and for a loopback
  // address `localhost`, `127.0.0.1` and `::1`; a wildcard address (0.0.0.0, ::) allows any name
  // unless `extra` names some. `extra` adds names; "*" allows any.
  static std::vector<std::string> hosts_for_address(const std::string& address,
                                                    const std::vector<std::string>& extra);

  // Whether the Host header names this server (a missing Host is refused for HTTP/1.1).
  bool host_allowed(const HttpRequest& request) const;
  // Whether a request with this Origin header may be answered: same origin as its Host, or listed.
  bool origin_allowed(std::string_view origin, const HttpRequest& request) const;
  // The CORS headers an answer to an allowed cross-origin request carries (none for same origin
  // or no Origin).
  Headers cors_headers(const HttpRequest& request) const;
  // Whether the request carries the API key: `Authorization: Bearer <key>`, the scheme in any case.
  bool authorized(const HttpRequest& request) const;
  // The token of an Authorization: Bearer header ("" when none).
  static std::string bearer_token(const HttpRequest& request);
};

// Bytes made safe for a one-line log: printable ASCII kept, everything else (control characters,
// escape sequences, newlines, non-ASCII) as \xHH, at most `max_bytes` of input (then "...").
std::string escape_for_log(std::string_view text, size_t max_bytes = 256);

}  // namespace tessera::server
