#pragma once
// Streaming detokenization: tokens in one at a time, complete UTF-8 text out. A token's piece may
// end inside a UTF-8 sequence (byte-level BPE pieces and SentencePiece byte tokens split
// characters such as emoji); those bytes are held until the tokens that complete them arrive.
#include <string>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

class TokenStreamer {
 public:
  // `render_special`: control tokens print their text (e.g. "<|eot_id|>"); otherwise they print
  // nothing, as Vocab::token_to_piece does. The vocabulary must outlive the streamer.
  explicit TokenStreamer(const Vocab& vocab, bool render_special = false);

  // The text that `id` completes: everything held before plus its piece, up to (not including) a
  // trailing UTF-8 sequence that is still incomplete. Bytes that can never form a character
  // (invalid UTF-8) are passed on as they are rather than held. Error(InvalidArgument) when the id
  // is out of range.
  std::string push(Token id);

  // The bytes still held (an incomplete sequence at the very end), which are then dropped from the
  // streamer; "" when nothing is held.
  std::string finish();

  // How many bytes are held for now.
  size_t pending() const noexcept { return pending_.size(); }

 private:
  const Vocab* vocab_;
  bool render_special_;
  std::string pending_;
};

}  // namespace tessera::llm
