// Embeddings: llm::embed's pooling on stories260K against a decode by hand, and the encoder
// architectures (bert, nomic-bert) and the WordPiece tokenizer against llama.cpp on the
// random-weight oracles in tests/fixtures/embeddings (README there: how they were made).
#include "tessera/llm/embeddings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using nlohmann::json;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/embeddings/";

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<json> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i)
    ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

llm::SessionOptions embedding_options(int64_t n_ctx) {
  llm::SessionOptions so;
  so.embeddings = true;
  so.n_ctx = n_ctx;
  so.n_batch = n_ctx;
  so.n_threads = 1;
  return so;
}

}  // namespace

TEST(Embeddings, PoolingNamesAndNormalization) {
  for (llm::Pooling p : {llm::Pooling::None, llm::Pooling::Mean, llm::Pooling::Cls, llm::Pooling::Last})
    EXPECT_EQ(llm::parse_pooling(llm::pooling_name(p)), p);
  EXPECT_FALSE(llm::parse_pooling("max"));
  std::vector<float> v{3.0f, 4.0f};
  llm::l2_normalize(v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> zero{0.0f, 0.0f};
  llm::l2_normalize(zero);
  EXPECT_EQ(zero, (std::vector<float>{0.0f, 0.0f}));
}

TEST(Embeddings, EmbedPoolsTheHiddenStatesOfOneDecode) {
  auto model = llm::Model::load(kStories);
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  EXPECT_EQ(llm::default_pooling(*model), llm::Pooling::Mean);  // the file names none
  llm::Session session(*model, embedding_options(128));
  const std::vector<llm::Token> tokens = vocab.encode("Once upon a time there was a cat", true);
  const std::vector<float> rows = session.decode(tokens, /*all_logits=*/true);
  session.reset();
  const size_t n = tokens.size(), d = static_cast<size_t>(model->hparams().n_embd);
  ASSERT_EQ(rows.size(), n * d);
  std::vector<float> mean(d, 0.0f), first(rows.begin(), rows.begin() + d), last(rows.end() - d, rows.end());
  for (size_t j = 0; j < d; ++j) {
    double s = 0;
    for (size_t t = 0; t < n; ++t) s += rows[t * d + j];
    mean[j] = static_cast<float>(s / n);
  }
  // Another sequence's cells are left alone.
  session.decode(std::vector<llm::Token>{1, 2, 3});
  const int64_t used = session.cache().used();
  EXPECT_LE(max_abs_diff(llm::embed(session, tokens, llm::Pooling::Mean, false, 1), mean), 1e-5f);
  EXPECT_LE(max_abs_diff(llm::embed(session, tokens, llm::Pooling::Cls, false, 1), first), 1e-5f);
  EXPECT_LE(max_abs_diff(llm::embed(session, tokens, llm::Pooling::Last, false, 1), last), 1e-5f);
  EXPECT_LE(max_abs_diff(llm::embed(session, tokens, llm::Pooling::None, false, 1), rows), 1e-5f);
  EXPECT_EQ(session.cache().used(), used);
  std::vector<float> unit = mean;
  llm::l2_normalize(unit);
  EXPECT_LE(max_abs_diff(llm::embed(session, tokens, llm::Pooling::Mean, true, 1), unit), 1e-6f);

  EXPECT_THROW(llm::embed(session, {}, llm::Pooling::Mean, true), Error);
  llm::Session logits(*model);
  EXPECT_THROW(llm::embed(logits, tokens, llm::Pooling::Mean, true), Error);
}

// Every oracle line: the text's token ids and its embedding as llama.cpp gives them
// (llama_get_embeddings_seq, unnormalized; pooling none: every token's row).
class EncoderOracle : public testing::TestWithParam<const char*> {};

TEST_P(EncoderOracle, MatchesLlamaCpp) {
  const std::string name = GetParam();
  auto model = llm::Model::load(kFixtures + name + ".gguf");
  EXPECT_TRUE(model->hparams().encoder);
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  llm::Session session(*model, embedding_options(128));
  int checked = 0;
  double worst_cos = 1.0;
  float worst_diff = 0.0f;
  for (const json& line : read_lines(kFixtures + "expected.jsonl")) {
    if (line["model"] != name) continue;
    const std::string text = line["text"];
    const std::vector<llm::Token> tokens = vocab.encode(text, /*add_special=*/true);
    EXPECT_EQ(tokens, line["tokens"].get<std::vector<llm::Token>>()) << text;
    const auto pooling = static_cast<llm::Pooling>(line["pooling"].get<int>());
    const std::vector<float> want = line["embedding"].get<std::vector<float>>();
    const std::vector<float> got = llm::embed(session, tokens, pooling, /*normalize=*/false);
    const double cos = cosine(got, want);
    const float diff = max_abs_diff(got, want);
    // llama.cpp's CPU GELU reads a table of f16 values (its input rounded to f16); ours is
    // computed in f32: bert differs by about 2e-3 where nomic-bert (SILU) agrees to 1e-5.
    EXPECT_GT(cos, 0.9999) << text << " (" << llm::pooling_name(pooling) << ")";
    EXPECT_LT(diff, name == std::string("bert") ? 5e-3f : 2e-5f)
        << text << " (" << llm::pooling_name(pooling) << ")";
    worst_cos = std::min(worst_cos, cos);
    worst_diff = std::max(worst_diff, diff);
    ++checked;
  }
  EXPECT_EQ(checked, 9);
  std::printf("%s: %d vectors, worst cosine %.9f, worst max abs diff %.3g\n", name.c_str(), checked,
              worst_cos, worst_diff);
}

INSTANTIATE_TEST_SUITE_P(Embeddings, EncoderOracle, testing::Values("bert", "nomic-bert"));

TEST(Embeddings, EncoderPoolingComesFromTheFile) {
  EXPECT_EQ(llm::default_pooling(*llm::Model::load(kFixtures + "bert.gguf")), llm::Pooling::Cls);
  EXPECT_EQ(llm::default_pooling(*llm::Model::load(kFixtures + "nomic-bert.gguf")), llm::Pooling::Mean);
}

TEST(Embeddings, EncoderSequencesInOneBatchSeeOnlyThemselves) {
  auto model = llm::Model::load(kFixtures + "bert.gguf");
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  llm::Session session(*model, embedding_options(128));
  const auto a = vocab.encode("The cat sat on the mat.", true), b = vocab.encode("hello world", true);
  const std::vector<float> ra = session.decode(a, true);
  session.reset();
  const std::vector<float> rb = session.decode(b, true);
  session.reset();
  llm::Batch mixed;  // interleaved, each from position 0
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) mixed.add(a[i], static_cast<llm::Pos>(i), 0, true);
    if (i < b.size()) mixed.add(b[i], static_cast<llm::Pos>(i), 1, true);
  }
  const std::vector<float> rows = session.decode(mixed);
  const size_t d = static_cast<size_t>(model->hparams().n_embd);
  std::vector<float> got_a, got_b;
  for (size_t r = 0; r < mixed.size(); ++r)
    (mixed.seq_ids[r] == 0 ? got_a : got_b)
        .insert((mixed.seq_ids[r] == 0 ? got_a : got_b).end(), rows.begin() + r * d,
                rows.begin() + (r + 1) * d);
  EXPECT_LE(max_abs_diff(got_a, ra), 1e-5f);
  EXPECT_LE(max_abs_diff(got_b, rb), 1e-5f);
}

