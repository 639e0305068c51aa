// Tests of llm::Vocab: hand-made vocabularies with hand-derived ids, a naive re-implementation of
// the greedy merge as an independent oracle, and llama.cpp's own test vectors for the Llama 2 vocab.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/vocab_vectors.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

constexpr const char* kMark = "\xE2\x96\x81";  // U+2581

std::string mark(const std::string& s) { return kMark + s; }

// 0 <unk>, 1 <s>, 2 </s>, three byte tokens, then normal pieces with chosen scores.
Vocab small_vocab(SpecialTokens special = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>",  kMark,
                                     "a",     "b",   "c",    "ab",     "bc",     mark("a"), "abc"};
  std::vector<float> scores = {0, 0, 0, 0, 0, 0, -1, -2, -3, -4, -5, -1, -6, -7};
  std::vector<TokenType> types = {TokenType::Unknown, TokenType::Control, TokenType::Control,
                                  TokenType::Byte,    TokenType::Byte,    TokenType::Byte};
  types.resize(tokens.size(), TokenType::Normal);
  return Vocab("llama", tokens, scores, types, special);
}

using Ids = std::vector<Token>;

// Independent oracle: repeatedly merge the best adjacent pair (highest score, then leftmost) by
// scanning the whole piece list, then map pieces to ids or bytes.
Ids naive_encode(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                 const std::string& text, bool space_prefix, Token unk) {
  auto find = [&](const std::string& s) {
    Token found = kNoToken;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == s) found = Token(i);
    return found;
  };
  std::string s = (space_prefix && !text.empty()) ? " " + text : text;
  std::string esc;
  for (char c : s) esc += c == ' ' ? std::string(kMark) : std::string(1, c);
  std::vector<std::string> pieces;
  for (size_t i = 0; i < esc.size();) {
    auto c = uint8_t(esc[i]);
    size_t n = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC0 && c < 0xE0 ? 2 : 1;
    bool ok = i + n <= esc.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (uint8_t(esc[i + k]) & 0xC0) == 0x80;
    if (!ok) n = 1;
    pieces.push_back(esc.substr(i, n));
    i += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < pieces.size(); ++i) {
      Token id = find(pieces[i] + pieces[i + 1]);
      if (id == kNoToken) continue;
      if (best < 0 || scores[size_t(id)] > best_score) {
        best = int(i);
        best_score = scores[size_t(id)];
      }
    }
    if (best < 0) break;
    pieces[size_t(best)] += pieces[size_t(best) + 1];
    pieces.erase(pieces.begin() + best + 1);
  }
  Ids out;
  for (const auto& p : pieces) {
    Token id = find(p);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char b : p) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", unsigned(uint8_t(b)));
      Token bt = find(hex);
      if (bt == kNoToken) bt = find(std::string(1, b));
      out.push_back(bt == kNoToken ? unk : bt);
    }
  }
  return out;
}

}  // namespace

TEST(Tokenizer, MergesByScoreNotPosition) {
  Vocab v = small_vocab();
  // "▁abc": pairs ▁a (-6), ab (-5), bc (-1): bc first, then ▁a; "abc" (-7) is never reachable.
  EXPECT_EQ(v.encode("abc", false), (Ids{12, 11}));
  EXPECT_EQ(v.encode("abc", true), (Ids{1, 12, 11}));
  // "▁ab": ab (-5) beats ▁a (-6); then ▁+ab is not a token.
  EXPECT_EQ(v.encode("ab", false), (Ids{6, 10}));
  EXPECT_EQ(v.encode("a", false), (Ids{12}));
}

TEST(Tokenizer, EqualScoresMergeLeftmostFirst) {
  SpecialTokens sp;
  sp.add_space_prefix = false;
  // 3 x, 4 xx, 5 xxx, 6 y, 7 xy, 8 yx
  Vocab v("llama", {"<unk>", "<s>", "</s>", "x", "xx", "xxx", "y", "xy", "yx"},
          {0, 0, 0, -1, -1, -2, -1, -1, -1},
          {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Normal, TokenType::Normal,
           TokenType::Normal, TokenType::Normal, TokenType::Normal, TokenType::Normal},
          sp);
  EXPECT_EQ(v.encode("xyx", false), (Ids{7, 3}));  // xy and yx tie: the leftmost pair merges
  EXPECT_EQ(v.encode("yxy", false), (Ids{8, 6}));
  EXPECT_EQ(v.encode("xx", false), (Ids{4}));
  EXPECT_EQ(v.encode("xxx", false), (Ids{5}));      // xx x, then the new pair xx+x = xxx
  EXPECT_EQ(v.encode("xxxx", false), (Ids{4, 4}));  // xx x x -> xx xx (-1 beats xxx's -2)
  // xx x x x -> xx xx x -> xx xxx (xx+xx is no token)
  EXPECT_EQ(v.encode("xxxxx", false), (Ids{4, 5}));
}

