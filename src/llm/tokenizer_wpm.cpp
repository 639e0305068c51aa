// BERT's WordPiece ("bert" vocabularies) as llama.cpp tokenizes it: the text is cut into words at
// whitespace and around every punctuation mark, symbol below U+007F and CJK ideograph (each its own
// word), control characters dropped, letters lowercased and accents stripped when the vocabulary
// asks (its normalizer flags); each word, with U+2581 before it (the converters write word-initial
// pieces as "\u2581piece" and continuation pieces, Hugging Face's "##piece", bare), becomes the
// longest vocabulary pieces from left to right, or one unknown token when some position matches
// no piece.
#include <algorithm>
#include <cstdint>

#include "llm/jinja/text.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {
namespace {

struct ClassRange {
  uint32_t first;
  int klass;
};
struct CodePair {
  uint32_t cp, value;
};
struct CodeRun {
  uint32_t first, last, value;
};
#include "unicode_wpm_tables.inc"

enum Class {
  kOther = 0,
  kWhitespace = 1,
  kControl = 2,
  kPunctuation = 3,
  kSymbol = 4,
  kMark = 5,
  kUnassigned = 6
};

int class_of(uint32_t cp) {
  const auto it = std::upper_bound(std::begin(kClassRanges), std::end(kClassRanges), cp,
                                   [](uint32_t c, const ClassRange& r) { return c < r.first; });
  return it == std::begin(kClassRanges) ? kOther : (it - 1)->klass;
}

uint32_t lower(uint32_t cp) {
  const auto it = std::lower_bound(std::begin(kLower), std::end(kLower), cp,
                                   [](const CodePair& p, uint32_t c) { return p.cp < c; });
  return it != std::end(kLower) && it->cp == cp ? it->value : cp;
}

// The first code point of cp's canonical decomposition (llama.cpp's "NFD" keeps only that).
uint32_t nfd_first(uint32_t cp) {
  const auto it = std::upper_bound(std::begin(kNfdFirst), std::end(kNfdFirst), cp,
                                   [](uint32_t c, const CodeRun& r) { return c < r.first; });
  if (it == std::begin(kNfdFirst)) return cp;
  const CodeRun& r = *(it - 1);
  return cp <= r.last ? r.value : cp;
}

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) ||
         (cp >= 0x2B920 && cp <= 0x2CEAF) ||  // as Hugging Face's tokenizers has it (not 0x2B820)
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

void Vocab::encode_wpm_fragment_(std::string_view text, std::vector<Token>& out) const {
  // Words, each already prefixed with U+2581.
  static constexpr std::string_view kWordStart = "\xE2\x96\x81";
  std::vector<std::string> words;
  std::string word(kWordStart);
  auto finish_word = [&] {
    if (word.size() > kWordStart.size()) words.push_back(word);
    word.assign(kWordStart);
  };
  for (size_t i = 0, length = 0; i < text.size(); i += length) {
    // A malformed sequence is one U+FFFD per byte (the template interpreter's UTF-8 reading).
    uint32_t cp = jinja::decode_utf8(text, i, &length);
    if (wpm_strip_accents_) cp = nfd_first(cp);
    const int k = class_of(cp);
    if (k == kWhitespace) {
      finish_word();
      continue;
    }
    if (cp == 0 || cp == 0xFFFD || k == kControl) continue;
    if (wpm_strip_accents_ && k == kMark) continue;
    const uint32_t written = wpm_lowercase_ ? lower(cp) : cp;
    if (k == kPunctuation || (cp < 0x7F && k == kSymbol) || is_cjk(cp)) {
      finish_word();
      jinja::append_utf8(word, written);
      finish_word();
    } else {
      jinja::append_utf8(word, written);
    }
  }
  finish_word();

  for (const std::string& w : words) {
    const size_t start = out.size();
    const size_t n = w.size();
    bool whole = true;
    for (size_t i = 0; i < n;) {
      size_t matched = 0;
      for (size_t j = std::min(n, i + max_token_len_); j > i; --j) {
        const Token id = find(std::string_view(w).substr(i, j - i));
        if (id != kNoToken) {
          out.push_back(id);
          matched = j;
          break;
        }
      }
      if (matched == 0) {
        whole = false;
        break;
      }
      i = matched;
    }
    if (!whole) out.resize(start);
    if (out.size() == start && special_.unk != kNoToken) out.push_back(special_.unk);
  }
}

}  // namespace tessera::llm
