#pragma once
// Private lookup structures of llm::Vocab, shared by vocab.cpp, tokenizer_spm.cpp and
// tokenizer_bpe.cpp.
#include <optional>
#include <vector>

#include "llm/merge_table.h"
#include "llm/pre_tokenizer.h"
#include "llm/text_index.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

struct Vocab::Index {
  TextIndex by_text;
  // Control, unknown and user-defined tokens with non-empty text, longest text first (ties: lower
  // id first), the order in which the text is split on them before merging.
  std::vector<Token> specials;
  // Byte-level BPE only.
  MergeTable merges;
  std::optional<PreTokenizer> pre;
};

}  // namespace tessera::llm