TEST(Tokenizer, ByteFallbackAndUnknownBytes) {
  Vocab v = small_vocab();
  EXPECT_EQ(v.encode("\xC3\xA9", false), (Ids{6, 4, 5}));  // é: not a piece, both bytes exist
  EXPECT_EQ(v.encode("a\n", false), (Ids{12, 3}));
  EXPECT_EQ(v.encode("Z", false), (Ids{6, 0}));  // no <0x5A> and no "Z": the unknown token
  EXPECT_EQ(v.byte_token(0x0A), 3);
  EXPECT_EQ(v.byte_token(0x5A), 0);
  // Without an unknown token an unrepresentable byte is an error, not a crash.
  SpecialTokens sp;
  sp.unk = kNoToken;
  Vocab no_unk = small_vocab(sp);
  EXPECT_THROW(no_unk.encode("Z", false), Error);
}

TEST(Tokenizer, EmptyTextAndSpaces) {
  Vocab v = small_vocab();
  EXPECT_EQ(v.encode("", false), Ids{});
  EXPECT_EQ(v.encode("", true), Ids{1});
  EXPECT_EQ(v.encode(" ", false), (Ids{6, 6}));  // "▁▁": no "▁▁" piece
  EXPECT_EQ(v.encode("  a", false), (Ids{6, 6, 12}));
  SpecialTokens sp;
  sp.add_eos = true;
  Vocab with_eos = small_vocab(sp);
  EXPECT_EQ(with_eos.encode("a", true), (Ids{1, 12, 2}));
  EXPECT_EQ(with_eos.encode("a", false), (Ids{12}));
}

TEST(Tokenizer, InvalidUtf8DoesNotCrash) {
  Vocab v = small_vocab();
  EXPECT_EQ(v.encode("\xC3", false), (Ids{6, 4}));  // truncated sequence: its byte
  EXPECT_EQ(v.encode("\xC3"
                     "a",
                     false),
            (Ids{6, 4, 7}));                               // bad continuation: lead byte alone
  EXPECT_EQ(v.encode("\xA9\xA9", false), (Ids{6, 5, 5}));  // stray continuation bytes
  EXPECT_EQ(v.encode("\xFF", false), (Ids{6, 0}));         // never valid, no byte token
  EXPECT_EQ(v.encode("\xE2\x96", false), (Ids{6, 0, 0}));  // truncated U+2581
  EXPECT_EQ(v.decode(v.encode("\xC3"
                              "ab\xC3",
                              false)),
            "\xC3"
            "ab\xC3");
}

TEST(Tokenizer, SpecialTokensInText) {
  Vocab v = small_vocab();
  // Split on <s>; the text after a special token gets its own space prefix.
  EXPECT_EQ(v.encode("a<s>b", false, true), (Ids{12, 1, 6, 8}));
  EXPECT_EQ(v.encode("<s>", false, true), (Ids{1}));
  EXPECT_EQ(v.encode("<s></s>a", true, true), (Ids{1, 1, 2, 12}));
  // Not parsed: "<", "s", ">" are unknown characters.
  EXPECT_EQ(v.encode("a<s>b", false, false), (Ids{12, 0, 0, 0, 8}));
}

