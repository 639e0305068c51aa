// TokenStreamer: text comes out only in whole UTF-8 characters, on a hand-made byte-level
// vocabulary (one token per byte, so every split is known) and on the shared Llama 3 and Llama 2
// vocabularies, whose pieces split an emoji.
#include "tessera/llm/token_streamer.h"

#include <gtest/gtest.h>

#include "support/byte_vocab.h"
#include "support/vocab_vectors.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;
using testing_support::vocab_path;

namespace {

// Ids 0..255: the bytes (id = byte), 256 <|eot_id|> (control).
Vocab bytes_vocab() { return testing_support::byte_vocab({{"<|eot_id|>", TokenType::Control}}); }

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

TEST(TokenStreamer, HoldsAnEmojiUntilItsLastByte) {
  const Vocab v = bytes_vocab();
  TokenStreamer s(v);
  EXPECT_EQ(s.push('a'), "a");
  EXPECT_EQ(s.push(0xF0), "");  // U+1F999 🦙 is F0 9F A6 99
  EXPECT_EQ(s.pending(), 1u);
  EXPECT_EQ(s.push(0x9F), "");
  EXPECT_EQ(s.push(0xA6), "");
  EXPECT_EQ(s.pending(), 3u);
  EXPECT_EQ(s.push(0x99), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.push(0xC3), "");  // é = C3 A9
  EXPECT_EQ(s.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(s.finish(), "");
}

TEST(TokenStreamer, PassesInvalidBytesOn) {
  const Vocab v = bytes_vocab();
  TokenStreamer s(v);
  EXPECT_EQ(s.push(0x9F), "\x9F");  // a continuation byte with no lead can never complete
  EXPECT_EQ(s.push(0xFF), "\xFF");  // never valid in UTF-8
  EXPECT_EQ(s.push(0xF0), "");
  EXPECT_EQ(s.push('A'),
            "\xF0"
            "A");  // the lead byte was cut short: out as it is
  EXPECT_EQ(s.push(0xE2), "");
  EXPECT_EQ(s.push(0x96), "");
  EXPECT_EQ(s.finish(), "\xE2\x96");  // the end of the stream flushes what is held
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.finish(), "");
  EXPECT_THROW(s.push(257), Error);
}

TEST(TokenStreamer, ControlTokensOnlyWhenRendered) {
  const Vocab v = bytes_vocab();
  TokenStreamer hidden(v);
  EXPECT_EQ(hidden.push(256), "");
  TokenStreamer shown(v, true);
  EXPECT_EQ(shown.push(256), "<|eot_id|>");
}

TEST(TokenStreamer, SharedVocabulariesSplitEmoji) {
  const std::string text = "a\xF0\x9F\xA6\x99 caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD!";  // a🦙 café 你好!
  // Qwen2's vocabulary has 🦙 as one token (149955); Llama 3 and Llama 2 split it.
  for (const auto& [name, splits] : {std::pair{"llama-bpe", true}, {"qwen2", false}, {"llama-spm", true}}) {
    SCOPED_TRACE(name);
    const Vocab v = Vocab::from_gguf(gguf::File::open(vocab_path(name)));
    const std::vector<Token> ids = v.encode(text, false);
    TokenStreamer s(v);
    std::string out;
    int held = 0;
    for (const Token id : ids) {
      const std::string part = s.push(id);
      EXPECT_TRUE(valid_utf8(part)) << "token " << id;
      if (part.empty()) ++held;
      out += part;
    }
    out += s.finish();
    EXPECT_EQ(held > 0, splits) << held << " pushes printed nothing";
    // SentencePiece pieces carry the prefix space that decode strips.
    EXPECT_EQ(out, v.model() == "llama" ? " " + text : text);
  }
  // Llama 3 splits 🦙 into three tokens, the first two ending inside the sequence.
  const Vocab llama3 = Vocab::from_gguf(gguf::File::open(vocab_path("llama-bpe")));
  EXPECT_EQ(llama3.encode("\xF0\x9F\xA6\x99", false), (std::vector<Token>{9468, 99, 247}));
  TokenStreamer s(llama3);
  EXPECT_EQ(s.push(9468), "");
  EXPECT_EQ(s.push(99), "");
  EXPECT_EQ(s.push(247), "\xF0\x9F\xA6\x99");
}
