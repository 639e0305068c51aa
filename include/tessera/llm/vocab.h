#pragma once
// An LLM vocabulary (tokens, scores or merges, token types, special ids) and its tokenizer,
// reproducing llama.cpp's tokenization. Models (tokenizer.ggml.model): "llama" (SentencePiece with
// scores and byte fallback, ../shared/OPS.md, last section), "gpt2" (byte-level BPE: merges by
// rank over GPT-2's byte alphabet after a pre-tokenizer chosen by tokenizer.ggml.pre) and "bert"
// (WordPiece: longest pieces per word, tokenizer_wpm.cpp).
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

// Special ids (kNoToken when absent) and the tokenizer's flags. The defaults are SentencePiece's.
struct SpecialTokens {
  Token bos = 1;
  Token eos = 2;
  Token unk = 0;
  Token eot = kNoToken;          // end of turn (tokenizer.ggml.eot_token_id)
  Token eom = kNoToken;          // end of message (tokenizer.ggml.eom_token_id, Llama 3.1 tool calls)
  bool add_bos = true;           // tokenizer.ggml.add_bos_token
  bool add_eos = false;          // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix (SentencePiece only)
  // WordPiece ("bert"): [SEP] (tokenizer.ggml.seperator_token_id, llama.cpp's spelling), added at
  // the end by add_special, after [CLS] (bos) at the start; the normalizer's flags.
  Token sep = kNoToken;
  bool lowercase = true;      // tokenizer.ggml.normalizer.lowercase
  bool strip_accents = true;  // tokenizer.ggml.normalizer.strip_accents (default: lowercase)
};

class Vocab {
 public:
  // Reads tokenizer.ggml.* from a GGUF file. Error(Unsupported) naming the model when it is neither
  // "llama" nor "gpt2"; Error(CorruptFile) on inconsistent arrays, out-of-range special ids, a
  // "gpt2" vocabulary without tokenizer.ggml.merges or with a merge of unknown tokens. Keys a
  // "gpt2" file leaves out take llama.cpp's defaults: no BOS/EOS/unknown ids, add_bos_token as the
  // pre-tokenizer kind has it (true for llama-bpe), add_eos_token false.
  static Vocab from_gguf(const gguf::File& file);

  // A SentencePiece ("llama") or WordPiece ("bert": word-initial pieces spelled "\u2581piece",
  // continuations bare, as in GGUF files) vocabulary from plain vectors; Error(Unsupported) for
  // another model. Empty scores mean all 0, empty types all Normal. Error(InvalidArgument) on
  // mismatched sizes, NaN scores, special ids out of range or malformed byte tokens (type Byte
  // must read "<0xXX>").
  Vocab(std::string_view model, std::vector<std::string> tokens, std::vector<float> scores = {},
        std::vector<TokenType> types = {}, SpecialTokens special = {});

  // A byte-level BPE ("gpt2") vocabulary. Tokens are in GPT-2's byte alphabet (a space is "Ġ");
  // merges are "left right" texts, highest priority first (rank = index), each naming two tokens
  // whose concatenation is a token, else Error(InvalidArgument). `pre` is tokenizer.ggml.pre
  // (PreTokenizer::for_name: empty or unknown selects the default with a warning).
  // special.add_space_prefix is ignored (BPE adds no space).
  static Vocab byte_level_bpe(std::vector<std::string> tokens, const std::vector<std::string>& merges,
                              std::string_view pre, std::vector<TokenType> types, SpecialTokens special);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  size_t size() const noexcept { return tokens_.size(); }
  const std::string& model() const noexcept { return model_; }
  const SpecialTokens& special() const noexcept { return special_; }
  Token bos() const noexcept { return special_.bos; }
  Token eos() const noexcept { return special_.eos; }
  Token unk() const noexcept { return special_.unk; }
  // "gpt2" vocabularies: the pre-tokenizer kind in use ("llama-bpe", "qwen2", "gpt-2", ...); "" else.
  const std::string& pre_tokenizer() const noexcept { return pre_name_; }

  // Tokens that end generation: EOS, EOT and EOM, and every token spelled as a well-known end of
  // turn or text (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
  // <|end_of_text|>, <EOT>, ...) or a FIM file separator, as llama.cpp collects them. Such tokens are
  // treated as control tokens even when the file types them otherwise. Sorted ascending.
  const std::vector<Token>& end_of_generation() const noexcept { return end_of_generation_; }
  bool is_end_of_generation(Token id) const noexcept;

  // Raw token text, score and type; Error(InvalidArgument) when id is out of range.
  const std::string& text(Token id) const;
  float score(Token id) const;
  TokenType type(Token id) const;
  // The id whose text is exactly `text` (the last one if texts repeat), or kNoToken.
  Token find(std::string_view text) const noexcept;
  // The token that stands for one raw byte: SentencePiece: "<0xXX>", else the one-byte text; BPE:
  // the byte's character in GPT-2's alphabet; else unk. Error(InvalidArgument) when none exists.
  Token byte_token(uint8_t byte) const;

