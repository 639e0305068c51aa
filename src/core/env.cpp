#include "core/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "tessera/log.h"

namespace tessera {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

namespace {

std::optional<int64_t> parse_int(const char* name, int64_t min, int64_t max, const std::string& instead) {
  const auto v = env_string(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || std::isspace(static_cast<unsigned char>((*v)[0])) || end == v->c_str() || *end != '\0' ||
      parsed < min || parsed > max) {
    const std::string range =
        max == INT64_MAX ? fmt::format(">= {}", min) : fmt::format("in [{}, {}]", min, max);
    log(LogLevel::Warn, fmt::format("{}='{}' is not a whole number {}; {}", name, *v, range, instead));
    return std::nullopt;
  }
  return static_cast<int64_t>(parsed);
}

}  // namespace

std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max) {
  return parse_int(name, min, max, "ignored");
}

int64_t env_int_or(const char* name, int64_t fallback, int64_t min, int64_t max) {
  return parse_int(name, min, max, fmt::format("using {}", fallback)).value_or(fallback);
}

bool env_flag(const char* name, bool fallback) {
  auto v = env_string(name);
  if (!v) return fallback;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  log(LogLevel::Warn, fmt::format("{}='{}' is not a flag (1/0, true/false, yes/no, on/off); using {}", name,
                                  *v, fallback ? "on" : "off"));
  return fallback;
}

}  // namespace tessera
