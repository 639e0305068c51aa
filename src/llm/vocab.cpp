// Vocabulary construction, lookups, the split on special tokens, and decoding (the tokenizers
// proper live in tokenizer_spm.cpp and tokenizer_bpe.cpp).
#include "tessera/llm/vocab.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "llm/byte_level.h"
#include "llm/vocab_index.h"
#include "tessera/gguf.h"

namespace tessera::llm {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xXX>" text, or -1.
int parse_byte_text(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool is_hidden_special(TokenType type) { return type == TokenType::Control || type == TokenType::Unknown; }

// Texts of end-of-turn tokens, in the order an EOT id is chosen when the file names none
// (llama.cpp's list, as of the peer's sources).
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"  // DeepSeek's <｜end▁of▁sentence｜>
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>",
};
// Every text that ends generation (llama.cpp's list, with the FIM pad/repo/file separators that
// end a fill-in-the-middle completion). A token with one of these texts is a control token
// whatever the file says: it neither prints nor can be written in plain text (Phi-3's "</s>" is
// user-defined in its file; llama.cpp retypes it the same way).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"  // <｜end▁of▁sentence｜>
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "[e~[",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
};

// The constructor from plain vectors builds SentencePiece vocabularies only: BPE needs merges.
std::string_view spm_model(std::string_view model) {
  if (model == "gpt2") {
    raise(ErrorCode::Unsupported,
          "tokenizer model 'gpt2' (byte-level BPE) needs merges: use Vocab::byte_level_bpe");
  }
  return model;
}

struct Fragment {
  Token token;  // kNoToken for a run of text
  size_t offset;
  size_t length;
};

}  // namespace

Vocab::Vocab(std::string_view model, std::vector<std::string> tokens, std::vector<float> scores,
             std::vector<TokenType> types, SpecialTokens special)
    : Vocab(AnyModel{}, spm_model(model), std::move(tokens), std::move(scores), std::move(types), special) {}

Vocab Vocab::byte_level_bpe(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                            std::string_view pre, std::vector<TokenType> types, SpecialTokens special) {
  special.add_space_prefix = false;
  Vocab v(AnyModel{}, "gpt2", std::move(tokens), {}, std::move(types), special);
  v.init_bpe_(merges, pre);
  return v;
}

Vocab::Vocab(AnyModel, std::string_view model, std::vector<std::string> tokens, std::vector<float> scores,
             std::vector<TokenType> types, SpecialTokens special)
    : model_(model),
      byte_level_(model == "gpt2"),
      wordpiece_(model == "bert"),
      tokens_(std::move(tokens)),
      scores_(std::move(scores)),
      types_(std::move(types)),
      special_(special),
      index_(std::make_unique<Index>()) {
  if (model_ != "llama" && !byte_level_ && !wordpiece_) {
    raise(ErrorCode::Unsupported,
          "tokenizer model '{}' is not supported (only 'llama', SentencePiece, 'gpt2', byte-level BPE, and "
          "'bert', WordPiece)",
          model_);
  }
  const size_t n = tokens_.size();
  if (n == 0) raise(ErrorCode::InvalidArgument, "vocabulary has no tokens");
  if (n > size_t(INT32_MAX)) raise(ErrorCode::InvalidArgument, "vocabulary has {} tokens, too many", n);
  if (scores_.empty()) scores_.assign(n, 0.0f);
  if (types_.empty()) types_.assign(n, TokenType::Normal);
  if (scores_.size() != n || types_.size() != n) {
    raise(ErrorCode::InvalidArgument, "vocabulary has {} tokens but {} scores and {} token types", n,
          scores_.size(), types_.size());
  }
  auto check_special = [&](Token id, const char* what) {
    if (id != kNoToken && (id < 0 || size_t(id) >= n)) {
      raise(ErrorCode::InvalidArgument, "{} token id {} is out of range (vocabulary of {} tokens)", what, id,
            n);
    }
  };
  check_special(special_.bos, "BOS");
  check_special(special_.eos, "EOS");
  check_special(special_.unk, "unknown");
  check_special(special_.eot, "end-of-turn");
  check_special(special_.eom, "end-of-message");
  check_special(special_.sep, "separator");
  if (wordpiece_) {
    special_.add_space_prefix = false;
    wpm_lowercase_ = special_.lowercase;
    wpm_strip_accents_ = special_.strip_accents;
    if (special_.bos == kNoToken || special_.sep == kNoToken)
      raise(ErrorCode::InvalidArgument, "a WordPiece vocabulary needs [CLS] (BOS) and [SEP] token ids");
    for (const std::string& t : tokens_) max_token_len_ = std::max(max_token_len_, t.size());
  }
  if (special_.add_bos && special_.bos == kNoToken) {
    raise(ErrorCode::InvalidArgument, "vocabulary asks to add BOS but has no BOS token");
  }
  if (special_.add_eos && special_.eos == kNoToken) {
    raise(ErrorCode::InvalidArgument, "vocabulary asks to add EOS but has no EOS token");
  }

  byte_values_.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(scores_[i])) raise(ErrorCode::InvalidArgument, "token {} has a NaN score", i);
    const auto t = int32_t(types_[i]);
    if (t < 0 || t > int32_t(TokenType::Byte)) types_[i] = TokenType::Undefined;  // as llama.cpp
    if (types_[i] == TokenType::Byte) {
      const int b = parse_byte_text(tokens_[i]);
      if (b < 0)
        raise(ErrorCode::InvalidArgument, "byte token {} has text '{}', expected <0xXX>", i, tokens_[i]);
      byte_values_[i] = int16_t(b);
    }
  }
  index_->by_text.build(tokens_);  // repeated texts: the last id wins, as in llama.cpp
  find_end_of_generation_();       // may retype tokens as Control
  for (size_t i = 0; i < n; ++i) {
    const TokenType ty = types_[i];
    if ((is_hidden_special(ty) || ty == TokenType::UserDefined) && !tokens_[i].empty()) {
      index_->specials.push_back(Token(i));
    }
  }
  std::stable_sort(index_->specials.begin(), index_->specials.end(),
                   [&](Token a, Token b) { return tokens_[size_t(a)].size() > tokens_[size_t(b)].size(); });

  for (int b = 0; b < 256; ++b) {
    Token id = kNoToken;
    if (byte_level_) {
      id = find(byte_level::utf8_for_byte(uint8_t(b)));
    } else {
      id = find(fmt::format("<0x{:02X}>", b));
      if (id == kNoToken) id = find(std::string(1, char(b)));
    }
    byte_tokens_[size_t(b)] = id != kNoToken ? id : special_.unk;
  }
}

