// Perplexity and KL divergence (tessera/llm/perplexity.h) against llama.cpp's figures for the same
// text (tests/fixtures/perplexity: the text, the figures, and how they were made), the KL divergence of
// a model from its own base file, and the errors.
#include "tessera/llm/perplexity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModels = std::string(TESSERA_SHARED_DIR) + "/models/";
const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/perplexity/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// story.txt as llama-perplexity's -f reads it (one trailing newline dropped).
std::string story() {
  std::string text = read_file(kFixtures + "story.txt");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// A model, its vocabulary and a session of n_ctx cells.
struct Loaded {
  std::unique_ptr<Model> model;
  Vocab vocab;
  std::unique_ptr<Session> session;
};

Loaded load(const std::string& name, int64_t n_ctx, int64_t n_batch = 512) {
  auto model = Model::load(kModels + name);
  Vocab vocab = Vocab::from_gguf(*model->file());
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_batch = n_batch;
  so.n_threads = 2;
  auto session = std::make_unique<Session>(*model, so);
  return {std::move(model), std::move(vocab), std::move(session)};
}

// expected.txt's lines of one kind, split into words.
std::vector<std::vector<std::string>> expected(const std::string& kind) {
  std::istringstream in(read_file(kFixtures + "expected.txt"));
  std::vector<std::vector<std::string>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words),
                               std::istream_iterator<std::string>()};
    if (!w.empty() && w[0] == kind) out.push_back(w);
  }
  return out;
}

// Per process: ctest runs tests in parallel processes.
std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + name;
}

// Runs f and returns the Error it throws (failing when it throws none).
Error error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error thrown";
  return Error(ErrorCode::InvalidArgument, "");
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(Perplexity, TokensAreTheWholeTextAfterBos) {
  const auto model = Model::load(kModels + "stories260K.gguf");
  const Vocab vocab = Vocab::from_gguf(*model->file());
  const std::vector<Token> tokens = perplexity_tokens(vocab, story());
  ASSERT_EQ(tokens.size(), 4518u);  // README.md: the same ids as llama.cpp's
  EXPECT_EQ(tokens[0], vocab.bos());
  EXPECT_EQ(tokens, vocab.encode(story(), /*add_special=*/true));
}

// Our PPL is llama.cpp's to 0.1% on stories260K (two context sizes) and two random-weight models of
// other weight types and architectures, over every whole chunk of the text.
TEST(Perplexity, MatchesLlamaCpp) {
  const auto lines = expected("ppl");
  ASSERT_EQ(lines.size(), 4u);
  const std::string text = story();
  for (const auto& w : lines) {
    SCOPED_TRACE(w[1] + " -c " + w[2]);
    const int64_t n_ctx = std::stoll(w[2]);
    Loaded m = load(w[1], n_ctx);
    const std::vector<Token> tokens = perplexity_tokens(m.vocab, text);
    PerplexityOptions o;
    o.n_ctx = n_ctx;
    std::vector<PerplexityChunk> chunks;
    const PerplexityResult r =
        perplexity(*m.session, m.vocab, tokens, o, [&](const PerplexityChunk& c) { chunks.push_back(c); });
    const double ppl = std::stod(w[4]), err = std::stod(w[5]);
    std::printf("%s -c %lld: PPL %.6f +/- %.6f, llama.cpp %.6f +/- %.6f\n", w[1].c_str(),
                static_cast<long long>(n_ctx), r.ppl, r.ppl_error, ppl, err);
    EXPECT_NEAR(r.ppl, ppl, 1e-3 * ppl);
    EXPECT_NEAR(r.ppl_error, err, 1e-2 * err);
    EXPECT_EQ(r.n_chunks, std::stoll(w[3]));
    EXPECT_EQ(r.n_scored, r.n_chunks * (n_ctx - n_ctx / 2 - 1));
    EXPECT_NEAR(r.mean_nll, std::log(r.ppl), 1e-12);
    ASSERT_EQ(static_cast<int64_t>(chunks.size()), r.n_chunks);
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].chunk, static_cast<int64_t>(i) + 1);
      EXPECT_EQ(chunks[i].n_chunks, r.n_chunks);
    }
    EXPECT_DOUBLE_EQ(chunks.back().ppl, r.ppl);
  }
}

