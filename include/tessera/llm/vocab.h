#pragma once
// An LLM vocabulary (tokens, scores, token types, special ids) and its tokenizer.
// Supported model: "llama" (SentencePiece with scores and byte fallback), reproducing
// llama.cpp's tokenization (../shared/OPS.md, last section).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::gguf {
class File;
}

namespace tessera::llm {

using Token = int32_t;
inline constexpr Token kNoToken = -1;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Special ids (kNoToken when absent) and the tokenizer's flags.
struct SpecialTokens {
  Token bos = 1;
  Token eos = 2;
  Token unk = 0;
  bool add_bos = true;           // tokenizer.ggml.add_bos_token
  bool add_eos = false;          // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix
};

class Vocab {
 public:
  // Reads tokenizer.ggml.* from a GGUF file. Error(Unsupported) naming the model when it is not
  // "llama"; Error(CorruptFile) on inconsistent arrays or out-of-range special ids.
  static Vocab from_gguf(const gguf::File& file);

  // A vocabulary from plain vectors (model is tokenizer.ggml.model, e.g. "llama"). Empty scores mean
  // all 0, empty types all Normal. Error(InvalidArgument) on mismatched sizes, NaN scores, special
  // ids out of range or malformed byte tokens (type Byte must read "<0xXX>").
  Vocab(std::string_view model, std::vector<std::string> tokens, std::vector<float> scores = {},
        std::vector<TokenType> types = {}, SpecialTokens special = {});

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  size_t size() const noexcept { return tokens_.size(); }
  const std::string& model() const noexcept { return model_; }
  const SpecialTokens& special() const noexcept { return special_; }
  Token bos() const noexcept { return special_.bos; }
  Token eos() const noexcept { return special_.eos; }
  Token unk() const noexcept { return special_.unk; }

  // Raw token text, score and type; Error(InvalidArgument) when id is out of range.
  const std::string& text(Token id) const;
  float score(Token id) const;
  TokenType type(Token id) const;
  // The id whose text is exactly `text` (the last one if texts repeat), or kNoToken.
  Token find(std::string_view text) const noexcept;
  // The token that stands for one raw byte: "<0xXX>", else the one-byte text, else unk.
  // Error(InvalidArgument) when none of these exists.
  Token byte_token(uint8_t byte) const;

  // Text -> ids. add_special adds BOS / EOS as the vocabulary asks (add_bos / add_eos), like
  // llama.cpp's add_special. parse_special: control and unknown tokens written in the text (e.g.
  // "<s>") become their ids; user-defined tokens always do. Never throws on invalid UTF-8: a byte
  // that does not start a well-formed sequence is a character of its own (llama.cpp instead
  // takes the length from the lead byte alone; both agree on valid UTF-8).
  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special = false) const;

  // One token's text as llama.cpp renders it: normal pieces with U+2581 -> ' ', byte tokens as the
  // raw byte, user-defined text verbatim, control/unknown text only when `special`, else "";
  // unused/undefined -> "". Error(InvalidArgument) when id is out of range.
  std::string token_to_piece(Token id, bool special = false) const;

  // Ids -> text: the concatenated pieces. remove_special drops a leading BOS (when add_bos) and a
  // trailing EOS (when add_eos). When add_space_prefix, one leading ' ' is removed from the first
  // piece that renders any text (hidden control tokens such as BOS do not count), so that
  // decode(encode(x, any)) == x. This is SentencePiece's rule; llama.cpp's detokenize differs
  // in that it only strips the very first id's piece and keeps the space after a removed BOS.
  // For streaming output use token_to_piece, which never strips.
  std::string decode(std::span<const Token> ids, bool remove_special = false,
                     bool unparse_special = false) const;

 private:
  struct Index;  // text -> id lookup and special-token order

  void check_id(Token id) const;
  // Appends the ids of `text` (spaces already escaped, prefix already added) by greedy merging.
  void tokenize_spm_(std::string_view text, std::vector<Token>& out) const;

  std::string model_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  SpecialTokens special_;
  std::array<Token, 256> byte_tokens_{};  // kNoToken where no token stands for the byte
  std::vector<int16_t> byte_values_;      // per id: the byte of a Byte token, else -1
  std::unique_ptr<Index> index_;
};

}  // namespace tessera::llm
