#pragma once
// One log sink for the whole library; stderr by default, level from TESSERA_LOG.
#include <functional>
#include <string_view>

namespace tessera {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

using LogCallback = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink (nullptr restores stderr). Not thread-safe against concurrent logging.
void set_log_callback(LogCallback callback);
void set_log_level(LogLevel level);
LogLevel log_level();
void log(LogLevel level, std::string_view message);

}  // namespace tessera
