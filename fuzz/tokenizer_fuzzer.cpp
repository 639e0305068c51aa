// libFuzzer target for the tokenizers: SentencePiece and byte-level BPE, with and without special
// tokens parsed. The vocabularies are two small ones made here (always) and the GGUF files listed
// in TESSERA_FUZZ_VOCABS (colon-separated; scripts/fuzz.sh names stories260K and ../shared/vocab).
//
// Input: byte 0 picks the vocabulary (byte0 >> 3) and the mode (bit 0: add_special, bit 1:
// parse_special, bit 2: the rest is token ids, three bytes each, whose decoded text is then the text
// under test, as llama.cpp's test-tokenizer-1 round-trips every token's piece); the rest is text.
// What must hold, as Vocab's contract states it:
// - encode never throws, and every id is inside the vocabulary;
// - byte-level BPE: decode(encode(x)) == x exactly (special tokens unparsed when they were parsed,
//   the added BOS/EOS removed) when no user-defined token is among the ids (they decode verbatim);
// - SentencePiece, special tokens not parsed: decode(encode(x)) == x for any x without U+2581
//   (the escaped space, which decodes to ' ', as in SentencePiece itself) and without user-defined tokens
//   (matched even unparsed; the text after one gets the leading space, as in llama.cpp);
// - token_to_piece of every id produced is a prefix-free part of the decode (their concatenation,
//   special pieces shown, is the text decode(ids, false, true) gives).
// A violation traps, so the fuzzer reports it as a crash.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"
#include "tessera/log.h"

namespace {

using namespace tessera;
using namespace tessera::llm;

struct Entry {
  std::string name;
  Vocab vocab;
};

std::vector<Entry>& vocabularies() {
  static std::vector<Entry> v;
  return v;
}

[[noreturn]] void bug(const Entry& e, const char* what, std::string_view text, std::string_view got) {
  std::fprintf(stderr, "tokenizer_fuzzer: %s: %s\n  text (%zu bytes): ", e.name.c_str(), what, text.size());
  for (unsigned char c : text) std::fprintf(stderr, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
  std::fprintf(stderr, "\n  got  (%zu bytes): ", got.size());
  for (unsigned char c : got) std::fprintf(stderr, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
  std::fprintf(stderr, "\n");
  __builtin_trap();
}

// A small SentencePiece vocabulary: unknown, BOS, EOS, the 256 byte tokens, a few pieces, a
// user-defined token.
Vocab small_spm() {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<TokenType> types{TokenType::Unknown, TokenType::Control, TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    tokens.emplace_back(text);
    types.push_back(TokenType::Byte);
  }
  for (const char* piece : {"\xe2\x96\x81", "a", "b", "ab",
                            "\xe2\x96\x81"
                            "a",
                            "\xe2\x96\x81"
                            "ab",
                            "ba", "\xc3\xa9"}) {
    tokens.emplace_back(piece);
    types.push_back(TokenType::Normal);
  }
  tokens.emplace_back("<x>");
  types.push_back(TokenType::UserDefined);
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t i = 259; i < scores.size(); ++i) scores[i] = -static_cast<float>(i - 259);
  return Vocab("llama", tokens, scores, types);
}

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 for U+0100..
std::string byte_char(int byte) {
  int next = 0x100, cp = 0;
  for (int b = 0; b <= byte; ++b) {
    const bool itself = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    cp = itself ? b : next++;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// A small byte-level BPE vocabulary: the byte alphabet, three merges, control and user-defined
// tokens.
Vocab small_bpe() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  std::vector<TokenType> types(256, TokenType::Normal);
  const std::string space = byte_char(' ');
  for (std::string t : {std::string("ab"), std::string("bc"), std::string("abc"), space + "a"}) {
    tokens.push_back(t);
    types.push_back(TokenType::Normal);
  }
  for (const char* t : {"<|end|>", "<s>", "</s>"}) {
    tokens.emplace_back(t);
    types.push_back(TokenType::Control);
  }
  tokens.emplace_back("<x>");
  types.push_back(TokenType::UserDefined);
  SpecialTokens sp;
  sp.bos = 261;
  sp.eos = 262;
  sp.unk = kNoToken;
  sp.add_bos = true;
  return Vocab::byte_level_bpe(tokens, {"a b", "b c", "ab c", space + " a"}, "gpt-2", types, sp);
}

void check(const Entry& e, std::string_view text, bool add_special, bool parse_special) {
  const Vocab& v = e.vocab;
  const std::vector<Token> ids = v.encode(text, add_special, parse_special);
  std::string pieces;
  for (Token id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= v.size()) bug(e, "id outside the vocabulary", text, "");
    pieces += v.token_to_piece(id, true);
  }
  // Without the leading-space rule (SentencePiece), the decode is the pieces concatenated.
  const std::string shown = v.decode(ids, false, true);
  if (v.model() == "gpt2" && shown != pieces) bug(e, "decode differs from its pieces", text, shown);
  const std::string back = v.decode(ids, add_special, parse_special);
  // User-defined tokens decode verbatim (as in llama.cpp): a BPE byte run can land on one whose text
  // is not those bytes (deepseek-coder's added "\xc3\xbf" for the byte 0xff), and in SentencePiece
  // they match even unparsed and give the text after them a leading space. The round trips hold
  // without them.
  const bool user_defined =
      std::any_of(ids.begin(), ids.end(), [&](Token id) { return v.type(id) == TokenType::UserDefined; });
  if (v.model() == "gpt2") {
    if (!user_defined && back != text) bug(e, "BPE round trip", text, back);
  } else if (!parse_special && !user_defined && text.find("\xe2\x96\x81") == std::string_view::npos) {
    if (back != text) bug(e, "SentencePiece round trip", text, back);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level(LogLevel::Error);
  auto& v = vocabularies();
  v.push_back({"small-spm", small_spm()});
  v.push_back({"small-bpe", small_bpe()});
  if (const char* list = std::getenv("TESSERA_FUZZ_VOCABS")) {
    std::string_view rest(list);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string path(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (path.empty()) continue;
      try {
        v.push_back({path, Vocab::from_gguf(gguf::File::open(path))});
      } catch (const Error& err) {
        std::fprintf(stderr, "tokenizer_fuzzer: %s\n", err.what());
        std::exit(1);
      }
    }
  }
  std::fprintf(stderr, "tokenizer_fuzzer: %zu vocabularies\n", v.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& all = vocabularies();
  const Entry& e = all[(data[0] >> 3) % all.size()];
  const bool add_special = data[0] & 1, parse_special = data[0] & 2, from_ids = data[0] & 4;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string decoded;
  if (from_ids) {
    std::vector<Token> ids;
    for (size_t i = 1; i + 2 < size; i += 3)
      ids.push_back(
          static_cast<Token>((data[i] | (data[i + 1] << 8) | (data[i + 2] << 16)) % e.vocab.size()));
    decoded = e.vocab.decode(ids, false, parse_special);
    text = decoded;
  }
  check(e, text, add_special, parse_special);
  return 0;
}