// The batch size splits each chunk's evaluation; --chunks stops early with the running estimate.
TEST(Perplexity, BatchSizeAndChunkLimit) {
  Loaded m = load("stories260K.gguf", 128, 32);
  const std::vector<Token> tokens = perplexity_tokens(m.vocab, story());
  PerplexityOptions o;
  o.n_ctx = 128;
  o.max_chunks = 4;
  std::vector<double> running;
  const PerplexityResult whole =
      perplexity(*m.session, m.vocab, tokens, o, [&](const PerplexityChunk& c) { running.push_back(c.ppl); });
  EXPECT_EQ(whole.n_chunks, 4);
  EXPECT_EQ(whole.n_scored, 4 * 63);
  o.n_batch = 40;  // 40 + 40 + 40 + 8: the first output (position 64) mid-batch
  const PerplexityResult split = perplexity(*m.session, m.vocab, tokens, o);
  EXPECT_NEAR(split.ppl, whole.ppl, 1e-5 * whole.ppl);
  o.n_batch = 1;
  o.max_chunks = 1;
  const PerplexityResult one = perplexity(*m.session, m.vocab, tokens, o);
  EXPECT_NEAR(one.ppl, running[0], 1e-5 * running[0]);
}

TEST(Perplexity, BadInputsAreErrors) {
  Loaded m = load("stories260K.gguf", 128);
  const std::vector<Token> tokens = perplexity_tokens(m.vocab, story());
  auto code_of = [&](PerplexityOptions o, std::span<const Token> t) {
    return error_of([&] { perplexity(*m.session, m.vocab, t, o); });
  };
  PerplexityOptions o;
  o.n_ctx = 128;
  for (int64_t bad : {-1, 0, 1, 2}) {
    PerplexityOptions b = o;
    b.n_ctx = bad;
    const Error e = code_of(b, tokens);
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.what(), "-c")) << e.what();
  }
  PerplexityOptions b = o;
  b.n_batch = 0;
  EXPECT_TRUE(contains(code_of(b, tokens).what(), "batch size")) << code_of(b, tokens).what();
  b = o;
  b.max_chunks = 0;
  EXPECT_EQ(code_of(b, tokens).code(), ErrorCode::InvalidArgument);
  // A text shorter than one chunk.
  const std::vector<Token> short_text(tokens.begin(), tokens.begin() + 100);
  const Error e = code_of(o, short_text);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "100 tokens")) << e.what();
  // A chunk larger than the session's cache.
  b = o;
  b.n_ctx = 256;
  EXPECT_TRUE(contains(code_of(b, tokens).what(), "cache")) << code_of(b, tokens).what();
  // An unwritable base file.
  b = o;
  b.save_base = "/nonexistent-dir/base.kld";
  EXPECT_EQ(code_of(b, tokens).code(), ErrorCode::Io);
}

