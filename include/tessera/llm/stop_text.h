#pragma once
// Generated text as a reader sees it: tokens in, settled text out. Whole UTF-8 characters only
// (TokenStreamer), cut before the first stop string, and any tail that may still become a stop
// string held back until it cannot. The engine's slots and the C API's generation share it.
#include <string>
#include <vector>

#include "tessera/llm/token_streamer.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

class StopText {
 public:
  // Error(InvalidArgument) on an empty stop string. The vocabulary must outlive this.
  StopText(const Vocab& vocab, std::vector<std::string> stops);
  // The text that token `id` settles (possibly ""). After a stop string appears, stopped() is
  // true, the text ends before it, and later pushes are an Error.
  std::string push(Token id);
  // Everything still held (an incomplete UTF-8 tail, a possible stop's beginning): the end of the
  // text. Nothing after a stop string.
  std::string finish();
  bool stopped() const noexcept { return stopped_; }

 private:
  std::string settle(size_t end);

  TokenStreamer streamer_;
  std::vector<std::string> stops_;
  std::string text_;    // everything generated so far (cut at a stop string)
  size_t emitted_ = 0;  // bytes of text_ handed out
  bool stopped_ = false;
};

}  // namespace tessera::llm