TEST(Tokenizer, PlainRangesReadNoControlTokens) {
  Vocab v = small_vocab();
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  // No ranges: encode with parse_special.
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{}), v.encode("a<s>b<s>", false, true));
  // The first <s> lies in plain text (wholly or in part): it is text, and the fragment up to the next
  // control token is one piece of text, tokenized as encode tokenizes a fragment.
  const Ids first_plain{12, 0, 0, 0, 8, 1};
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{{1, 4}}), first_plain);
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{{3, 4}}), first_plain);
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{{0, 2}}), first_plain);
  // Ranges that only touch a control token leave it be; unsorted and overlapping ranges are fine.
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{{0, 1}, {4, 5}}), (Ids{12, 1, 6, 8, 1}));
  EXPECT_EQ(v.encode_with_plain_ranges("a<s>b<s>", false, Ranges{{4, 8}, {0, 5}, {2, 2}}),
            (Ids{12, 0, 0, 0, 8, 0, 0, 0}));
  // A later occurrence outside the range is still read; BOS as add_special asks.
  EXPECT_EQ(v.encode_with_plain_ranges("<s><s>", true, Ranges{{0, 3}}), (Ids{1, 6, 0, 0, 0, 1}));
  // User-defined tokens match inside plain text too; control ones do not.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", kMark, "q", "[x]"};
  std::vector<TokenType> types = {TokenType::Unknown, TokenType::Control, TokenType::Control,
                                  TokenType::Normal,  TokenType::Normal,  TokenType::UserDefined};
  Vocab u("llama", tokens, {}, types);
  EXPECT_EQ(u.encode_with_plain_ranges("q[x]q</s>", false, Ranges{{0, 9}}), (Ids{3, 4, 5, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(u.encode_with_plain_ranges("q[x]q</s>", false, Ranges{{0, 5}}), (Ids{3, 4, 5, 3, 4, 2}));
}

TEST(Tokenizer, UserDefinedTokensAlwaysSplitLongestFirst) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", kMark, "q", "[x]", "[x]y"};
  std::vector<TokenType> types = {TokenType::Unknown,    TokenType::Control, TokenType::Control,
                                  TokenType::Normal,     TokenType::Normal,  TokenType::UserDefined,
                                  TokenType::UserDefined};
  Vocab v("llama", tokens, {}, types);
  EXPECT_EQ(v.encode("[x]y", false), (Ids{6}));
  EXPECT_EQ(v.encode("q[x]q", false), (Ids{3, 4, 5, 3, 4}));
  EXPECT_EQ(v.decode(Ids{3, 4, 5, 3, 4}), "q[x] q");
  EXPECT_EQ(v.token_to_piece(6), "[x]y");
}

TEST(Tokenizer, PiecesAndDecode) {
  Vocab v = small_vocab();
  EXPECT_EQ(v.token_to_piece(12), " a");
  EXPECT_EQ(v.token_to_piece(6), " ");
  EXPECT_EQ(v.token_to_piece(4), "\xC3");
  EXPECT_EQ(v.token_to_piece(1), "");
  EXPECT_EQ(v.token_to_piece(1, true), "<s>");
  EXPECT_EQ(v.token_to_piece(0), "");
  EXPECT_EQ(v.token_to_piece(0, true), "<unk>");
  EXPECT_THROW(v.token_to_piece(14), Error);
  EXPECT_THROW(v.token_to_piece(-1), Error);
  EXPECT_THROW(v.decode(Ids{12, 99}), Error);

  EXPECT_EQ(v.decode(Ids{12, 11}), "abc");
  EXPECT_EQ(v.decode(Ids{1, 12, 11}), "abc");                   // space after BOS removed
  EXPECT_EQ(v.decode(Ids{1, 12, 11}, false, true), "<s> abc");  // shown BOS keeps it
  EXPECT_EQ(v.decode(Ids{6, 6, 12}), "  a");
  EXPECT_EQ(v.decode(Ids{12, 2, 12}), "a a");
  EXPECT_EQ(v.decode(Ids{6, 4, 5}), "\xC3\xA9");
  EXPECT_EQ(v.decode(Ids{}), "");

  SpecialTokens sp;
  sp.add_eos = true;
  Vocab with_eos = small_vocab(sp);
  EXPECT_EQ(with_eos.decode(Ids{1, 12, 2}, true, true), "a");
  EXPECT_EQ(with_eos.decode(Ids{1, 12, 2}, false, true), "<s> a</s>");

  sp.add_space_prefix = false;
  Vocab no_prefix = small_vocab(sp);
  EXPECT_EQ(no_prefix.encode("a", false), (Ids{7}));
  EXPECT_EQ(no_prefix.decode(Ids{12}), " a");
}

TEST(Tokenizer, LookupsAndValidation) {
  Vocab v = small_vocab();
  EXPECT_EQ(v.size(), 14u);
  EXPECT_EQ(v.find("bc"), 11);
  EXPECT_EQ(v.find("zz"), kNoToken);
  EXPECT_EQ(v.text(13), "abc");
  EXPECT_FLOAT_EQ(v.score(11), -1.0f);
  EXPECT_EQ(v.type(3), TokenType::Byte);
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 0);

  try {
    Vocab("gpt2", {"a"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("gpt2"), std::string::npos);
  }
  EXPECT_THROW(Vocab("llama", {"<unk>", "<s>", "</s>"}, {0, 0}), Error);  // sizes differ
  EXPECT_THROW(Vocab("llama", {"<unk>", "<s>", "</s>", "<0xZZ>"}, {},
                     {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Byte}),
               Error);                                                         // bad byte text
  EXPECT_THROW(Vocab("llama", {"<unk>", "<s>"}), Error);                       // EOS id 2 out of range
  EXPECT_THROW(Vocab("llama", {"<unk>", "<s>", "</s>"}, {0, NAN, 0}), Error);  // NaN score
  EXPECT_THROW(Vocab("llama", {}), Error);
  SpecialTokens none;
  none.bos = kNoToken;
  EXPECT_THROW(Vocab("llama", {"<unk>", "<s>", "</s>"}, {}, {}, none), Error);  // add_bos, no BOS
  none.add_bos = false;
  Vocab ok("llama", {"<unk>", "<s>", "</s>"}, {}, {}, none);
  EXPECT_EQ(ok.encode("", true), Ids{});
}

TEST(Tokenizer, MatchesNaiveMergeOnRandomVocabs) {
  std::mt19937 rng(1234);
  const std::vector<std::string> alphabet = {"a", "b", "c", kMark, "\xC3\xA9"};
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<TokenType> types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      tokens.push_back(hex);
      types.push_back(TokenType::Byte);
    }
    for (const auto& a : alphabet) {
      if (rng() % 4 != 0) {
        tokens.push_back(a);
        types.push_back(TokenType::Normal);
      }
    }
    for (int i = 0; i < 30; ++i) {  // random multi-character pieces (duplicates allowed)
      std::string p;
      const int len = 2 + int(rng() % 4);
      for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
      tokens.push_back(p);
      types.push_back(TokenType::Normal);
    }
    std::vector<float> scores(tokens.size(), 0.0f);
    for (size_t i = 3 + 256; i < tokens.size(); ++i) scores[i] = -float(rng() % 6);  // many ties
    Vocab v("llama", tokens, scores, types);
    for (int s = 0; s < 20; ++s) {
      std::string text;
      const int len = int(rng() % 12);
      for (int k = 0; k < len; ++k) {
        const int r = int(rng() % 7);
        text += r == 5 ? std::string(" ") : r == 6 ? std::string("\xC3") : alphabet[size_t(r)];
      }
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " text '" << text << "'");
      EXPECT_EQ(v.encode(text, false), naive_encode(tokens, scores, text, true, 0));
    }
  }
}

