// GBNF grammars: parsing and its errors, matching (GrammarState), token masks (GrammarMatcher)
// against brute force, and the Sampler under a grammar.
#include "tessera/llm/grammar.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "support/byte_vocab.h"
#include "tessera/error.h"
#include "tessera/llm/grammar_matcher.h"
#include "tessera/llm/grammar_state.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/vocab_trie.h"

namespace tessera::llm {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text, const GrammarLimits& limits = {}) {
  return Grammar::parse(text, limits);
}

// Whether the whole text is a sentence of the grammar.
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.accept(text) && s.complete();
}

// The message of the Error parsing `text` throws ("" when it parses).
std::string parse_error(const std::string& text, const GrammarLimits& limits = {}) {
  try {
    Grammar::parse(text, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

const char* kArithmetic = R"GBNF(
# Arithmetic with precedence.
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
)GBNF";

const char* kJson = R"GBNF(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)GBNF";

TEST(GrammarTest, ParseErrorsNameTheLineAndColumn) {
  EXPECT_NE(parse_error("root ::= \"a\" )").find("line 1, column 14"), std::string::npos)
      << parse_error("root ::= \"a\" )");
  EXPECT_NE(parse_error("root ::= \"abc").find("unterminated string literal at line 1"), std::string::npos);
  EXPECT_NE(parse_error("root ::= x\nx ::= [a-z\n").find("unclosed '['"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\" | \"b\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape '\\q' at line 1, column 11"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\n\n  x = \"b\"").find("line 3"), std::string::npos);
  EXPECT_NE(parse_error("root ::= * \"a\"").find("repeats nothing"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,2}").find("maximum below its minimum"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"**").find("repetition of a repetition"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]").find("runs backwards"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\xZZ\"").find("hex digits"), std::string::npos);
}

TEST(GrammarTest, RulesMustBeDefinedOnceAndRootMustExist) {
  EXPECT_NE(parse_error("root ::= item\n").find("rule 'item' is not defined at line 1, column 10"),
            std::string::npos);
  EXPECT_NE(parse_error("start ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"").find("rule 'root' is defined twice at line 2"),
            std::string::npos);
  EXPECT_NE(parse_error("").find("no 'root' rule"), std::string::npos);
}

TEST(GrammarTest, LeftRecursionIsRefusedNamingTheRule) {
  EXPECT_NE(
      parse_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"").find("rule 'expr' is left-recursive"),
      std::string::npos);
  // Indirect, and through a rule that may match nothing.
  EXPECT_NE(parse_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(
      parse_error("root ::= opt root \"x\" | \"y\"\nopt ::= \"o\"?").find("rule 'root' is left-recursive"),
      std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"? root)* \"b\"").find("left-recursive"), std::string::npos);
  // Right recursion is fine.
  EXPECT_EQ(parse_error("root ::= \"x\" root | \"y\""), "");
}

TEST(GrammarTest, LimitsAreErrors) {
  EXPECT_NE(parse_error("root ::= \"a\"{0,5000}").find("beyond the limit of 2000"), std::string::npos);
  GrammarLimits small;
  small.max_nesting = 3;
  EXPECT_NE(parse_error("root ::= ((((\"a\"))))", small).find("nest deeper than 3"), std::string::npos);
  EXPECT_EQ(parse_error("root ::= (((\"a\")))", small), "");
  small.max_rules = 4;
  EXPECT_NE(parse_error("root ::= \"a\"{0,10}", small).find("more than 4 rules"), std::string::npos);
  GrammarLimits symbols;
  symbols.max_symbols = 100;
  EXPECT_NE(parse_error("root ::= \"abcdefghij\"{20}", symbols).find("more than 100 symbols"),
            std::string::npos);
}

TEST(GrammarTest, StackLimitsAreErrors) {
  GrammarLimits stacks;
  stacks.max_stacks = 2;
  EXPECT_THROW(GrammarState(compile("root ::= \"a\" | \"a\" \"b\" | \"a\" \"c\"", stacks)), Error);
  GrammarLimits frames;
  frames.max_frames = 64;
  GrammarState s(compile("root ::= \"(\" root \")\" | \"x\"", frames));
  EXPECT_THROW(
      {
        for (int i = 0; i < 1000; ++i) s.accept("(");
      },
      Error);
}

TEST(GrammarTest, Arithmetic) {
  const auto g = compile(kArithmetic);
  for (const char* ok : {"1", "12+3", "(1+2)*3", "-(4/2)-7", "((((1))))", "1*2*3-4/5"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "+", "1+", "(1", "1)", "1 + 2", "a", "1++2"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  GrammarState s(g);
  EXPECT_TRUE(s.accept("(1+"));
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.accept(")"));  // refused and the state unchanged
  EXPECT_TRUE(s.accept("2)"));
  EXPECT_TRUE(s.complete());
  EXPECT_TRUE(s.can_continue());  // "*3" may follow
}

TEST(GrammarTest, Json) {
  const auto g = compile(kJson);
  for (const char* ok : {"{}", "{\"a\": 1}", "{\"a\":[1,2.5e3,true,null,\"x\\n\\u00e9\"],\"b\":{}}",
                         "{\n  \"k\": \"v\"\n}", "{\"\xC3\xA9\": -0.5}"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"[]", "{", "{\"a\"}", "{\"a\":}", "{\"a\": 01}", "{\"a\": tru}", "{'a': 1}",
                          "{\"a\":\"\x01\"}", "{\"a\": 1,}"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(GrammarTest, RepetitionBounds) {
  const auto g = compile("root ::= \"a\"{2,4} \"b\"{3} \"c\"{2,} \"d\"{,2}");
  EXPECT_TRUE(matches(g, "aabbbcc"));
  EXPECT_TRUE(matches(g, "aaaabbbccccccdd"));
  EXPECT_FALSE(matches(g, "abbbcc"));
  EXPECT_FALSE(matches(g, "aaaaabbbcc"));
  EXPECT_FALSE(matches(g, "aabbcc"));
  EXPECT_FALSE(matches(g, "aabbbc"));
  EXPECT_FALSE(matches(g, "aabbbccddd"));
  const auto group = compile("root ::= (\"ab\" | \"c\"){1,3} \"!\"?");
  EXPECT_TRUE(matches(group, "ab"));
  EXPECT_TRUE(matches(group, "cabc!"));
  EXPECT_FALSE(matches(group, "ababab c"));
  EXPECT_FALSE(matches(group, "ababc c"));
  EXPECT_FALSE(matches(group, "!"));
  EXPECT_TRUE(matches(compile("root ::= [0-9]{0}"), ""));
  EXPECT_TRUE(matches(compile("root ::= \"x\" ()* \"y\""), "xy"));
}

TEST(GrammarTest, Utf8ClassesAndAnyCharacter) {
  // Greek lower case, the euro sign, a negated class and an emoji (4 bytes).
  const auto g = compile("root ::= [α-ω]+ \"€\"? [^a-z] .");
  EXPECT_TRUE(matches(g, "αβγ€Zx"));
  EXPECT_TRUE(matches(g, "ω\xF0\x9F\x98\x80\xF0\x9F\x98\x80"));  // 😀😀
  EXPECT_FALSE(matches(g, "abcZx"));
  EXPECT_FALSE(matches(g, "αaZ"));
  EXPECT_FALSE(matches(g, "α€z "));
  // Escapes in classes and literals.
  const auto esc = compile(R"G(root ::= [\x41-\x43\u00e9] "\U0001F600" [\]\[\-])G");
  EXPECT_TRUE(matches(esc, "B😀]"));
  EXPECT_TRUE(matches(esc, "é😀-"));
  EXPECT_FALSE(matches(esc, "D😀]"));
  // Invalid UTF-8 never matches, even against `.`.
  const auto any = compile("root ::= .*");
  EXPECT_TRUE(matches(any, "any text, ünïcödé"));
  EXPECT_FALSE(matches(any, "\xC0\x80"));          // overlong
  EXPECT_FALSE(matches(any, "\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(matches(any, "\x80"));              // a lone continuation byte
  EXPECT_FALSE(matches(any, "\xF4\x90\x80\x80"));  // beyond U+10FFFF
}

TEST(GrammarTest, TextMayStopInsideACharacter) {
  const auto g = compile("root ::= \"a\" [α-γ] \"b\"");
  GrammarState s(g);
  EXPECT_TRUE(s.accept("a\xCE"));  // α is CE B1: a token that ends inside the character
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.accepts("\xBF"));  // CE BF is ο, outside the class
  EXPECT_FALSE(s.accepts("b"));     // the character must be finished first
  EXPECT_TRUE(s.accept("\xB2"));    // β
  EXPECT_TRUE(s.accept("b"));
  EXPECT_TRUE(s.complete());
  // A lead byte that can start no allowed character is refused at once.
  GrammarState t(g);
  EXPECT_TRUE(t.accept("a"));
  EXPECT_FALSE(t.accepts("\xE2"));  // three-byte characters are all outside [α-γ]
  EXPECT_FALSE(t.accepts("\xCF"));  // CF 80.. are beyond γ
}

// --- token masks

Vocab mask_vocab() {
  return testing_support::byte_vocab({{"true", TokenType::Normal},
                                      {"false", TokenType::Normal},
                                      {"null", TokenType::Normal},
                                      {"{\"", TokenType::Normal},
                                      {"\":", TokenType::Normal},
                                      {"\": ", TokenType::Normal},
                                      {"12", TokenType::Normal},
                                      {"1.5", TokenType::Normal},
                                      {" {", TokenType::Normal},
                                      {"αβ", TokenType::Normal},
                                      {"\xCE\xB1\xCE", TokenType::Normal},  // α and half of the next
                                      {"€", TokenType::Normal},
                                      {"\"}", TokenType::Normal},
                                      {"\"\n", TokenType::Normal},
                                      {"abc", TokenType::Normal},
                                      {"(1+", TokenType::Normal},
                                      {"<|endoftext|>", TokenType::Control},
                                      {"<ctl>", TokenType::Control}});
}

// Every token tried against a copy of the state.
TokenMask brute_force(const GrammarState& state, const VocabTrie& trie) {
  TokenMask m;
  for (size_t i = 0; i < trie.vocab_size(); ++i) {
    const std::string& piece = trie.piece(static_cast<Token>(i));
    if (piece.empty()) continue;
    GrammarState copy = state;
    if (copy.accept(piece)) m.allowed.push_back(static_cast<Token>(i));
  }
  m.end_of_generation = state.complete();
  return m;
}

TEST(GrammarMaskTest, TrieHoldsEveryPieceButControlTokens) {
  const Vocab v = mask_vocab();
  const VocabTrie trie(v);
  EXPECT_EQ(trie.vocab_size(), v.size());
  ASSERT_EQ(trie.end_of_generation().size(), 1u);
  EXPECT_EQ(v.text(trie.end_of_generation()[0]), "<|endoftext|>");
  EXPECT_EQ(trie.piece(v.find("<ctl>")), "");
  EXPECT_EQ(trie.piece(v.find("αβ")), "αβ");
  EXPECT_EQ(trie.tokens().size(), v.size() - 2);
}

TEST(GrammarMaskTest, MasksEqualBruteForce) {
  const Vocab v = mask_vocab();
  auto trie = std::make_shared<const VocabTrie>(v);
  struct Case {
    const char* grammar;
    std::vector<std::string> prefixes;
  };
  const std::vector<Case> cases = {
      {kJson,
       {"", "{", "{\"", "{\"a", "{\"a\":", "{\"a\": 1", "{\"a\": 1.", "{\"a\": t", "{\"a\": [",
        "{\"a\":\"\xCE", "{}", "{\"\xCE\xB1\xCE"}},
      {kArithmetic, {"", "(", "(1", "(1+", "12*", "(1+2)"}},
      {"root ::= [α-γ]+ \"€\"? | \"abc\"", {"", "\xCE", "α", "αβ", "α€", "ab"}},
      {"root ::= \"a\"{2,4}", {"", "a", "aa", "aaaa"}},
  };
  for (const Case& c : cases) {
    const auto g = compile(c.grammar);
    for (const std::string& prefix : c.prefixes) {
      GrammarMatcher m(g, trie);
      for (unsigned char b : prefix) m.accept(static_cast<Token>(b));  // byte tokens: id = byte
      const TokenMask got = m.mask();
      const TokenMask want = brute_force(m.state(), *trie);
      EXPECT_EQ(got.allowed, want.allowed) << c.grammar << " after '" << prefix << "'";
      EXPECT_EQ(got.end_of_generation, want.end_of_generation) << c.grammar << " after '" << prefix << "'";
      // The walk leaves the state as it was.
      EXPECT_EQ(m.mask().allowed, want.allowed);
    }
  }
}

TEST(GrammarMaskTest, AcceptAndApply) {
  const Vocab v = mask_vocab();
  auto trie = std::make_shared<const VocabTrie>(v);
  GrammarMatcher m(compile("root ::= \"true\" | \"false\""), trie);
  EXPECT_THROW(m.accept(v.find("<|endoftext|>")), Error);  // not complete yet
  EXPECT_THROW(m.accept(v.find("null")), Error);
  std::vector<float> logits(v.size(), 1.0f);
  m.apply(logits);
  std::vector<Token> finite;
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isfinite(logits[i])) finite.push_back(static_cast<Token>(i));
  EXPECT_EQ(finite, (std::vector<Token>{'f', 't', v.find("true"), v.find("false")}));
  m.accept(v.find("true"));
  EXPECT_TRUE(m.only_end_of_generation());
  std::fill(logits.begin(), logits.end(), 2.0f);
  m.apply(logits);
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_EQ(std::isfinite(logits[i]), static_cast<Token>(i) == v.find("<|endoftext|>")) << i;
  m.accept(v.find("<|endoftext|>"));  // allowed now, and changes nothing
  // A grammar no token can continue (no token spells U+0378's bytes? every byte is a token, so
  // use a vocabulary-independent dead end: a complete grammar without any EOG token).
  const Vocab plain = testing_support::byte_vocab();
  GrammarMatcher dead(compile("root ::= \"x\""), std::make_shared<const VocabTrie>(plain));
  dead.accept('x');
  std::vector<float> l(plain.size(), 0.0f);
  EXPECT_THROW(dead.apply(l), Error);
}

TEST(GrammarMaskTest, MasksAreCachedPerState) {
  const Vocab v = mask_vocab();
  auto trie = std::make_shared<const VocabTrie>(v);
  GrammarMatcher m(compile(kJson), trie);
  for (char c : std::string("{\"a\": \"")) {
    m.mask();
    m.accept(static_cast<uint8_t>(c));
  }
  const uint64_t walks = m.walks();
  for (char c : std::string("hello world")) {  // inside the string every state is the same
    m.mask();
    m.accept(static_cast<uint8_t>(c));
  }
  EXPECT_LE(m.walks(), walks + 1);
  EXPECT_GE(m.cache_hits(), 10u);
}

TEST(GrammarMaskTest, SamplerFollowsTheGrammar) {
  const Vocab v = mask_vocab();
  auto trie = std::make_shared<const VocabTrie>(v);
  const auto g = compile(kArithmetic);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  for (int run = 0; run < 20; ++run) {
    SamplerOptions o;
    o.seed = static_cast<uint64_t>(run);
    o.temperature = run % 2 ? 1.0f : 0.0f;
    o.top_k = 0;
    o.logit_bias = {{'+', 100.0f}};  // the mask comes first: a bias never brings a forbidden token back
    Sampler s(o, std::make_unique<GrammarMatcher>(g, trie));
    std::string text;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> logits(v.size());
      for (float& l : logits) l = noise(rng);
      logits[static_cast<size_t>(v.find("<|endoftext|>"))] = 3.0f;
      const Token t = s.sample(logits);
      if (v.is_end_of_generation(t)) break;
      text += trie->piece(t);
    }
    GrammarState check(g);
    EXPECT_TRUE(check.accept(text)) << text;
  }
}

}  // namespace
}  // namespace tessera::llm
