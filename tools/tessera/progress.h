#pragma once
// A progress bar on stderr, shown only on a terminal and only once an operation takes a moment.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tessera::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)), start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() {
    if (shown_) std::fputc('\n', stderr);
  }
  void update(size_t done, size_t total) {
    if (!isatty(STDERR_FILENO) || total == 0) return;
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    if (!shown_ && elapsed < std::chrono::milliseconds(300)) return;
    shown_ = true;
    const int width = 40;
    const int filled = static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * width);
    std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(),
                 static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total)));
    std::fflush(stderr);
  }

 private:
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
};

}  // namespace tessera::cli