namespace {

using testing_support::kVocabDir;
using testing_support::read_vocab_inputs;
using testing_support::read_vocab_outputs;

const std::string kLlamaVocab = kVocabDir + "ggml-vocab-llama-spm.gguf";

}  // namespace

TEST(TokenizerGguf, LlamaVocabMetadata) {
  const Vocab v = Vocab::from_gguf(gguf::File::open(kLlamaVocab));
  EXPECT_EQ(v.size(), 32000u);
  EXPECT_EQ(v.model(), "llama");
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  EXPECT_EQ(v.unk(), 0);
  EXPECT_TRUE(v.special().add_bos);
  EXPECT_FALSE(v.special().add_eos);
  EXPECT_EQ(v.text(1), "<s>");
  EXPECT_EQ(v.type(1), TokenType::Control);
  EXPECT_EQ(v.type(0), TokenType::Unknown);
  EXPECT_EQ(v.type(3), TokenType::Byte);
  EXPECT_EQ(v.text(3 + 0x41), "<0x41>");
  EXPECT_EQ(v.byte_token(0x41), 3 + 0x41);
  EXPECT_EQ(v.find(mark("Hello")), 15043);
  EXPECT_EQ(v.token_to_piece(15043), " Hello");
}

TEST(TokenizerGguf, LlamaVocabMatchesLlamaCppVectors) {
  const Vocab v = Vocab::from_gguf(gguf::File::open(kLlamaVocab));
  const auto inputs = read_vocab_inputs(kLlamaVocab + ".inp");
  const auto expected = read_vocab_outputs(kLlamaVocab + ".out");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "string " << i << ": '" << inputs[i] << "'");
    EXPECT_EQ(v.encode(inputs[i], false), expected[i]);
    EXPECT_EQ(v.encode(inputs[i], false, true), expected[i]);  // no special tokens in these texts
    const Ids with_bos = v.encode(inputs[i], true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], 1);
    EXPECT_EQ(Ids(with_bos.begin() + 1, with_bos.end()), expected[i]);
    // Byte fallback makes encoding lossless, and decoding removes the prefix space.
    EXPECT_EQ(v.decode(expected[i]), inputs[i]);
    EXPECT_EQ(v.decode(with_bos), inputs[i]);
    EXPECT_EQ(v.decode(with_bos, true), inputs[i]);
  }
}