void Vocab::find_end_of_generation_() {
  if (special_.eot == kNoToken) {
    for (const std::string_view text : kEndOfTurnTexts) {
      if (const Token id = find(text); id != kNoToken) {
        special_.eot = id;
        break;
      }
    }
  }
  if (special_.eom == kNoToken) special_.eom = find("<|eom_id|>");
  std::vector<Token> ids;
  // A vocabulary with Gemma 4's <|tool_response> uses "</s>" as text, not as an end.
  const bool s_is_text = find("<|tool_response>") != kNoToken;
  for (const std::string_view text : kEndOfGenerationTexts) {
    const Token id = find(text);
    if (id == kNoToken || (s_is_text && text == "</s>")) continue;
    ids.push_back(id);
    // A stop token must neither print nor be forged by plain text (llama.cpp retypes them too).
    types_[size_t(id)] = TokenType::Control;
  }
  for (const Token id : {special_.eos, special_.eot, special_.eom}) {
    if (id != kNoToken) ids.push_back(id);
  }
  // Harmony (gpt-oss's o200k_harmony; Solar Open's <|calls|>/<|flush|>): <|end|> ends a message, and
  // the reply goes on with the next one (the analysis, then the final answer); <|return|> and
  // <|call|> end it. llama.cpp drops <|end|> from its ends the same way.
  const Token end = find("<|end|>");
  if (end != kNoToken && ((find("<|return|>") != kNoToken && find("<|call|>") != kNoToken) ||
                          (find("<|calls|>") != kNoToken && find("<|flush|>") != kNoToken)))
    ids.erase(std::remove(ids.begin(), ids.end(), end), ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  end_of_generation_ = std::move(ids);
}

bool Vocab::is_end_of_generation(Token id) const noexcept {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

Vocab Vocab::from_gguf(const gguf::File& file) {
  const gguf::Value* model = file.find("tokenizer.ggml.model");
  if (model == nullptr)
    raise(ErrorCode::InvalidArgument, "{}: no tokenizer (tokenizer.ggml.model is missing)", file.source());
  const std::string& name = file.get_string("tokenizer.ggml.model");
  const bool bpe = name == "gpt2";
  const bool wpm = name == "bert";
  if (name != "llama" && !bpe && !wpm) {
    raise(
        ErrorCode::Unsupported,
        "{}: tokenizer model '{}' is not supported (only 'llama', SentencePiece, 'gpt2', byte-level BPE, and "
        "'bert', WordPiece)",
        file.source(), name);
  }
  std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  std::vector<float> scores;
  if (!bpe && file.find("tokenizer.ggml.scores")) scores = file.get_f32_array("tokenizer.ggml.scores");
  std::vector<TokenType> types;
  if (file.find("tokenizer.ggml.token_type")) {
    for (const int32_t t : file.get_i32_array("tokenizer.ggml.token_type")) types.push_back(TokenType(t));
  }
  if ((!scores.empty() && scores.size() != n) || (!types.empty() && types.size() != n)) {
    raise(ErrorCode::CorruptFile, "{}: {} tokens but {} scores and {} token types", file.source(), n,
          scores.size(), types.size());
  }
  static const std::vector<std::string> kNoMerges;
  const std::vector<std::string>* merges = &kNoMerges;  // the file's own array, not a copy
  std::string pre;
  if (bpe) {
    if (file.find("tokenizer.ggml.merges") == nullptr) {
      raise(ErrorCode::CorruptFile, "{}: byte-level BPE vocabulary without tokenizer.ggml.merges",
            file.source());
    }
    merges = &file.get_string_array("tokenizer.ggml.merges");
    if (file.find("tokenizer.ggml.pre") != nullptr) pre = file.get_string("tokenizer.ggml.pre");
  }

  SpecialTokens special;
  if (wpm) {  // llama.cpp's WordPiece defaults: BERT's ids
    special.bos = 101;
    special.eos = kNoToken;
    special.unk = 100;
    special.sep = 102;
    special.add_space_prefix = false;
  }
  if (bpe) {  // llama.cpp's BPE defaults; add_bos follows the pre-tokenizer kind (below)
    special.bos = special.eos = special.unk = kNoToken;
    special.add_bos = false;
    special.add_space_prefix = false;
  }
  // Absent ids keep the defaults when they fit; -1 (or its u32 spelling) means none.
  auto read_id = [&](std::string_view key, Token& id) {
    if (file.find(key) == nullptr) {
      if (id >= 0 && size_t(id) >= n) id = kNoToken;
      return;
    }
    const int64_t v = file.get_int(key);
    if (v == -1 || v == int64_t(UINT32_MAX)) {
      id = kNoToken;
    } else if (v < 0 || uint64_t(v) >= n) {
      raise(ErrorCode::CorruptFile, "{}: {} = {} is out of range (vocabulary of {} tokens)", file.source(),
            key, v, n);
    } else {
      id = Token(v);
    }
  };
  read_id("tokenizer.ggml.bos_token_id", special.bos);
  read_id("tokenizer.ggml.eos_token_id", special.eos);
  read_id("tokenizer.ggml.unknown_token_id", special.unk);
  read_id("tokenizer.ggml.eot_token_id", special.eot);
  read_id("tokenizer.ggml.eom_token_id", special.eom);
  if (wpm) read_id("tokenizer.ggml.seperator_token_id", special.sep);
  auto read_flag = [&](std::string_view key, bool& flag) {
    if (file.find(key) != nullptr) flag = file.get_bool(key);
  };
  bool add_bos_given = file.find("tokenizer.ggml.add_bos_token") != nullptr;
  read_flag("tokenizer.ggml.add_bos_token", special.add_bos);
  read_flag("tokenizer.ggml.add_eos_token", special.add_eos);
  if (!bpe && !wpm) read_flag("tokenizer.ggml.add_space_prefix", special.add_space_prefix);
  if (wpm) {
    read_flag("tokenizer.ggml.normalizer.lowercase", special.lowercase);
    special.strip_accents = special.lowercase;
    read_flag("tokenizer.ggml.normalizer.strip_accents", special.strip_accents);
  }
  try {
    if (bpe) {
      if (!add_bos_given) special.add_bos = PreTokenizer::for_name(pre).add_bos();
      if (special.bos == kNoToken) special.add_bos = false;  // nothing to add
      if (special.eos == kNoToken) special.add_eos = false;
      return byte_level_bpe(std::move(tokens), *merges, pre, std::move(types), special);
    }
    if (special.bos == kNoToken) special.add_bos = false;
    if (special.eos == kNoToken) special.add_eos = false;
    return Vocab(name, std::move(tokens), std::move(scores), std::move(types), special);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) throw;
    raise(ErrorCode::CorruptFile, "{}: {}", file.source(), e.what());  // the file's vocabulary is malformed
  }
}

Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

void Vocab::check_id(Token id) const {
  if (id < 0 || size_t(id) >= tokens_.size()) {
    raise(ErrorCode::InvalidArgument, "token id {} is out of range (vocabulary of {} tokens)", id,
          tokens_.size());
  }
}

const std::string& Vocab::text(Token id) const {
  check_id(id);
  return tokens_[size_t(id)];
}

float Vocab::score(Token id) const {
  check_id(id);
  return scores_[size_t(id)];
}

TokenType Vocab::type(Token id) const {
  check_id(id);
  return types_[size_t(id)];
}

Token Vocab::find(std::string_view text) const noexcept { return index_->by_text.find(text); }

Token Vocab::byte_token(uint8_t byte) const {
  const Token id = byte_tokens_[byte];
  if (id == kNoToken) {
    raise(ErrorCode::InvalidArgument, "byte 0x{:02X} has no token and the vocabulary has no unknown token",
          byte);
  }
  return id;
}

std::vector<Token> Vocab::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_(text, add_special, parse_special, {});
}

