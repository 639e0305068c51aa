// Tests of byte-level BPE ("gpt2") vocabularies: hand-made vocabularies with hand-derived ids,
// the pre-tokenizer expressions on hand-split texts, llama.cpp's test vectors for all six shared
// vocabularies, special tokens, BOS/EOS flags, end-of-generation ids and malformed files.
#include <gtest/gtest.h>

#include <algorithm>

#include "llm/pre_tokenizer.h"
#include "support/vocab_vectors.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"
#include "tessera/log.h"

using namespace tessera;
using namespace tessera::llm;
using testing_support::read_vocab_inputs;
using testing_support::read_vocab_outputs;
using testing_support::vocab_path;

namespace {

using Ids = std::vector<Token>;
using Words = std::vector<std::string_view>;

// GPT-2's byte alphabet, written out independently of the library: printable Latin-1 bytes stand
// for themselves, the other 68 for U+0100.. in byte order.
std::string gpt2_char(int byte) {
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool itself = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = itself ? b : next++;
    if (b == byte) {
      std::string s;
      if (cp < 0x80) {
        s += char(cp);
      } else {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
      }
      return s;
    }
  }
  return {};
}

// Ids 0..255: the byte alphabet (id = byte), then 256 ab, 257 bc, 258 abc, 259 aa, 260 <|end|>
// (control), 261 <x> (user-defined), 262 <s>, 263 </s> (control).
std::vector<std::string> small_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(gpt2_char(b));
  for (const char* s : {"ab", "bc", "abc", "aa", "<|end|>", "<x>", "<s>", "</s>"}) t.push_back(s);
  return t;
}

std::vector<TokenType> small_types() {
  std::vector<TokenType> types(256 + 4, TokenType::Normal);
  types.insert(types.end(),
               {TokenType::Control, TokenType::UserDefined, TokenType::Control, TokenType::Control});
  return types;
}

SpecialTokens small_special(bool add_bos = false, bool add_eos = false) {
  SpecialTokens sp;
  sp.bos = 262;
  sp.eos = 263;
  sp.unk = kNoToken;
  sp.add_bos = add_bos;
  sp.add_eos = add_eos;
  return sp;
}

Vocab small_bpe(const std::vector<std::string>& merges, SpecialTokens sp = small_special(),
                std::string_view pre = "gpt-2") {
  return Vocab::byte_level_bpe(small_tokens(), merges, pre, small_types(), sp);
}

Words split(std::string_view pre, std::string_view text) {
  Words w;
  PreTokenizer::for_name(pre).split(text, w);
  return w;
}

}  // namespace

TEST(TokenizerBpe, MergesByRankNotPosition) {
  // b c first (rank 0), then a bc: "abc" in one token.
  const Vocab bc_first = small_bpe({"b c", "a bc", "a b"});
  EXPECT_EQ(bc_first.encode("abc", false), Ids{258});
  EXPECT_EQ(bc_first.encode("ab", false), Ids{256});
  // a b outranks b c, and nothing merges ab with c.
  const Vocab ab_first = small_bpe({"a b", "b c"});
  EXPECT_EQ(ab_first.encode("abc", false), (Ids{256, 'c'}));
  const Vocab bc_only_first = small_bpe({"b c", "a b"});
  EXPECT_EQ(bc_only_first.encode("abc", false), (Ids{'a', 257}));
  // Unmerged bytes are their alphabet tokens; a space is byte 0x20 ("Ġ").
  EXPECT_EQ(ab_first.encode("ab ab", false), (Ids{256, ' ', 256}));
  EXPECT_EQ(ab_first.model(), "gpt2");
  EXPECT_EQ(ab_first.pre_tokenizer(), "gpt-2");
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  const Vocab v = small_bpe({"a a"});
  EXPECT_EQ(v.encode("aaa", false), (Ids{259, 'a'}));
  EXPECT_EQ(v.encode("aaaa", false), (Ids{259, 259}));
  EXPECT_EQ(v.encode("aaaaa", false), (Ids{259, 259, 'a'}));
}

TEST(TokenizerBpe, RoundTripsAnyBytesIncludingInvalidUtf8) {
  const Vocab v = small_bpe({"a b", "b c", "ab c"});
  for (const std::string& text :
       {std::string("abc"), std::string(" \t\n\r"), std::string("\xFF\xFE"), std::string("a\xC3"),
        std::string("\xF0\x9F\xA6\x99 ok"), std::string("x\0y", 3)}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(v.decode(v.encode(text, false)), text);
  }
  EXPECT_EQ(v.encode("\xFF", false), Ids{0xFF});
}