TEST(TokenizerGguf, LlamaVocabMatchesNaiveMerge) {
  // The oracle scans all 32000 tokens per lookup, so keep the texts short.
  auto file = gguf::File::open(kLlamaVocab);
  const Vocab v = Vocab::from_gguf(file);
  const auto& tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto scores = file.get_f32_array("tokenizer.ggml.scores");
  const std::vector<std::string> texts = {"Hello world",
                                          "  leading spaces",
                                          "unbelievable",
                                          "tokenization",
                                          "caf\xC3\xA9 na\xC3\xAFve",
                                          "3.14159",
                                          "\xF0\x9F\xA6\x99 x",
                                          "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"};
  for (const auto& t : texts) {
    SCOPED_TRACE(t);
    EXPECT_EQ(v.encode(t, false), naive_encode(tokens, scores, t, true, 0));
  }
}

TEST(TokenizerGguf, Stories260KRoundTrip) {
  const Vocab v =
      Vocab::from_gguf(gguf::File::open(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf"));
  EXPECT_EQ(v.size(), 512u);
  const std::string text = "Once upon a time";
  const Ids ids = v.encode(text, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], v.bos());
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_NE(v.type(ids[i]), TokenType::Byte) << "plain English should not need byte fallback";
  }
  // The pieces spell the text, word-initial pieces carrying the escaped space.
  std::string joined;
  for (size_t i = 1; i < ids.size(); ++i) joined += v.text(ids[i]);
  EXPECT_EQ(joined, mark("Once") + mark("upon") + mark("a") + mark("time"));
  EXPECT_EQ(v.decode(ids), text);
  EXPECT_EQ(v.decode(ids, true), text);
  EXPECT_EQ(v.encode(text, false), Ids(ids.begin() + 1, ids.end()));
}

TEST(TokenizerGguf, RejectsUnsupportedModelAndBadIds) {
  auto base = [] {
    gguf::Writer w;
    w.set("tokenizer.ggml.tokens",
          gguf::ArrayValue::of(std::vector<std::string>{"<unk>", "<s>", "</s>", "a"}));
    w.set("tokenizer.ggml.scores", gguf::ArrayValue::of(std::vector<float>{0, 0, 0, -1}));
    w.set("tokenizer.ggml.token_type", gguf::ArrayValue::of(std::vector<int32_t>{2, 3, 3, 1}));
    return w;
  };
  {
    auto w = base();
    w.set("tokenizer.ggml.model", std::string("t5"));  // Unigram: not supported
    const auto bytes = w.to_bytes();
    try {
      Vocab::from_gguf(gguf::File::parse(bytes));
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported);
      EXPECT_NE(std::string(e.what()).find("t5"), std::string::npos) << e.what();
    }
  }
  {
    auto w = base();
    w.set("tokenizer.ggml.model", std::string("llama"));
    w.set("tokenizer.ggml.eos_token_id", uint32_t(7));
    const auto bytes = w.to_bytes();
    EXPECT_THROW(Vocab::from_gguf(gguf::File::parse(bytes)), Error);
  }
  {
    auto w = base();
    w.set("tokenizer.ggml.model", std::string("llama"));
    w.set("tokenizer.ggml.scores", gguf::ArrayValue::of(std::vector<float>{0, 0, 0}));
    const auto bytes = w.to_bytes();
    EXPECT_THROW(Vocab::from_gguf(gguf::File::parse(bytes)), Error);
  }
  {
    auto w = base();
    w.set("tokenizer.ggml.model", std::string("llama"));
    w.set("tokenizer.ggml.add_bos_token", false);
    w.set("tokenizer.ggml.add_space_prefix", false);
    w.set("tokenizer.ggml.padding_token_id", uint32_t(UINT32_MAX));
    const auto bytes = w.to_bytes();
    const Vocab v = Vocab::from_gguf(gguf::File::parse(bytes));
    EXPECT_EQ(v.encode("aa", true), (Ids{3, 3}));  // no BOS, no prefix space
  }
  {
    gguf::Writer w;  // no tokenizer at all
    w.set("general.architecture", std::string("llama"));
    const auto bytes = w.to_bytes();
    EXPECT_THROW(Vocab::from_gguf(gguf::File::parse(bytes)), Error);
  }
}