// A model against its own base file: KL divergence 0 (to the file's 16-bit rounding), the same top
// token everywhere, the same PPL on both sides; and the file is llama.cpp's layout.
TEST(KlDivergence, OfAModelFromItsOwnBaseIsZero) {
  Loaded m = load("stories260K.gguf", 128);
  const std::vector<Token> tokens = perplexity_tokens(m.vocab, story());
  PerplexityOptions o;
  o.n_ctx = 128;
  o.max_chunks = 3;
  o.save_base = temp_path("stories260K-self.kld");
  const PerplexityResult p = perplexity(*m.session, m.vocab, tokens, o);

  const KlDivergenceBaseInfo info = read_kl_divergence_base_info(o.save_base);
  EXPECT_EQ(info.n_ctx, 128);
  EXPECT_EQ(info.n_vocab, 512);
  EXPECT_EQ(info.n_chunks, 3);
  const std::string bytes = read_file(o.save_base);
  // "_logits_", 3 int32, the tokens, per chunk 63 records of 512 + 4 uint16.
  ASSERT_EQ(bytes.size(), 8u + 12u + 3u * 128u * 4u + 3u * 63u * 516u * 2u);
  EXPECT_EQ(bytes.substr(0, 8), "_logits_");
  std::vector<Token> saved(3 * 128);
  std::memcpy(saved.data(), bytes.data() + 20, saved.size() * sizeof(Token));
  EXPECT_EQ(saved, std::vector<Token>(tokens.begin(), tokens.begin() + 3 * 128));  // BOS not put in

  PerplexityOptions k;
  k.n_ctx = 0;  // the file's
  int64_t calls = 0;
  const KlDivergenceResult r = kl_divergence(*m.session, m.vocab, o.save_base, k,
                                             [&](const KlDivergenceChunk& c) { calls = c.chunk; });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.n_ctx, 128);
  EXPECT_EQ(r.n_chunks, 3);
  EXPECT_EQ(r.stats.count, 3 * 63);
  ASSERT_EQ(r.kld.size(), 3u * 63u);
  EXPECT_NEAR(r.stats.kld().value, 0.0, 1e-5);
  EXPECT_LT(r.kld.back(), 1e-4);
  EXPECT_GT(r.kld.front(), -1e-4);
  EXPECT_EQ(r.stats.n_same_top, r.stats.count);
  EXPECT_DOUBLE_EQ(r.stats.same_top().value, 1.0);
  EXPECT_NEAR(r.stats.ppl().value, p.ppl, 1e-6 * p.ppl);
  EXPECT_NEAR(r.stats.ppl_base().value, p.ppl, 1e-4 * p.ppl);
  EXPECT_NEAR(r.stats.ppl_ratio().value, 1.0, 1e-4);
  EXPECT_LT(r.stats.rms_p_diff().value, 1e-4);
  EXPECT_TRUE(std::is_sorted(r.kld.begin(), r.kld.end()));
  EXPECT_TRUE(std::is_sorted(r.p_diff.begin(), r.p_diff.end()));
  // --chunks reads fewer of the file's chunks.
  k.max_chunks = 1;
  EXPECT_EQ(kl_divergence(*m.session, m.vocab, o.save_base, k).stats.count, 63);
}

// A quantized model against its F32 original's base file: llama.cpp's PPL(base), mean KLD and
// same-top fraction.
TEST(KlDivergence, MatchesLlamaCpp) {
  const auto lines = expected("kld");
  ASSERT_EQ(lines.size(), 1u);
  const auto& w = lines[0];
  const int64_t n_ctx = std::stoll(w[3]);
  const std::string base = temp_path("tiny-llama-f32.kld");
  {
    Loaded b = load(w[2], n_ctx);
    PerplexityOptions o;
    o.n_ctx = n_ctx;
    o.save_base = base;
    perplexity(*b.session, b.vocab, perplexity_tokens(b.vocab, story()), o);
  }
  Loaded q = load(w[1], n_ctx);
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  const KlDivergenceResult r = kl_divergence(*q.session, q.vocab, base, o);
  const double ppl_base = std::stod(w[5]), kld = std::stod(w[6]), same_top = std::stod(w[7]) / 100.0;
  std::printf("PPL(base) %.6f, KLD %.8f, same top %.3f%%; llama.cpp %.6f, %.8f, %.3f%%\n",
              r.stats.ppl_base().value, r.stats.kld().value, 100.0 * r.stats.same_top().value, ppl_base, kld,
              100.0 * same_top);
  EXPECT_EQ(r.n_chunks, std::stoll(w[4]));
  EXPECT_NEAR(r.stats.ppl_base().value, ppl_base, 1e-3 * ppl_base);
  EXPECT_NEAR(r.stats.kld().value, kld, 2e-2 * kld);
  EXPECT_NEAR(r.stats.same_top().value, same_top, 0.015);
  EXPECT_GT(r.kld.front(), 0.0f);
}