TEST(TokenizerBpe, SpecialTokensOnlyWhenAsked) {
  const Vocab v = small_bpe({});
  // Not parsed: "<|end|>" is ordinary text, cut by GPT-2's expression into <| end |>.
  EXPECT_EQ(v.encode("a<|end|>b", false), (Ids{'a', '<', '|', 'e', 'n', 'd', '|', '>', 'b'}));
  EXPECT_EQ(v.encode("a<|end|>b", false, true), (Ids{'a', 260, 'b'}));
  EXPECT_EQ(v.encode("<s>", false, true), Ids{262});
  // User-defined tokens match either way (llama.cpp and Hugging Face do the same).
  EXPECT_EQ(v.encode("a<x>b", false), (Ids{'a', 261, 'b'}));
  EXPECT_EQ(v.encode("a<x>b", false, true), (Ids{'a', 261, 'b'}));
  // Rendering: control text only when asked, user-defined always.
  EXPECT_EQ(v.token_to_piece(260), "");
  EXPECT_EQ(v.token_to_piece(260, true), "<|end|>");
  EXPECT_EQ(v.token_to_piece(261), "<x>");
  EXPECT_EQ(v.token_to_piece(' '), " ");
  EXPECT_EQ(v.decode(Ids{'a', 260, 'b'}), "ab");
  EXPECT_EQ(v.decode(Ids{'a', 260, 'b'}, false, true), "a<|end|>b");
}

TEST(TokenizerBpe, AddBosAndEos) {
  const Vocab both = small_bpe({"a b"}, small_special(true, true));
  EXPECT_EQ(both.encode("ab", true), (Ids{262, 256, 263}));
  EXPECT_EQ(both.encode("ab", false), Ids{256});
  EXPECT_EQ(both.encode("", true), (Ids{262, 263}));
  EXPECT_EQ(both.decode(Ids{262, 256, 263}), "ab");
  EXPECT_EQ(both.decode(Ids{262, 256, 263}, false, true), "<s>ab</s>");
  EXPECT_EQ(both.decode(Ids{262, 256, 263}, true, true), "ab");
  const Vocab neither = small_bpe({"a b"});
  EXPECT_EQ(neither.encode("ab", true), Ids{256});
  // A BPE vocabulary never adds a space, whatever add_space_prefix says.
  SpecialTokens sp = small_special();
  sp.add_space_prefix = true;
  const Vocab spaced = small_bpe({"a b"}, sp);
  EXPECT_EQ(spaced.encode("ab", true), Ids{256});
  EXPECT_EQ(spaced.decode(Ids{' ', 256}), " ab");
}

TEST(TokenizerBpe, EndOfGeneration) {
  const Vocab v = small_bpe({});
  EXPECT_EQ(v.end_of_generation(), (Ids{260, 263}));  // <|end|> and </s> by their texts, </s> as EOS too
  EXPECT_TRUE(v.is_end_of_generation(260));
  EXPECT_TRUE(v.is_end_of_generation(263));
  EXPECT_FALSE(v.is_end_of_generation(262));
  EXPECT_FALSE(v.is_end_of_generation(-1));
  EXPECT_EQ(v.special().eot, 260);
  SpecialTokens sp = small_special();
  sp.eos = kNoToken;
  sp.eot = 259;  // an explicit id counts even with an unusual text
  const Vocab explicit_eot = small_bpe({}, sp);
  EXPECT_EQ(explicit_eot.end_of_generation(), (Ids{259, 260, 263}));  // </s> by its text
}

TEST(TokenizerBpe, BadMergesAreErrors) {
  auto expect_error = [](const std::vector<std::string>& merges, const std::string& what) {
    try {
      small_bpe(merges);
      ADD_FAILURE() << "expected an error for " << merges.back();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({"a b", "a q\xC4\xA0"}, "q\xC4\xA0");  // an unknown right token
  expect_error({"a c"}, "'ac'");                      // the merged text is no token
  expect_error({"abc"}, "not two tokens");            // no separator
  expect_error({"a "}, "not in the vocabulary");      // an empty right token
  expect_error({""}, "not two tokens");
  EXPECT_THROW(Vocab("gpt2", small_tokens()), Error);  // BPE needs merges
}

TEST(TokenizerBpe, ByteWithoutATokenIsAnError) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 255; ++b) tokens.push_back(gpt2_char(b));  // no token for byte 0xFF
  SpecialTokens sp;
  sp.bos = sp.eos = sp.unk = kNoToken;
  sp.add_bos = false;
  const Vocab v = Vocab::byte_level_bpe(tokens, {}, "gpt-2", {}, sp);
  EXPECT_EQ(v.encode("a", false), Ids{'a'});
  EXPECT_THROW(v.encode("a\xFF", false), Error);
  sp.unk = 'a';  // with an unknown token, the byte becomes it
  const Vocab with_unk = Vocab::byte_level_bpe(tokens, {}, "gpt-2", {}, sp);
  EXPECT_EQ(with_unk.encode("\xFF", false), Ids{'a'});
}