  // Text -> ids. add_special adds BOS / EOS as the vocabulary asks (add_bos / add_eos), like
  // llama.cpp's add_special. parse_special: control and unknown tokens written in the text (e.g.
  // "<s>", "<|eot_id|>") become their ids; without it their text is tokenized as ordinary text, so
  // a user's text cannot forge them. User-defined tokens (added, non-special) always match, as in
  // llama.cpp and Hugging Face tokenizers. Never throws on invalid UTF-8: SentencePiece takes a
  // byte that does not start a well-formed sequence as a character of its own (llama.cpp instead
  // takes the length from the lead byte alone; both agree on valid UTF-8); byte-level BPE never
  // matches invalid bytes in a pre-tokenizer expression, so each run of them is a word.
  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special = false) const;

  // encode(text, add_special, /*parse_special=*/true), except that a control or unknown token is
  // read only where its whole text lies outside `plain` ([begin, end) byte ranges): a rendered
  // chat prompt's user text (ChatTemplate::render_prompt's data_ranges) then cannot forge one,
  // while the template's own text still can. Between the tokens read, the text is tokenized as one
  // fragment exactly as encode does, so without control texts in `plain` the ids are encode's.
  // User-defined tokens match everywhere, as in encode.
  std::vector<Token> encode_with_plain_ranges(std::string_view text, bool add_special,
                                              std::span<const std::pair<size_t, size_t>> plain) const;

  // One token's text as llama.cpp renders it: normal pieces with U+2581 -> ' ' (SentencePiece) or
  // mapped from GPT-2's byte alphabet back to bytes (BPE; the piece may end inside a UTF-8
  // sequence, see TokenStreamer), byte tokens as the raw byte, user-defined text verbatim,
  // control/unknown text only when `special`, else ""; unused/undefined -> "".
  // Error(InvalidArgument) when id is out of range.
  std::string token_to_piece(Token id, bool special = false) const;

  // Ids -> text: the concatenated pieces. remove_special drops a leading BOS (when add_bos) and a
  // trailing EOS (when add_eos). For BPE, decode(encode(x, any)) == x as is. For SentencePiece,
  // when add_space_prefix, one leading ' ' is removed from the first
  // piece that renders any text (hidden control tokens such as BOS do not count), so that
  // decode(encode(x, any)) == x. This is SentencePiece's rule; llama.cpp's detokenize differs
  // in that it only strips the very first id's piece and keeps the space after a removed BOS.
  // For streaming output use TokenStreamer (token_to_piece, whole UTF-8 characters only).
  std::string decode(std::span<const Token> ids, bool remove_special = false,
                     bool unparse_special = false) const;

 private:
  struct Index;        // text -> id lookup, special-token order, BPE merge ranks and pre-tokenizer
  struct AnyModel {};  // selects the constructor that accepts both models

  // Validates and indexes the vectors (both models).
  Vocab(AnyModel, std::string_view model, std::vector<std::string> tokens, std::vector<float> scores,
        std::vector<TokenType> types, SpecialTokens special);

  void check_id(Token id) const;
  // encode's body. parse_special: control and unknown tokens are read, except where they overlap
  // `plain` (sorted, disjoint [begin, end) ranges).
  std::vector<Token> encode_(std::string_view text, bool add_special, bool parse_special,
                             std::span<const std::pair<size_t, size_t>> plain) const;
  void find_end_of_generation_();
  // Appends the SentencePiece ids of one text fragment (no special tokens in it); `prefix` adds
  // the leading space.
  void encode_spm_fragment_(std::string_view text, bool prefix, std::vector<Token>& out) const;
  // Appends the ids of `text` (spaces already escaped, prefix already added) by greedy merging.
  void tokenize_spm_(std::string_view text, std::vector<Token>& out) const;
  // Builds the merge table (tokenizer_bpe.cpp); Error(InvalidArgument) on a bad merge.
  void init_bpe_(const std::vector<std::string>& merges, std::string_view pre);
  // Appends the byte-level BPE ids of one text fragment (no special tokens in it).
  void encode_bpe_fragment_(std::string_view text, std::vector<Token>& out) const;
  // Appends the ids of one pre-tokenized word.
  void tokenize_bpe_word_(std::string_view word, std::vector<Token>& out) const;
  // Appends the WordPiece ids of one text fragment (no special tokens in it).
  void encode_wpm_fragment_(std::string_view text, std::vector<Token>& out) const;

  std::string model_;
  bool byte_level_ = false;
  bool wordpiece_ = false;
  bool wpm_lowercase_ = false, wpm_strip_accents_ = false;
  size_t max_token_len_ = 0;  // WordPiece: the longest token's bytes
  std::string pre_name_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  SpecialTokens special_;
  // Per byte: its "<0xXX>" or one-byte token (SentencePiece) or its alphabet character's token
  // (BPE), else unk; kNoToken where none of these exists.
  std::array<Token, 256> byte_tokens_{};
  std::vector<int16_t> byte_values_;  // per id: the byte of a Byte token, else -1
  std::vector<Token> end_of_generation_;
  std::unique_ptr<Index> index_;
};

}  // namespace tessera::llm
