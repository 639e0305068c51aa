// Byte-level BPE ("gpt2") encoding, as llama.cpp and Hugging Face tokenizers do it: the text
// between special tokens is cut into words by the pre-tokenizer; each word's bytes become
// characters of GPT-2's byte alphabet, one symbol per byte; then the adjacent pair with the lowest
// merge rank merges (ties: the leftmost) until no pair has a merge.
#include <queue>

#include "core/check.h"
#include "llm/byte_level.h"
#include "llm/vocab_index.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

namespace {

// A symbol of the word being merged; symbols form a doubly linked list in text order.
struct Symbol {
  Token id;  // kNoToken once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

// A merge of two neighbouring symbols, stale when either has changed since it was queued.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  Token left_id;
  Token right_id;
  Token result;
};

// Lowest rank on top; equal ranks (the same pair twice): leftmost first.
struct Later {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

}  // namespace

void Vocab::init_bpe_(const std::vector<std::string>& merges, std::string_view pre) {
  index_->pre.emplace(PreTokenizer::for_name(pre));
  pre_name_ = index_->pre->name();
  if (merges.size() > size_t(INT32_MAX))
    raise(ErrorCode::InvalidArgument, "{} merges, too many", merges.size());
  auto& table = index_->merges;
  table.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view merge = merges[rank];
    // The separator is the first space after the first character (a token may itself be " ").
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      raise(ErrorCode::InvalidArgument, "merge {} ('{}') is not two tokens separated by a space", rank,
            merge);
    }
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    const Token l = find(left);
    const Token r = find(right);
    if (l == kNoToken || r == kNoToken) {
      raise(ErrorCode::InvalidArgument, "merge {} ('{}') names a token that is not in the vocabulary: '{}'",
            rank, merge, l == kNoToken ? left : right);
    }
    joined.assign(left);
    joined += right;
    const Token result = find(joined);
    if (result == kNoToken) {
      raise(ErrorCode::InvalidArgument, "merge {} ('{}') makes '{}', which is not in the vocabulary", rank,
            merge, joined);
    }
    table.try_add(l, r, BpeMerge{int32_t(rank), result});  // a repeated pair keeps its first rank
  }
}

void Vocab::encode_bpe_fragment_(std::string_view text, std::vector<Token>& out) const {
  std::vector<std::string_view> words;
  index_->pre->split(text, words);
  for (const std::string_view word : words) tokenize_bpe_word_(word, out);
}

void Vocab::tokenize_bpe_word_(std::string_view word, std::vector<Token>& out) const {
  if (word.empty()) return;
  if (word.size() > size_t(INT32_MAX))
    raise(ErrorCode::InvalidArgument, "word of {} bytes is too long", word.size());
  if (index_->pre->ignore_merges()) {
    std::string mapped;
    byte_level::append_encoded(word, mapped);
    if (const Token id = find(mapped); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }

  const auto n = int32_t(word.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[size_t(i)] = {byte_token(uint8_t(word[size_t(i)])), i - 1, i + 1 < n ? i + 1 : -1};

  std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Token l = symbols[size_t(left)].id;
    const Token r = symbols[size_t(right)].id;
    if (const BpeMerge* m = index_->merges.find(l, r)) queue.push({m->rank, left, right, l, r, m->result});
  };
  for (int32_t i = 1; i < n; ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[size_t(c.left)];
    Symbol& r = symbols[size_t(c.right)];
    // A symbol's id changes whenever it merges (its text grows), so equal ids mean unchanged.
    if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;
    l.id = c.result;
    r.id = kNoToken;
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) out.push_back(symbols[size_t(i)].id);
}

}  // namespace tessera::llm
