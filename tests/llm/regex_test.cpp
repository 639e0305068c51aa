// llm::Regex (PCRE2): Unicode properties, look-ahead, invalid UTF-8, compile errors, and
// backtracking deep enough to exhaust the JIT's stack (the interpreter then takes over).
#include "llm/regex.h"

#include <gtest/gtest.h>

#include "tessera/error.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

std::pair<size_t, size_t> span(const Regex& r, std::string_view s, size_t offset = 0) {
  const auto m = r.find(s, offset);
  return m ? std::pair{m->begin, m->end} : std::pair{size_t(-1), size_t(-1)};
}

}  // namespace

TEST(Regex, UnicodePropertiesAndLookAhead) {
  const Regex letters(R"(\p{L}+)");
  EXPECT_EQ(span(letters, "12 caf\xC3\xA9!"), (std::pair<size_t, size_t>{3, 8}));           // é is a letter
  EXPECT_EQ(span(letters, "\xD0\xBF\xD1\x80\xD0\xB8"), (std::pair<size_t, size_t>{0, 6}));  // при
  const Regex spaces(R"(\s+(?!\S))");
  EXPECT_EQ(span(spaces, "a   b"), (std::pair<size_t, size_t>{1, 3}));  // leaves one space for " b"
  EXPECT_EQ(span(spaces, "a  "), (std::pair<size_t, size_t>{1, 3}));
  EXPECT_EQ(span(spaces, "ab", 0), (std::pair<size_t, size_t>{size_t(-1), size_t(-1)}));
  EXPECT_EQ(span(letters, "ab cd", 2), (std::pair<size_t, size_t>{3, 5}));
  EXPECT_FALSE(letters.find("ab", 2));
  // \s is Unicode white space under UCP: U+3000 (ideographic space).
  EXPECT_EQ(span(Regex(R"(\s)"), "x\xE3\x80\x80"), (std::pair<size_t, size_t>{1, 4}));
}

TEST(Regex, InvalidUtf8NeverMatches) {
  const Regex any(".");
  EXPECT_EQ(span(any,
                 "\xFF\xC3"
                 "a"),
            (std::pair<size_t, size_t>{2, 3}));
  EXPECT_FALSE(any.find("\xFF\xFE\x80", 0));
}

TEST(Regex, CompileErrorsAreErrors) {
  try {
    Regex("[a-");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("[a-"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Regex(R"(\p{NoSuchProperty})"), Error);
}

TEST(Regex, DeepBacktrackingFallsBackFromTheJit) {
  // A group repeated a million times needs far more than the JIT's default stack.
  const Regex r("(?:a|b)*c");
  const std::string text = std::string(1000000, 'a') + "c";
  const auto m = r.find(text, 0);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->begin, 0u);
  EXPECT_EQ(m->end, text.size());
}