TEST(KlDivergence, MismatchedOrBrokenBaseFilesAreErrors) {
  Loaded m = load("stories260K.gguf", 256);
  const std::vector<Token> tokens = perplexity_tokens(m.vocab, story());
  PerplexityOptions o;
  o.n_ctx = 128;
  o.max_chunks = 2;
  o.save_base = temp_path("stories260K-c128.kld");
  perplexity(*m.session, m.vocab, tokens, o);
  const std::string good = read_file(o.save_base);

  // Another n_ctx than the file's.
  PerplexityOptions k;
  k.n_ctx = 256;
  Error e = error_of([&] { kl_divergence(*m.session, m.vocab, o.save_base, k); });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(e.what(), "context of 128")) << e.what();

  auto write = [](const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  PerplexityOptions file_ctx;
  file_ctx.n_ctx = 0;  // the file's, so that only the file is at fault
  auto error_for = [&](const std::string& bytes) {
    const std::string path = write(temp_path("broken.kld"), bytes);
    return error_of([&] { kl_divergence(*m.session, m.vocab, path, file_ctx); });
  };
  // Another vocabulary size (a file otherwise whole: 1000 tokens' records).
  {
    std::string other = good.substr(0, 20 + 2 * 128 * 4);
    const int32_t n_vocab = 1000;
    std::memcpy(other.data() + 12, &n_vocab, 4);
    other.append(2 * 63 * (1000 + 4) * 2, '\0');
    e = error_for(other);
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.what(), "vocabulary of 1000")) << e.what();
  }
  e = error_for("_logits_");  // no header
  EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
  e = error_for("not a .kld file at all");
  EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
  EXPECT_TRUE(contains(e.what(), "_logits_")) << e.what();
  e = error_for(good.substr(0, good.size() - 2));  // truncated
  EXPECT_EQ(e.code(), ErrorCode::CorruptFile);
  EXPECT_TRUE(contains(e.what(), "bytes")) << e.what();
  {
    std::string bad = good;
    const int32_t n_ctx = 2;
    std::memcpy(bad.data() + 8, &n_ctx, 4);
    EXPECT_EQ(error_for(bad).code(), ErrorCode::CorruptFile);
  }
  {
    std::string bad = good;
    const Token out_of_range = 512;
    std::memcpy(bad.data() + 20, &out_of_range, 4);
    EXPECT_EQ(error_for(bad).code(), ErrorCode::CorruptFile);
  }
  e = error_of([&] { kl_divergence(*m.session, m.vocab, temp_path("missing.kld"), file_ctx); });
  EXPECT_EQ(e.code(), ErrorCode::Io);
  // A session smaller than the file's chunks.
  Loaded small = load("stories260K.gguf", 64);
  e = error_of([&] { kl_divergence(*small.session, small.vocab, o.save_base, file_ctx); });
  EXPECT_TRUE(contains(e.what(), "cache")) << e.what();
}

TEST(KlDivergence, PercentilesAsLlamaCpp) {
  const std::vector<float> v = {1, 2, 3, 4, 5};
  EXPECT_FLOAT_EQ(percentile(v, 0.0f), 1);
  EXPECT_FLOAT_EQ(percentile(v, 1.0f), 5);
  EXPECT_FLOAT_EQ(percentile(v, 0.5f), 3);
  EXPECT_FLOAT_EQ(percentile(v, 0.9f), 4.6f);  // 0.9 * 4 = 3.6: between 4 and 5
  EXPECT_FLOAT_EQ(median(v), 3);
  const std::vector<float> even = {1, 2, 3, 10};
  EXPECT_FLOAT_EQ(median(even), 2.5f);
  EXPECT_THROW(median(std::vector<float>{}), Error);
  EXPECT_THROW(percentile(std::vector<float>{}, 0.5f), Error);
}