std::vector<Token> Vocab::encode_with_plain_ranges(std::string_view text, bool add_special,
                                                   std::span<const std::pair<size_t, size_t>> plain) const {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [begin, end] : plain)
    if (begin < end) ranges.emplace_back(begin, end);
  std::sort(ranges.begin(), ranges.end());
  // Merged, so that one search finds the only range a match can overlap first.
  std::vector<std::pair<size_t, size_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return encode_(text, add_special, /*parse_special=*/true, merged);
}

std::vector<Token> Vocab::encode_(std::string_view text, bool add_special, bool parse_special,
                                  std::span<const std::pair<size_t, size_t>> plain) const {
  // Whether [begin, end) overlaps no plain range.
  const auto outside_plain = [&](size_t begin, size_t end) {
    const auto it =
        std::upper_bound(plain.begin(), plain.end(), begin,
                         [](size_t b, const std::pair<size_t, size_t>& r) { return b < r.second; });
    return it == plain.end() || it->first >= end;
  };
  // Split the text on special tokens, longest first, leftmost non-overlapping occurrences.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const Token special : index_->specials) {
    const TokenType type = types_[size_t(special)];
    const bool user_defined = type == TokenType::UserDefined;
    if (!parse_special && !user_defined) continue;
    const std::string& needle = tokens_[size_t(special)];
    next.clear();
    bool split = false;
    for (const Fragment& f : fragments) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.offset, from = f.offset;
      const size_t end = f.offset + f.length;
      for (;;) {
        const size_t match = text.find(needle, from);
        if (match == std::string_view::npos || match + needle.size() > end) break;
        if (!user_defined && !outside_plain(match, match + needle.size())) {
          from = match + 1;  // plain text: not this token, but maybe one starting later
          continue;
        }
        if (match > pos) next.push_back({kNoToken, pos, match - pos});
        next.push_back({special, 0, 0});
        pos = from = match + needle.size();
        split = true;
      }
      if (pos < end) next.push_back({kNoToken, pos, end - pos});
    }
    if (split) fragments.swap(next);
  }

  std::vector<Token> out;
  // WordPiece always frames the text in [CLS] ... [SEP] (llama.cpp ignores add_bos_token there).
  if (add_special && (special_.add_bos || wordpiece_)) out.push_back(special_.bos);
  bool after_special = true;  // the text's start counts as following a special token
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.offset, f.length);
    if (byte_level_) {
      encode_bpe_fragment_(piece, out);
    } else if (wordpiece_) {
      encode_wpm_fragment_(piece, out);
    } else {
      encode_spm_fragment_(piece, special_.add_space_prefix && after_special, out);
    }
    after_special = false;
  }
  if (add_special && special_.add_eos && !wordpiece_) out.push_back(special_.eos);
  if (add_special && wordpiece_) out.push_back(special_.sep);
  return out;
}

