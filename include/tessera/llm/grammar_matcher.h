#pragma once
// Constrained generation: a GrammarState over a vocabulary. mask() says which tokens may come
// next (their pieces keep the text inside the grammar; a piece may end inside a UTF-8 character)
// and whether generation may end (only where the text is a whole sentence), computed by one walk
// of the VocabTrie that prunes every subtree the grammar rejects, and cached per grammar state
// (states recur: every character inside a JSON string leads back to the same one).
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "tessera/llm/grammar.h"
#include "tessera/llm/grammar_state.h"
#include "tessera/llm/vocab_trie.h"

namespace tessera::llm {

struct TokenMask {
  std::vector<Token> allowed;      // sorted ids; never control or end-of-generation tokens
  bool end_of_generation = false;  // an end-of-generation token may come (the grammar is complete)
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabTrie> trie);

  const TokenMask& mask();
  // Advances by a token. Error(InvalidArgument) when the mask does not allow it (an end-of-
  // generation token is allowed only where the grammar is complete, and changes nothing).
  void accept(Token id);
  // Sets every logit the mask forbids to -infinity (logits: [vocab size]). Error(InvalidArgument)
  // when the grammar allows no token at all (a dead end for this vocabulary).
  void apply(std::span<float> logits);
  // The grammar is complete and nothing but an end-of-generation token may follow.
  bool only_end_of_generation();
  const GrammarState& state() const noexcept { return state_; }
  const VocabTrie& trie() const noexcept { return *trie_; }

  // Masks computed by a walk, and served from the cache (for benchmarks and tests).
  uint64_t walks() const noexcept { return walks_; }
  uint64_t cache_hits() const noexcept { return hits_; }

 private:
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& k) const noexcept;
  };
  void walk(uint32_t node, size_t depth, std::vector<Token>& allowed);

  std::shared_ptr<const VocabTrie> trie_;
  GrammarState state_;
  std::vector<GrammarState::Heads> buffers_;  // per trie depth, reused
  std::unordered_map<std::vector<uint32_t>, TokenMask, KeyHash> cache_;
  size_t cached_tokens_ = 0;
  const TokenMask* current_ = nullptr;  // mask() of the present state, once computed
  uint64_t walks_ = 0, hits_ = 0;
};

}  // namespace tessera::llm
