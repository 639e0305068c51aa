// Stop strings over streamed tokens (tessera/llm/stop_text.h).
#include "tessera/llm/stop_text.h"

#include <algorithm>
#include <utility>

#include "core/check.h"

namespace tessera::llm {

StopText::StopText(const Vocab& vocab, std::vector<std::string> stops)
    : streamer_(vocab), stops_(std::move(stops)) {
  for (const std::string& s : stops_)
    if (s.empty()) raise(ErrorCode::InvalidArgument, "a stop string is empty");
}

std::string StopText::settle(size_t end) {
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string StopText::push(Token id) {
  if (stopped_) raise(ErrorCode::InvalidArgument, "a token after the stop string");
  const size_t from = emitted_;
  text_ += streamer_.push(id);
  // A stop string cannot start before `from`: the tail that could begin one was held back.
  size_t stop_at = std::string::npos;
  for (const std::string& s : stops_) stop_at = std::min(stop_at, text_.find(s, from));
  if (stop_at != std::string::npos) {
    text_.resize(stop_at);
    stopped_ = true;
    return settle(text_.size());
  }
  // The longest tail that is a proper prefix of a stop string. The text ends on a character (the
  // streamer holds incomplete UTF-8) and a stop string starts on one, so this splits none.
  size_t hold = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, text_.size() - from); k > hold; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  return settle(text_.size() - hold);
}

std::string StopText::finish() {
  if (stopped_) return {};
  text_ += streamer_.finish();
  return settle(text_.size());
}

}  // namespace tessera::llm