std::string Vocab::token_to_piece(Token id, bool special) const {
  check_id(id);
  const std::string& text = tokens_[size_t(id)];
  switch (types_[size_t(id)]) {
    case TokenType::Normal: {
      std::string out;
      if (byte_level_) {
        byte_level::append_decoded(text, out);
        return out;
      }
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (std::string_view(text).substr(i, kSpaceMark.size()) == kSpaceMark) {
          out += ' ';
          i += kSpaceMark.size();
        } else {
          out += text[i++];
        }
      }
      return out;
    }
    case TokenType::Byte:
      return std::string(1, char(byte_values_[size_t(id)]));
    case TokenType::UserDefined:
      return text;
    case TokenType::Control:
    case TokenType::Unknown:
      return special ? text : std::string();
    case TokenType::Unused:
    case TokenType::Undefined:
      return {};
  }
  return {};
}

std::string Vocab::decode(std::span<const Token> ids, bool remove_special, bool unparse_special) const {
  if (remove_special && special_.add_bos && !ids.empty() && ids.front() == special_.bos) ids = ids.subspan(1);
  if (remove_special && special_.add_eos && !ids.empty() && ids.back() == special_.eos) {
    ids = ids.first(ids.size() - 1);
  }
  std::string out;
  bool strip_space = special_.add_space_prefix;
  for (const Token id : ids) {
    std::string piece = token_to_piece(id, unparse_special);
    if (piece.empty()) continue;
    if (strip_space && piece.front() == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

}  // namespace tessera::llm
