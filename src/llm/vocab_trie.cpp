// VocabTrie (tessera/llm/vocab_trie.h): built by sorting the pieces, laid out breadth by node.
#include "tessera/llm/vocab_trie.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace tessera::llm {

VocabTrie::VocabTrie(const Vocab& vocab) : end_of_generation_(vocab.end_of_generation()) {
  const size_t n = vocab.size();
  pieces_.resize(n);
  std::vector<Token> order;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<Token>(i);
    if (vocab.is_end_of_generation(id)) continue;
    pieces_[i] = vocab.token_to_piece(id, /*special=*/false);
    if (!pieces_[i].empty()) order.push_back(id);
  }
  std::sort(order.begin(), order.end(),
            [&](Token a, Token b) { return pieces_[a] != pieces_[b] ? pieces_[a] < pieces_[b] : a < b; });
  // Recursive construction over the sorted range [lo, hi) sharing the prefix of length depth:
  // each node's children are contiguous, its tokens too.
  struct Build {
    VocabTrie& t;
    const std::vector<Token>& order;
    void node(uint32_t index, size_t lo, size_t hi, size_t depth) {
      size_t i = lo;
      t.nodes_[index].first_token = static_cast<uint32_t>(t.tokens_.size());
      while (i < hi && t.pieces_[order[i]].size() == depth) t.tokens_.push_back(order[i++]);
      t.nodes_[index].n_tokens = static_cast<uint32_t>(t.tokens_.size()) - t.nodes_[index].first_token;
      // Children: runs of the same byte at `depth`.
      std::vector<std::pair<size_t, size_t>> runs;
      while (i < hi) {
        const char b = t.pieces_[order[i]][depth];
        size_t j = i;
        while (j < hi && t.pieces_[order[j]][depth] == b) ++j;
        runs.emplace_back(i, j);
        i = j;
      }
      const auto first = static_cast<uint32_t>(t.child_byte_.size());
      t.nodes_[index].first_child = first;
      t.nodes_[index].n_children = static_cast<uint32_t>(runs.size());
      for (const auto& [a, b] : runs) {
        t.child_byte_.push_back(uint8_t(t.pieces_[order[a]][depth]));
        t.child_node_.push_back(static_cast<uint32_t>(t.nodes_.size()));
        t.nodes_.emplace_back();
      }
      for (size_t k = 0; k < runs.size(); ++k)
        node(t.child_node_[first + k], runs[k].first, runs[k].second, depth + 1);
    }
  };
  nodes_.emplace_back();
  Build{*this, order}.node(0, 0, order.size(), 0);
}

const std::string& VocabTrie::piece(Token id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size())
    raise(ErrorCode::InvalidArgument, "token id {} is outside the vocabulary of {}", id, pieces_.size());
  return pieces_[static_cast<size_t>(id)];
}

bool VocabTrie::is_end_of_generation(Token id) const noexcept {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace tessera::llm
