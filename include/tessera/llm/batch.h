#pragma once
// A batch of tokens for Session::decode: each token with its position, its sequence and whether
// its logits are wanted. Tokens of several sequences may be mixed (continuous batching).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

using Pos = int32_t;
using SeqId = int32_t;

struct Batch {
  std::vector<Token> tokens;
  std::vector<Pos> positions;
  std::vector<SeqId> seq_ids;
  std::vector<uint8_t> logits;  // nonzero: decode returns this token's logits

  void add(Token token, Pos pos, SeqId seq, bool want_logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    logits.push_back(want_logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    logits.clear();
  }
  size_t size() const noexcept { return tokens.size(); }
};

}  // namespace tessera::llm
