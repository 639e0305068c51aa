// StopText: generated text cut at the first stop string, a tail that may begin one held back,
// never a split UTF-8 character, on a vocabulary of one token per byte (so every split is known).
#include "tessera/llm/stop_text.h"

#include <gtest/gtest.h>

#include "support/byte_vocab.h"
#include "tessera/error.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

// Pushes every byte of `text`; returns what came out, piece by piece.
std::vector<std::string> push_all(StopText& s, const std::string& text) {
  std::vector<std::string> out;
  for (unsigned char c : text) {
    if (s.stopped()) break;
    out.push_back(s.push(c));
  }
  return out;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string all;
  for (const auto& p : pieces) all += p;
  return all;
}

}  // namespace

TEST(StopText, TextEndsBeforeTheFirstStopString) {
  const Vocab v = testing_support::byte_vocab();
  StopText s(v, {"END", "ab"});
  const auto pieces = push_all(s, "xyzaENDab");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(joined(pieces), "xyza");
  EXPECT_EQ(s.finish(), "");
  EXPECT_THROW(s.push('q'), Error);
}

TEST(StopText, APossibleBeginningIsHeldUntilItCannotBeOne) {
  const Vocab v = testing_support::byte_vocab();
  StopText s(v, {"END"});
  EXPECT_EQ(s.push('a'), "a");
  EXPECT_EQ(s.push('E'), "");     // may begin END
  EXPECT_EQ(s.push('N'), "");     // EN still may
  EXPECT_EQ(s.push('d'), "ENd");  // not END after all
  EXPECT_EQ(s.push('E'), "");
  EXPECT_EQ(s.finish(), "E");  // the end of the text: nothing more can come
  EXPECT_FALSE(s.stopped());
}

TEST(StopText, UTF8IsNeverSplitAndAStopMayFollowACharacter) {
  const Vocab v = testing_support::byte_vocab();
  StopText s(v, {"\xC3\xA9!"});                     // "é!"
  const std::string text = "ca\xC3\xA7\xC3\xA9!x";  // "caçé!x"
  std::vector<std::string> pieces = push_all(s, text);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(joined(pieces), "ca\xC3\xA7");
  for (const auto& p : pieces) {
    if (!p.empty()) {
      EXPECT_NE(static_cast<unsigned char>(p.back()) & 0xC0, 0xC0) << "a piece ends in a lead byte";
    }
  }
}

TEST(StopText, WithoutStopsItIsTheStreamersText) {
  const Vocab v = testing_support::byte_vocab();
  StopText s(v, {});
  const auto pieces = push_all(s, "h\xC3\xA9");
  EXPECT_EQ(pieces, (std::vector<std::string>{"h", "", "\xC3\xA9"}));
  EXPECT_EQ(s.push(0xE2), "");
  EXPECT_EQ(s.finish(), "\xE2");  // an incomplete tail comes out at the end as it is
}

TEST(StopText, AnEmptyStopStringIsRefused) {
  const Vocab v = testing_support::byte_vocab();
  EXPECT_THROW(StopText(v, {"a", ""}), Error);
}