TEST(PreTokenizer, Llama3Expression) {
  EXPECT_EQ(split("llama-bpe", "Hello world's 12345\n\n  x"),
            (Words{"Hello", " world", "'s", " ", "123", "45", "\n\n", " ", " x"}));
  EXPECT_EQ(split("llama-bpe", "IT'S"), (Words{"IT", "'S"}));
  EXPECT_EQ(split("llama-bpe", "(a)"), (Words{"(a", ")"}));  // one non-letter may lead a word
  for (const char* alias : {"llama3", "llama-v3", "falcon3", "pixtral"}) {
    const PreTokenizer p = PreTokenizer::for_name(alias);
    EXPECT_EQ(p.name(), "llama-bpe");
    EXPECT_TRUE(p.ignore_merges());
    EXPECT_TRUE(p.add_bos());
  }
  const PreTokenizer smaug = PreTokenizer::for_name("smaug-bpe");  // same expression, no BOS
  EXPECT_FALSE(smaug.ignore_merges());
  EXPECT_FALSE(smaug.add_bos());
  Words w;
  smaug.split("12345", w);
  EXPECT_EQ(w, (Words{"123", "45"}));
}

TEST(PreTokenizer, Gpt2Qwen2AndDeepseekCoder) {
  EXPECT_EQ(split("gpt-2", "Hello world's 12345\n\n  x"),
            (Words{"Hello", " world", "'s", " 12345", "\n\n ", " x"}));
  EXPECT_EQ(split("gpt-2", "IT'S"), (Words{"IT", "'", "S"}));  // GPT-2's contractions are lower case
  EXPECT_EQ(split("qwen2", "ab 123"), (Words{"ab", " ", "1", "2", "3"}));
  // Five expressions in sequence: newlines, letters, punctuation, CJK, digits one by one.
  EXPECT_EQ(split("deepseek-coder", "x, y!\n12"), (Words{"x", ",", " y", "!", "\n", "1", "2"}));
  EXPECT_EQ(split("deepseek-coder", "\xE4\xB8\xAD\xE6\x96\x87 ok"),
            (Words{"\xE4\xB8\xAD\xE6\x96\x87", " ok"}));
  EXPECT_FALSE(PreTokenizer::for_name("qwen2").add_bos());
  EXPECT_EQ(PreTokenizer::for_name("deepseek-r1-qwen").name(), "qwen2");
  EXPECT_EQ(PreTokenizer::for_name("phi-2").name(), "gpt-2");
}

