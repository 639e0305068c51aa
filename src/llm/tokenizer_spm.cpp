// SentencePiece ("llama") encoding of text between special tokens, as llama.cpp does it: escape
// spaces as U+2581 with a prefix space, then merge adjacent pieces greedily by vocabulary score; whatever
// remains outside the vocabulary falls back to byte tokens.
#include <queue>

#include "core/check.h"
#include "llm/vocab_index.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

// Length of the UTF-8 character at s[i]: a well-formed lead byte with its continuation bytes, else 1
// (stray continuation bytes, bad leads, truncated sequences each stand alone).
size_t char_length(std::string_view s, size_t i) {
  const auto c = uint8_t(s[i]);
  size_t n = 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
  }
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// A run of the text that is one piece so far; pieces form a doubly linked list in text order.
struct Piece {
  uint32_t offset;
  uint32_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// A merge of two neighbouring pieces whose concatenation is a token.
struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // the concatenation's length when queued; stale when the pieces changed since
};

// Highest score on top; equal scores: leftmost first (llama.cpp's order).
struct Lower {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

void Vocab::tokenize_spm_(std::string_view text, std::vector<Token>& out) const {
  if (text.empty()) return;
  if (text.size() > UINT32_MAX)
    raise(ErrorCode::InvalidArgument, "text of {} bytes is too long", text.size());

  std::vector<Piece> pieces;
  pieces.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = char_length(text, i);
    const auto index = int32_t(pieces.size());
    pieces.push_back({uint32_t(i), uint32_t(n), index - 1, i + n == text.size() ? -1 : index + 1});
    i += n;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, Lower> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Piece& l = pieces[size_t(left)];
    const Piece& r = pieces[size_t(right)];
    const Token id = find(text.substr(l.offset, l.length + r.length));
    if (id == kNoToken) return;
    queue.push({scores_[size_t(id)], left, right, l.length + r.length});
  };
  for (size_t i = 1; i < pieces.size(); ++i) consider(int32_t(i - 1), int32_t(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Piece& l = pieces[size_t(c.left)];
    Piece& r = pieces[size_t(c.right)];
    // Lengths only grow, so an unchanged sum means neither piece changed since c was queued.
    if (l.length == 0 || r.length == 0 || l.length + r.length != c.length) continue;
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) pieces[size_t(r.next)].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = pieces[size_t(i)].next) {
    const Piece& p = pieces[size_t(i)];
    const std::string_view piece = text.substr(p.offset, p.length);
    const Token id = find(piece);
    if (id != kNoToken) {
      out.push_back(id);
    } else {
      for (const char b : piece) out.push_back(byte_token(uint8_t(b)));
    }
  }
}

void Vocab::encode_spm_fragment_(std::string_view text, bool prefix, std::vector<Token>& out) const {
  std::string escaped;
  escaped.reserve(text.size() + 16);
  if (prefix) escaped += kSpaceMark;
  for (const char c : text) {
    if (c == ' ') {
      escaped += kSpaceMark;
    } else {
      escaped += c;
    }
  }
  tokenize_spm_(escaped, out);
}

}  // namespace tessera::llm
