// The importance matrix (tessera/llm/imatrix.h): layer 0's attention and expert inputs computed
// here from the weights alone (the token's embedding row through RMS_NORM times attn_norm, the
// input of attn_q, attn_k and attn_v) against what the session observed; the counts llama-imatrix
// keeps (one per token row, per expert for MUL_MAT_ID); its GGUF read back by read_imatrix and used
// by the quantizer; `tessera imatrix` on the command line.
#include "tessera/llm/imatrix.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "support/cli.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"
#include "tessera/llm/perplexity.h"
#include "tessera/llm/quantize.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModels = std::string(TESSERA_SHARED_DIR) + "/models/";
const std::string kStory = std::string(TESSERA_FIXTURES_DIR) + "/perplexity/story.txt";

std::string story() {
  std::ifstream f(kStory, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::filesystem::path temp_path(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_imatrix_calc_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<float> f32_tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  EXPECT_EQ(t->type_id, 0u) << name;
  std::vector<float> v(t->nbytes / 4);
  std::memcpy(v.data(), f.tensor_data(*t), t->nbytes);
  return v;
}

// Sum over the chunks' tokens of (RMS_NORM(embedding) * attn_norm)_j^2, in double.
std::vector<double> expected_layer0_sums(const gguf::File& f, const std::vector<Token>& tokens, int64_t n_ctx,
                                         int64_t n_chunks, Token bos) {
  const std::vector<float> embd = f32_tensor(f, "token_embd.weight"),
                           norm = f32_tensor(f, "blk.0.attn_norm.weight");
  const auto n = static_cast<int64_t>(norm.size());
  const double eps = f.get_f32("llama.attention.layer_norm_rms_epsilon");
  std::vector<double> sums(static_cast<size_t>(n), 0.0);
  for (int64_t c = 0; c < n_chunks; ++c)
    for (int64_t t = 0; t < n_ctx; ++t) {
      const Token tok = t == 0 && bos >= 0 ? bos : tokens[static_cast<size_t>(c * n_ctx + t)];
      const float* e = embd.data() + static_cast<int64_t>(tok) * n;
      double ms = 0;
      for (int64_t j = 0; j < n; ++j) ms += double(e[j]) * e[j];
      const double scale = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps);
      for (int64_t j = 0; j < n; ++j) {
        const double x = e[j] * scale * norm[static_cast<size_t>(j)];
        sums[static_cast<size_t>(j)] += x * x;
      }
    }
  return sums;
}

}  // namespace

TEST(Imatrix, LayerZeroInputsAreTheNormalizedEmbeddings) {
  const auto model = Model::load(kModels + "stories260K.gguf");
  const Vocab vocab = Vocab::from_gguf(*model->file());
  SessionOptions so;
  so.n_ctx = 128;
  so.n_batch = 64;  // two decodes per chunk, both of at least 16 rows
  so.n_threads = 2;
  Session session(*model, so);
  const std::vector<Token> tokens = perplexity_tokens(vocab, story());
  ImatrixOptions o;
  o.n_ctx = 128;
  o.n_batch = 64;
  o.max_chunks = 3;
  o.dataset = "story.txt";
  int64_t calls = 0;
  const ImatrixResult r = compute_imatrix(session, vocab, tokens, o, [&](int64_t c, int64_t n) {
    EXPECT_EQ(c, ++calls);
    EXPECT_EQ(n, 3);
  });
  EXPECT_EQ(r.n_chunks, 3);
  EXPECT_EQ(r.chunk_size, 128);
  // Every matrix of the blocks, none outside them (output.weight needs process_output).
  EXPECT_EQ(r.stats.size(), 5u * 7u);
  EXPECT_EQ(r.stats.count("output.weight"), 0u);
  const std::vector<double> want = expected_layer0_sums(*model->file(), tokens, 128, 3, vocab.bos());
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    SCOPED_TRACE(w);
    const ImatrixStats& s = r.stats.at(w);
    ASSERT_EQ(s.sums.size(), want.size());
    EXPECT_EQ(s.counts, std::vector<float>{3.0f * 128});
    for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(s.sums[j], want[j], 1e-4 * want[j] + 1e-6) << j;
  }
  // The second layer's ffn_down sees the ff width, one row per token.
  const ImatrixStats& down = r.stats.at("blk.1.ffn_down.weight");
  EXPECT_EQ(down.ne0, model->file()->find_tensor("blk.1.ffn_down.weight")->ne[0]);
  EXPECT_EQ(down.counts, std::vector<float>{3.0f * 128});

  // --process-output adds the output projection; products over fewer than 16 rows are skipped.
  o.process_output = true;
  o.max_chunks = 1;
  EXPECT_EQ(compute_imatrix(session, vocab, tokens, o).stats.at("output.weight").counts,
            std::vector<float>{128});
  so.n_batch = 8;
  Session small_batches(*model, so);
  o.n_batch = 8;
  EXPECT_TRUE(compute_imatrix(small_batches, vocab, tokens, o).stats.empty());

  // The file reads back as the means of squares the quantizer takes.
  const auto path = temp_path("story.imatrix.gguf");
  write_imatrix(r, path.string());
  const ImportanceMatrix m = read_imatrix(path.string());
  EXPECT_EQ(m.datasets, std::vector<std::string>{"story.txt"});
  EXPECT_EQ(m.chunk_count, 3);
  ASSERT_EQ(m.values.size(), r.stats.size());
  const auto& q = m.values.at("blk.0.attn_q.weight");
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(q[j], want[j] / 384, 1e-4 * want[j] / 384 + 1e-9) << j;
  std::filesystem::remove(path);

  // Bad requests are errors.
  o.n_batch = 64;
  o.first_chunk = 1000;
  EXPECT_THROW(compute_imatrix(session, vocab, tokens, o), Error);
  o.first_chunk = 0;
  const std::vector<Token> few(tokens.begin(), tokens.begin() + 100);
  EXPECT_THROW(compute_imatrix(session, vocab, few, o), Error);
}

