// GrammarMatcher (tessera/llm/grammar_matcher.h): token masks by one pruned walk of the trie.
#include "tessera/llm/grammar_matcher.h"

#include <algorithm>
#include <limits>

#include "core/check.h"

namespace tessera::llm {

namespace {
// The cache is dropped whole beyond either bound (states that recur come back quickly).
constexpr size_t kMaxCachedMasks = 4096;
constexpr size_t kMaxCachedTokens = size_t(1) << 24;
}  // namespace

size_t GrammarMatcher::KeyHash::operator()(const std::vector<uint32_t>& k) const noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t v : k) h = (h ^ v) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 32));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabTrie> trie)
    : trie_(std::move(trie)), state_(std::move(grammar)) {
  if (!trie_) raise(ErrorCode::InvalidArgument, "GrammarMatcher: no vocabulary trie");
}

void GrammarMatcher::walk(uint32_t node, size_t depth, std::vector<Token>& allowed) {
  if (buffers_.size() < depth + 2) buffers_.resize(depth + 2);
  const VocabTrie::Node& n = trie_->nodes()[node];
  const auto& bytes = trie_->child_byte();
  const auto& children = trie_->child_node();
  const auto& tokens = trie_->tokens();
  for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
    GrammarState::Heads& out = buffers_[depth + 1];
    if (!state_.step(buffers_[depth], bytes[c], out)) continue;
    const VocabTrie::Node& child = trie_->nodes()[children[c]];
    allowed.insert(allowed.end(), tokens.begin() + child.first_token,
                   tokens.begin() + child.first_token + child.n_tokens);
    if (child.n_children > 0) walk(children[c], depth + 1, allowed);
  }
}

const TokenMask& GrammarMatcher::mask() {
  if (current_) return *current_;
  const GrammarState::Heads& h = state_.heads();
  std::vector<uint32_t> key = h.stacks;
  key.push_back(h.partial);
  key.push_back(uint32_t(h.need) | uint32_t(h.length) << 8);
  if (auto it = cache_.find(key); it != cache_.end()) {
    ++hits_;
    return *(current_ = &it->second);
  }
  ++walks_;
  TokenMask m;
  const size_t mark = state_.mark();
  if (buffers_.empty()) buffers_.resize(2);
  buffers_[0] = h;
  try {
    walk(0, 0, m.allowed);
  } catch (...) {
    state_.rollback(mark);
    throw;
  }
  state_.rollback(mark);
  std::sort(m.allowed.begin(), m.allowed.end());
  m.end_of_generation = state_.complete();
  if (cache_.size() >= kMaxCachedMasks || cached_tokens_ + m.allowed.size() > kMaxCachedTokens) {
    cache_.clear();
    cached_tokens_ = 0;
  }
  cached_tokens_ += m.allowed.size();
  return *(current_ = &cache_.emplace(std::move(key), std::move(m)).first->second);
}

void GrammarMatcher::accept(Token id) {
  if (trie_->is_end_of_generation(id)) {
    if (!state_.complete())
      raise(ErrorCode::InvalidArgument, "grammar: an end-of-generation token before the text is complete");
    return;
  }
  const std::string& piece = trie_->piece(id);
  if (piece.empty() || !state_.accept(piece))
    raise(ErrorCode::InvalidArgument, "grammar: token {} is not allowed here", id);
  current_ = nullptr;
}

void GrammarMatcher::apply(std::span<float> logits) {
  const TokenMask& m = mask();
  if (m.allowed.empty() && !(m.end_of_generation && !trie_->end_of_generation().empty()))
    raise(ErrorCode::InvalidArgument, "grammar: no token of the vocabulary can continue the text");
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  // End-of-generation tokens are never in `allowed`: kept where the grammar is complete.
  const auto& eogs = trie_->end_of_generation();
  const size_t n_eog = m.end_of_generation ? eogs.size() : 0;
  std::vector<float> eog(n_eog);
  for (size_t k = 0; k < n_eog; ++k)
    eog[k] = static_cast<size_t>(eogs[k]) < logits.size() ? logits[static_cast<size_t>(eogs[k])] : kNone;
  // Walk the sorted allowed ids and the logits together: everything between them is forbidden.
  size_t next = 0;
  for (Token id : m.allowed) {
    const auto i = static_cast<size_t>(id);
    if (i >= logits.size()) break;
    std::fill(logits.begin() + static_cast<std::ptrdiff_t>(next),
              logits.begin() + static_cast<std::ptrdiff_t>(i), kNone);
    next = i + 1;
  }
  if (next < logits.size())
    std::fill(logits.begin() + static_cast<std::ptrdiff_t>(next), logits.end(), kNone);
  for (size_t k = 0; k < n_eog; ++k)
    if (static_cast<size_t>(eogs[k]) < logits.size()) logits[static_cast<size_t>(eogs[k])] = eog[k];
}

bool GrammarMatcher::only_end_of_generation() { return state_.complete() && mask().allowed.empty(); }

}  // namespace tessera::llm
