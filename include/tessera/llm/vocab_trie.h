#pragma once
// A byte trie of a vocabulary's token pieces (Vocab::token_to_piece, as generated text renders
// them), for token masks (GrammarMatcher): a grammar walks it once per step and skips a subtree as
// soon as it rejects the prefix. Control, unknown and unused tokens (empty pieces) and
// end-of-generation tokens are not in it; the latter are kept apart.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

class VocabTrie {
 public:
  explicit VocabTrie(const Vocab& vocab);

  struct Node {
    uint32_t first_child = 0;  // children: [first_child, first_child + n_children) of child_byte/child_node
    uint32_t n_children = 0;
    uint32_t first_token =
        0;  // tokens whose piece ends here: [first_token, first_token + n_tokens) of tokens
    uint32_t n_tokens = 0;
  };
  const std::vector<Node>& nodes() const noexcept { return nodes_; }  // nodes()[0]: the root
  const std::vector<uint8_t>& child_byte() const noexcept { return child_byte_; }
  const std::vector<uint32_t>& child_node() const noexcept { return child_node_; }
  const std::vector<Token>& tokens() const noexcept { return tokens_; }

  size_t vocab_size() const noexcept { return pieces_.size(); }
  // The bytes a token adds to the text ("" for tokens outside the trie).
  const std::string& piece(Token id) const;
  const std::vector<Token>& end_of_generation() const noexcept { return end_of_generation_; }
  bool is_end_of_generation(Token id) const noexcept;

 private:
  std::vector<Node> nodes_;
  std::vector<uint8_t> child_byte_;
  std::vector<uint32_t> child_node_;
  std::vector<Token> tokens_;
  std::vector<std::string> pieces_;
  std::vector<Token> end_of_generation_;  // sorted
};

}  // namespace tessera::llm