TEST(Imatrix, ExpertsCountTheRowsRoutedToThem) {
  const auto model = Model::load(kModels + "oracle/tiny-mixtral-f32.gguf");
  const Vocab vocab = Vocab::from_gguf(*model->file());
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  Session session(*model, so);
  ImatrixOptions o;
  o.n_ctx = 64;
  o.max_chunks = 2;
  const ImatrixResult r = compute_imatrix(session, vocab, perplexity_tokens(vocab, story()), o);
  for (const char* w :
       {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"}) {
    SCOPED_TRACE(w);
    const ImatrixStats& s = r.stats.at(w);
    const gguf::TensorInfo* t = model->file()->find_tensor(w);
    ASSERT_EQ(s.counts.size(), static_cast<size_t>(t->ne[2]));  // one count per expert
    EXPECT_EQ(s.sums.size(), static_cast<size_t>(t->ne[0] * t->ne[2]));
    // Each token goes to two of the eight experts.
    EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), 0.0), 2.0 * 2 * 64);
    for (size_t e = 0; e < s.counts.size(); ++e) {
      if (s.counts[e] == 0) {
        for (int64_t j = 0; j < s.ne0; ++j) EXPECT_EQ(s.sums[e * s.ne0 + j], 0.0f);
      }
    }
  }
  // The router sees every token once.
  EXPECT_EQ(r.stats.at("blk.0.ffn_gate_inp.weight").counts, std::vector<float>{128});
  // Decodes of 8 tokens: llama-imatrix skips such MUL_MATs but keeps every MUL_MAT_ID.
  so.n_batch = 8;
  Session small(*model, so);
  o.n_batch = 8;
  const ImatrixResult rs = compute_imatrix(small, vocab, perplexity_tokens(vocab, story()), o);
  EXPECT_EQ(rs.stats.size(), 2u * 3u);  // the three expert tensors of two layers
  for (const auto& [name, s] : rs.stats) {
    EXPECT_NE(name.find("_exps."), std::string::npos) << name;
    EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), 0.0), 2.0 * 2 * 64) << name;
  }
  // And the quantizer takes the file, experts and all.
  const auto imatrix = temp_path("mixtral.imatrix.gguf"), out = temp_path("mixtral-iq2_xxs.gguf");
  write_imatrix(r, imatrix.string());
  QuantizeOptions qo;
  qo.type = "IQ3_XXS";
  qo.imatrix = imatrix.string();
  qo.threads = 2;
  EXPECT_NO_THROW(quantize_model(kModels + "oracle/tiny-mixtral-f32.gguf", out.string(), qo));
  std::filesystem::remove(imatrix);
  std::filesystem::remove(out);
}

TEST(Imatrix, CommandLine) {
  const auto out = temp_path("cli.imatrix.gguf");
  const auto r = testing_support::run_cli("imatrix -m " + kModels + "stories260K.gguf -f " + kStory + " -o " +
                                          out.string() + " -c 128 --chunks 2 -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("35 tensors from 2 chunks of 128 tokens"), std::string::npos) << r.out;
  EXPECT_EQ(read_imatrix(out.string()).values.size(), 35u);
  const auto bad = testing_support::run_cli("imatrix -m " + kModels + "stories260K.gguf -f /nonexistent.txt");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("cannot open the text file"), std::string::npos) << bad.out;
  std::filesystem::remove(out);
}
