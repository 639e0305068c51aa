#pragma once
// A byte-level vocabulary with one token per byte (ids 0..255: GPT-2's byte alphabet in byte
// order, so id = byte), then `extra` tokens of the given types: every split of a text is known.
#include <string>
#include <utility>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::testing_support {

inline llm::Vocab byte_vocab(const std::vector<std::pair<std::string, llm::TokenType>>& extra = {}) {
  using namespace llm;
  std::vector<std::string> tokens;
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool itself = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = itself ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    tokens.push_back(s);
  }
  std::vector<TokenType> types(256, TokenType::Normal);
  for (const auto& [text, type] : extra) {
    tokens.push_back(text);
    types.push_back(type);
  }
  SpecialTokens sp;
  sp.bos = sp.eos = sp.unk = kNoToken;
  sp.add_bos = false;
  return Vocab::byte_level_bpe(tokens, {}, "gpt-2", types, sp);
}

}  // namespace tessera::testing_support
