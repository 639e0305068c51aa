// TokenStreamer: hold back only a trailing UTF-8 sequence that further bytes can still complete.
#include "tessera/llm/token_streamer.h"

#include <cstdint>

namespace tessera::llm {

namespace {

// The length a lead byte announces, or 0 for a byte that cannot start a sequence (a continuation
// byte, or one that UTF-8 never uses: C0, C1, F5-FF).
size_t announced_length(uint8_t c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Where the incomplete sequence at the end of `s` starts, or s.size() when there is none.
size_t incomplete_tail(const std::string& s) {
  // Only the last three bytes can belong to an incomplete sequence of at most four.
  const size_t first = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i-- > first;) {
    const auto c = uint8_t(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: its lead is further left
    const size_t n = announced_length(c);
    // A lead byte with fewer bytes after it than it announces (all continuations, as checked by
    // the loop above) is incomplete; anything else ends here complete or invalid.
    return n > 1 && s.size() - i < n ? i : s.size();
  }
  return s.size();
}

}  // namespace

TokenStreamer::TokenStreamer(const Vocab& vocab, bool render_special)
    : vocab_(&vocab), render_special_(render_special) {}

std::string TokenStreamer::push(Token id) {
  pending_ += vocab_->token_to_piece(id, render_special_);
  const size_t keep = incomplete_tail(pending_);
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return out;
}

std::string TokenStreamer::finish() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tessera::llm
