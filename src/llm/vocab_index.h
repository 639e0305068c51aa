#pragma once
// Private lookup structures of llm::Vocab, shared by vocab.cpp and tokenizer_spm.cpp.
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Vocab::Index {
  std::unordered_map<std::string, Token, TextHash, std::equal_to<>> by_text;
  // Control, unknown and user-defined tokens with non-empty text, longest text first (ties: lower
  // id first), the order in which the text is split on them before merging.
  std::vector<Token> specials;
};

}  // namespace tessera::llm