TEST(Embeddings, EncodersComputeNoLogits) {
  auto model = llm::Model::load(kFixtures + "nomic-bert.gguf");
  try {
    llm::Session session(*model);
    FAIL() << "a logits session on an encoder";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("embedding model"), std::string::npos) << e.what();
  }
  llm::SessionOptions so = embedding_options(128);
  so.n_batch = 8;  // a sequence longer than a batch cannot be seen whole
  llm::Session small(*model, so);
  EXPECT_THROW(llm::embed(small, std::vector<llm::Token>(9, 5), llm::Pooling::Mean, true), Error);
}

TEST(Embeddings, WordPieceMatchesLlamaCpp) {
  auto model = llm::Model::load(kFixtures + "bert.gguf");
  const llm::Vocab vocab = llm::Vocab::from_gguf(*model->file());
  EXPECT_EQ(vocab.model(), "bert");
  int n = 0;
  for (const json& line : read_lines(kFixtures + "wpm_tokens.jsonl")) {
    const std::string text = line["text"];
    EXPECT_EQ(vocab.encode(text, true), line["tokens"].get<std::vector<llm::Token>>()) << text;
    ++n;
  }
  EXPECT_EQ(n, 11);
  // Without specials: no [CLS]/[SEP]; pieces render with their spaces.
  const auto ids = vocab.encode("Hello, world!", false);
  EXPECT_EQ(vocab.decode(ids), " hello , world !");
}