TEST(PreTokenizer, EdgeCases) {
  EXPECT_EQ(split("llama-bpe", ""), Words{});
  // Invalid UTF-8 never matches: it becomes words of its own and nothing is lost.
  const std::string bad = "a\xFF\xFE b";
  const Words w = split("llama-bpe", bad);
  std::string joined;
  for (auto s : w) joined += s;
  EXPECT_EQ(joined, bad);
  EXPECT_EQ(w.front(), "a");
  // An expression that can match empty text splits only at its non-empty matches.
  const PreTokenizer xs("xs", {"x*"});
  Words out;
  xs.split("abxxc", out);
  EXPECT_EQ(out, (Words{"ab", "xx", "c"}));
  try {
    PreTokenizer("bad", {"(unclosed"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PreTokenizer("none", {}), Error);
}

TEST(PreTokenizer, UnknownNameIsTheDefaultWithOneWarning) {
  int warnings = 0;
  set_log_callback([&](LogLevel level, std::string_view message) {
    if (level == LogLevel::Warn && message.find("no-such-pre-tokenizer") != std::string_view::npos)
      ++warnings;
  });
  const PreTokenizer a = PreTokenizer::for_name("no-such-pre-tokenizer");
  const PreTokenizer b = PreTokenizer::for_name("no-such-pre-tokenizer");
  set_log_callback(nullptr);
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(a.name(), "default");
  Words w;
  a.split("Hello world's", w);
  EXPECT_EQ(w, (Words{"Hello", " world", "'s"}));
}

// ---- The shared vocabularies ---------------------------------------------------------------------

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
  const std::string path = vocab_path(GetParam());
  const Vocab v = Vocab::from_gguf(gguf::File::open(path));
  const auto inputs = read_vocab_inputs(path + ".inp");
  const auto expected = read_vocab_outputs(path + ".out");
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << GetParam() << " string " << i << ": '" << inputs[i] << "'");
    EXPECT_EQ(v.encode(inputs[i], false), expected[i]);
    EXPECT_EQ(v.encode(inputs[i], false, true), expected[i]);  // no special tokens in these texts
    Ids with_special = expected[i];
    if (v.special().add_bos) with_special.insert(with_special.begin(), v.bos());
    if (v.special().add_eos) with_special.push_back(v.eos());
    EXPECT_EQ(v.encode(inputs[i], true), with_special);
    EXPECT_EQ(v.decode(expected[i]), inputs[i]);
    EXPECT_EQ(v.decode(with_special, true), inputs[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2",
                                           "deepseek-coder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(TokenizerBpeGguf, Metadata) {
  struct Expect {
    const char* name;
    const char* pre;
    Token bos, eos;
    bool add_bos;
    Ids eog;
  };
  const Expect all[] = {
      {"llama-bpe", "llama-bpe", 128000, 128001, true, {128001, 128009}},  // <|end_of_text|>, <|eot_id|>
      // <|endoftext|>, <|im_end|>, then the FIM pad, repo-name and file separators.
      // 128247 is a normal "</s>" in Qwen2's file: an end by its text, as llama.cpp retypes it.
      {"qwen2", "qwen2", kNoToken, 151645, false, {128247, 151643, 151645, 151662, 151663, 151664}},
      {"gpt-2", "gpt-2", 50256, 50256, false, {50256}},
      {"deepseek-coder", "deepseek-coder", 32013, 32014, true, {32014}},
  };
  for (const Expect& e : all) {
    SCOPED_TRACE(e.name);
    const Vocab v = Vocab::from_gguf(gguf::File::open(vocab_path(e.name)));
    EXPECT_EQ(v.model(), "gpt2");
    EXPECT_EQ(v.pre_tokenizer(), e.pre);
    EXPECT_EQ(v.bos(), e.bos);
    EXPECT_EQ(v.eos(), e.eos);
    EXPECT_EQ(v.special().add_bos, e.add_bos);
    EXPECT_FALSE(v.special().add_eos);
    EXPECT_EQ(v.end_of_generation(), e.eog);
    for (const Token id : e.eog) EXPECT_EQ(v.type(id), TokenType::Control) << id;
  }
  // SentencePiece vocabularies too: Phi-3 ends turns with <|end|> (32007), and its "</s>" (2),
  // user-defined in the file, is an end and a control token by its text, as in llama.cpp.
  const Vocab phi3 = Vocab::from_gguf(gguf::File::open(vocab_path("phi-3")));
  EXPECT_EQ(phi3.end_of_generation(), (Ids{2, 32000, 32007}));
  EXPECT_EQ(phi3.type(2), TokenType::Control);
  // So "</s>" typed in plain text is text, with llama.cpp's ids (peer-bench tokenize on this
  // vocabulary: "a</s>b" -> 263 829 29879 29958 29890), and a token only when parsing specials.
  EXPECT_EQ(phi3.encode("a</s>b", false), (Ids{263, 829, 29879, 29958, 29890}));
  EXPECT_EQ(phi3.encode("Hello </s> world", false), (Ids{15043, 1533, 29879, 29958, 3186}));
  EXPECT_EQ(phi3.encode("a</s>b", false, /*parse_special=*/true), (Ids{263, 2, 289}));
  EXPECT_EQ(phi3.special().eot, 32007);
  const Vocab llama2 = Vocab::from_gguf(gguf::File::open(vocab_path("llama-spm")));
  EXPECT_EQ(llama2.end_of_generation(), Ids{2});
  EXPECT_EQ(llama2.special().eot, kNoToken);
}

TEST(TokenizerBpeGguf, ParseSpecialOnAndOff) {
  const Vocab v = Vocab::from_gguf(gguf::File::open(vocab_path("llama-bpe")));
  const std::string eot = "<|eot_id|>";
  const Ids plain = v.encode(eot, false);
  EXPECT_GT(plain.size(), 1u);
  for (const Token id : plain) EXPECT_EQ(v.type(id), TokenType::Normal) << id;
  EXPECT_EQ(v.decode(plain), eot);
  EXPECT_EQ(v.encode(eot, false, true), Ids{128009});
  // Between special tokens the text is tokenized on its own.
  Ids expected = v.encode("Hi", false);
  expected.push_back(128009);
  const Ids there = v.encode("there", false);
  expected.insert(expected.end(), there.begin(), there.end());
  EXPECT_EQ(v.encode("Hi<|eot_id|>there", false, true), expected);
  EXPECT_EQ(v.encode("<|begin_of_text|>x", true, true), (Ids{128000, 128000, 87}));  // x = 87
  // Qwen3's <think> is user-defined: always one token; <|im_end|> is control: only when asked.
  const Vocab qwen = Vocab::from_gguf(gguf::File::open(vocab_path("qwen2")));
  EXPECT_EQ(qwen.encode("<think>", false), Ids{151667});
  EXPECT_EQ(qwen.encode("<|im_end|>", false, true), Ids{151645});
  EXPECT_NE(qwen.encode("<|im_end|>", false), Ids{151645});
}

TEST(TokenizerBpeGguf, FlagsAndBadFiles) {
  // The byte alphabet plus ab, <s>, </s> and one merge.
  auto base = [](std::string_view pre, bool with_merges = true) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(gpt2_char(b));
    tokens.insert(tokens.end(), {"ab", "<s>", "</s>"});
    std::vector<int32_t> types(256 + 1, 1);
    types.insert(types.end(), {3, 3});
    gguf::Writer w;
    w.set("tokenizer.ggml.model", std::string("gpt2"));
    if (!pre.empty()) w.set("tokenizer.ggml.pre", std::string(pre));
    w.set("tokenizer.ggml.tokens", gguf::ArrayValue::of(tokens));
    w.set("tokenizer.ggml.token_type", gguf::ArrayValue::of(types));
    if (with_merges) w.set("tokenizer.ggml.merges", gguf::ArrayValue::of(std::vector<std::string>{"a b"}));
    w.set("tokenizer.ggml.bos_token_id", uint32_t(257));
    w.set("tokenizer.ggml.eos_token_id", uint32_t(258));
    return w;
  };
  auto load = [](const gguf::Writer& w) {
    const auto bytes = w.to_bytes();
    return Vocab::from_gguf(gguf::File::parse(bytes));
  };
  EXPECT_EQ(load(base("llama-bpe")).encode("ab", true), (Ids{257, 256}));  // Llama 3's default: BOS
  EXPECT_EQ(load(base("qwen2")).encode("ab", true), Ids{256});
  {
    auto w = base("llama-bpe");
    w.set("tokenizer.ggml.add_bos_token", false);
    w.set("tokenizer.ggml.add_eos_token", true);
    EXPECT_EQ(load(w).encode("ab", true), (Ids{256, 258}));
  }
  {
    set_log_callback([](LogLevel, std::string_view) {});  // the missing key warns (once)
    const Vocab v = load(base(""));
    set_log_callback(nullptr);
    EXPECT_EQ(v.pre_tokenizer(), "default");
    EXPECT_EQ(v.encode("ab ab", true), (Ids{256, ' ', 256}));
  }
  auto expect_corrupt = [&](const gguf::Writer& w, const std::string& what) {
    try {
      load(w);
      ADD_FAILURE() << "expected an error: " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::CorruptFile) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  { expect_corrupt(base("gpt-2", false), "tokenizer.ggml.merges"); }
  {
    auto w = base("gpt-2");
    w.set("tokenizer.ggml.merges", gguf::ArrayValue::of(std::vector<std::string>{"a b", "zz b"}));
    expect_corrupt(w, "'zz'");
  }
  {
    auto w = base("gpt-2");
    w.set("tokenizer.ggml.eos_token_id", uint32_t(999));
    expect_corrupt(w, "eos_token_id");
  }
}

TEST(TokenizerBpeGguf, MovedVocabStillFindsTexts) {
  Vocab a = Vocab::from_gguf(gguf::File::open(vocab_path("gpt-2")));
  const Ids ids = a.encode("Hello world", false);
  Vocab b = std::move(a);
  EXPECT_EQ(b.find("Hello"), 15496);
  EXPECT_EQ(b.encode("Hello world", false), ids);
  EXPECT_EQ(ids, (Ids{15496, 995}));
}
