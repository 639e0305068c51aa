#include "tessera/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace tessera {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("TESSERA_LOG");
  if (env == nullptr || *env == '\0') return LogLevel::Warn;
  const std::string v(env);
  if (v == "error") return LogLevel::Error;
  if (v == "warn") return LogLevel::Warn;
  if (v == "info") return LogLevel::Info;
  if (v == "debug") return LogLevel::Debug;
  // The sink is not set up yet (this runs while it is made), so the warning goes straight to stderr.
  std::fprintf(stderr, "tessera: warning: TESSERA_LOG='%s' is not error, warn, info or debug; using warn\n",
               env);
  return LogLevel::Warn;
}

struct LogState {
  std::mutex mutex;
  LogCallback callback;
  LogLevel level = level_from_env();
};

LogState& state() {
  static LogState s;
  return s;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Error:
      return "error";
    case LogLevel::Warn:
      return "warning";
    case LogLevel::Info:
      return "info";
    case LogLevel::Debug:
      return "debug";
  }
  return "";
}

}  // namespace

void set_log_callback(LogCallback callback) {
  std::lock_guard lock(state().mutex);
  state().callback = std::move(callback);
}

void set_log_level(LogLevel level) { state().level = level; }
LogLevel log_level() { return state().level; }

void log(LogLevel level, std::string_view message) {
  auto& s = state();
  if (static_cast<int>(level) > static_cast<int>(s.level)) return;
  std::lock_guard lock(s.mutex);
  if (s.callback) {
    s.callback(level, message);
  } else {
    std::fprintf(stderr, "tessera: %s: %.*s\n", level_name(level), static_cast<int>(message.size()),
                 message.data());
  }
}

}  // namespace tessera
