// The importance matrix (tessera/llm/imatrix.h): layer 0's attention and expert inputs computed
// here from the weights alone (the token's embedding row through RMS_NORM times attn_norm, the
// input of attn_q, attn_k and attn_v) against what the session observed; the counts llama-imatrix
// keeps (one per token row, per expert for MUL_MAT_ID); its GGUF read back by read_imatrix and used
// by the quantizer; `tessera imatrix` on the command line.
#include "tessera/llm/imatrix.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

// Sums over the chunks' tokens of x = RMS_NORM(embedding) * attn_norm: of x_j^2 and of x_j, in double.
struct Layer0Sums {
  std::vector<double> squares, plain;
};
Layer0Sums expected_layer0_sums(const gguf::File& f, const std::vector<Token>& tokens, int64_t n_ctx,
                                int64_t n_chunks, Token bos) {
  const std::vector<float> embd = f32_tensor(f, "token_embd.weight"),
                           norm = f32_tensor(f, "blk.0.attn_norm.weight");
  const auto n = static_cast<int64_t>(norm.size());
  const double eps = f.get_f32("llama.attention.layer_norm_rms_epsilon");
  Layer0Sums sums{std::vector<double>(static_cast<size_t>(n), 0.0),
                  std::vector<double>(static_cast<size_t>(n), 0.0)};
  for (int64_t c = 0; c < n_chunks; ++c)
    for (int64_t t = 0; t < n_ctx; ++t) {
      const Token tok = t == 0 && bos >= 0 ? bos : tokens[static_cast<size_t>(c * n_ctx + t)];
      const float* e = embd.data() + static_cast<int64_t>(tok) * n;
      double ms = 0;
      for (int64_t j = 0; j < n; ++j) ms += double(e[j]) * e[j];
      const double scale = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps);
      for (int64_t j = 0; j < n; ++j) {
        const double x = e[j] * scale * norm[static_cast<size_t>(j)];
        sums.squares[static_cast<size_t>(j)] += x * x;
        sums.plain[static_cast<size_t>(j)] += x;
      }
    }
  return sums;
}

// A model of ../shared/models with its vocabulary and a 2-thread session of n_ctx cells.
struct Loaded {
  std::unique_ptr<Model> model;
  Vocab vocab;
  std::unique_ptr<Session> session;
};
Loaded load(const std::string& file, int64_t n_ctx) {
  auto model = Model::load(kModels + file);
  Vocab vocab = Vocab::from_gguf(*model->file());
  SessionOptions so;
  so.n_ctx = n_ctx;
  so.n_threads = 2;
  auto session = std::make_unique<Session>(*model, so);
  return {std::move(model), std::move(vocab), std::move(session)};
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
  std::vector<double> running_ppl;
  const ImatrixResult r = compute_imatrix(session, vocab, tokens, o, [&](const ImatrixChunk& c) {
    EXPECT_EQ(c.chunk, ++calls);
    EXPECT_EQ(c.n_chunks, 3);
    running_ppl.push_back(c.ppl);
  });
  EXPECT_EQ(r.n_chunks, 3);
  EXPECT_EQ(r.chunk_size, 128);
  // Every matrix of the blocks, none outside them (output.weight needs process_output).
  EXPECT_EQ(r.stats.size(), 5u * 7u);
  EXPECT_EQ(r.stats.count("output.weight"), 0u);
  const Layer0Sums expected = expected_layer0_sums(*model->file(), tokens, 128, 3, vocab.bos());
  const std::vector<double>& want = expected.squares;
  double plain_scale = 0;  // the plain sums' magnitude, for their bound (they cancel)
  for (double v : expected.plain) plain_scale = std::max(plain_scale, std::abs(v));
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    SCOPED_TRACE(w);
    const ImatrixStats& s = r.stats.at(w);
    ASSERT_EQ(s.in_sum2.size(), want.size());
    ASSERT_EQ(s.in_sum.size(), want.size());
    EXPECT_EQ(s.counts, std::vector<int64_t>{3 * 128});
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_NEAR(s.in_sum2[j], want[j], 1e-4 * want[j] + 1e-6) << j;
      EXPECT_NEAR(s.in_sum[j], expected.plain[j], 1e-5 * plain_scale) << j;
    }
  }
  // The running perplexity is llama-perplexity's over the same chunks.
  PerplexityOptions po;
  po.n_ctx = 128;
  po.n_batch = 64;
  po.max_chunks = 3;
  const PerplexityResult ppl = perplexity(session, vocab, tokens, po);
  ASSERT_EQ(running_ppl.size(), 3u);
  EXPECT_NEAR(running_ppl.back(), ppl.ppl, 1e-6 * ppl.ppl);
  EXPECT_EQ(r.nll.count, 3 * (128 - 64 - 1));
  EXPECT_NEAR(r.nll.result(3).ppl_error, ppl.ppl_error, 1e-4 * ppl.ppl_error);
  // The second layer's ffn_down sees the ff width, one row per token.
  const ImatrixStats& down = r.stats.at("blk.1.ffn_down.weight");
  EXPECT_EQ(down.ne0, model->file()->find_tensor("blk.1.ffn_down.weight")->ne[0]);
  EXPECT_EQ(down.counts, std::vector<int64_t>{3 * 128});

  // --process-output adds the output projection; products over fewer than 16 rows are skipped.
  o.process_output = true;
  o.max_chunks = 1;
  EXPECT_EQ(compute_imatrix(session, vocab, tokens, o).stats.at("output.weight").counts,
            std::vector<int64_t>{128});
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
  const Loaded mixtral = load("oracle/tiny-mixtral-f32.gguf", 64);
  const Model* model = mixtral.model.get();
  const Vocab& vocab = mixtral.vocab;
  Session& session = *mixtral.session;
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
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
    EXPECT_EQ(s.in_sum2.size(), static_cast<size_t>(t->ne[0] * t->ne[2]));
    // Each token goes to two of the eight experts.
    EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), int64_t{0}), 2 * 2 * 64);
    for (size_t e = 0; e < s.counts.size(); ++e) {
      if (s.counts[e] == 0) {
        for (int64_t j = 0; j < s.ne0; ++j) EXPECT_EQ(s.in_sum2[e * s.ne0 + j], 0.0f);
      }
    }
  }
  // The router sees every token once.
  EXPECT_EQ(r.stats.at("blk.0.ffn_gate_inp.weight").counts, std::vector<int64_t>{128});
  // Decodes of 8 tokens: llama-imatrix skips such MUL_MATs but keeps every MUL_MAT_ID.
  so.n_batch = 8;
  Session small(*model, so);
  o.n_batch = 8;
  const ImatrixResult rs = compute_imatrix(small, vocab, perplexity_tokens(vocab, story()), o);
  EXPECT_EQ(rs.stats.size(), 2u * 3u);  // the three expert tensors of two layers
  for (const auto& [name, s] : rs.stats) {
    EXPECT_NE(name.find("_exps."), std::string::npos) << name;
    EXPECT_EQ(std::accumulate(s.counts.begin(), s.counts.end(), int64_t{0}), 2 * 2 * 64) << name;
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
  const std::string model = " -m " + kModels + "stories260K.gguf -f " + kStory;
  const auto r = testing_support::run_cli("imatrix" + model + " -o " + out.string() +
                                          " -c 128 --chunks 2 -t 2 --save-frequency 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("35 tensors from 2 chunks of 128 tokens"), std::string::npos) << r.out;
  EXPECT_EQ(read_imatrix(out.string()).values.size(), 35u);
  // The running perplexity is printed as perplexity prints its estimate.
  const auto ppl = testing_support::run_cli("perplexity -m " + kModels + "stories260K.gguf -f " + kStory +
                                            " -c 128 --chunks 2 -t 2");
  ASSERT_EQ(ppl.code, 0) << ppl.out;
  const auto estimate = [](const std::string& s) {
    const size_t at = s.find("Final estimate: PPL = ");
    return at == std::string::npos ? std::string("none") : s.substr(at, s.find('\n', at) - at);
  };
  EXPECT_EQ(estimate(r.out), estimate(ppl.out));
  // Chunks of 2 tokens score nothing: no perplexity, the sums all the same.
  const auto tiny =
      testing_support::run_cli("imatrix" + model + " -o " + out.string() + ".tiny -c 2 --chunks 20 -t 2");
  EXPECT_EQ(tiny.code, 0) << tiny.out;
  EXPECT_EQ(tiny.out.find("Final estimate"), std::string::npos) << tiny.out;
  std::filesystem::remove(out.string() + ".tiny");
  // --save-frequency 1: a copy after each chunk.
  EXPECT_EQ(read_imatrix(out.string() + ".at_1").chunk_count, 1);
  EXPECT_EQ(read_imatrix(out.string() + ".at_2").chunk_count, 2);

  // Combining files without a text, into the legacy format.
  const auto dat = temp_path("cli.imatrix.dat");
  const auto combined =
      testing_support::run_cli("imatrix --in-file " + out.string() + ".at_1 --in-file " + out.string() +
                               " -c 128 --output-format dat -o " + dat.string());
  ASSERT_EQ(combined.code, 0) << combined.out;
  EXPECT_NE(combined.out.find("35 tensors combined from 2 files (3 chunks of 128 tokens)"), std::string::npos)
      << combined.out;
  const ImportanceMatrix m = read_imatrix(dat.string());
  EXPECT_EQ(m.chunk_count, 3);
  EXPECT_EQ(m.values.size(), 35u);

  // --show-statistics prints the tables of a file.
  const auto shown = testing_support::run_cli("imatrix --show-statistics -c 128 --in-file " + out.string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  EXPECT_NE(shown.out.find("attn_q"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("CosSim"), std::string::npos) << shown.out;
  const auto shown_bad = testing_support::run_cli("imatrix --show-statistics" + model);
  EXPECT_NE(shown_bad.code, 0);

  // Bad requests are errors.
  const auto bad = testing_support::run_cli("imatrix -m " + kModels + "stories260K.gguf -f /nonexistent.txt");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("cannot open the text file"), std::string::npos) << bad.out;
  const auto nothing = testing_support::run_cli("imatrix -o " + dat.string());
  EXPECT_NE(nothing.code, 0);
  EXPECT_NE(nothing.out.find("--in-file"), std::string::npos) << nothing.out;
  const auto no_model = testing_support::run_cli("imatrix -f " + kStory);
  EXPECT_NE(no_model.code, 0);
  EXPECT_NE(no_model.out.find("needs the model"), std::string::npos) << no_model.out;
  const auto format = testing_support::run_cli("imatrix" + model + " --output-format txt");
  EXPECT_NE(format.code, 0);
  // A file of another model's weights, continued with this model: refused at its first product.
  const auto other =
      testing_support::run_cli("imatrix -m " + kModels + "oracle/tiny-mixtral-f32.gguf -f " + kStory +
                               " --in-file " + out.string() + " -c 128 --chunks 1 -o " + dat.string());
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.out.find("a matrix for another model?"), std::string::npos) << other.out;
  for (const auto& p : {out, dat}) std::filesystem::remove(p);
  std::filesystem::remove(out.string() + ".at_1");
  std::filesystem::remove(out.string() + ".at_2");
}

TEST(Imatrix, FilesCombineIntoTheSumsOfOneRun) {
  const Loaded stories = load("stories260K.gguf", 64);
  const Vocab& vocab = stories.vocab;
  Session& session = *stories.session;
  const std::vector<Token> tokens = perplexity_tokens(vocab, story());
  ImatrixOptions o;
  o.n_ctx = 64;
  o.max_chunks = 3;
  o.compute_ppl = false;
  o.dataset = "whole.txt";
  const ImatrixResult whole = compute_imatrix(session, vocab, tokens, o);
  // Chunk 0 into one file, chunks 1 and 2 into another.
  o.max_chunks = 1;
  o.dataset = "first.txt";
  const ImatrixResult first = compute_imatrix(session, vocab, tokens, o);
  o.first_chunk = 1;
  o.max_chunks = 2;
  o.dataset = "rest.txt";
  const ImatrixResult rest = compute_imatrix(session, vocab, tokens, o);
  EXPECT_EQ(first.chunk_count(), 1);
  EXPECT_EQ(rest.chunk_count(), 2);
  const auto a = temp_path("first.imatrix.gguf"), b = temp_path("rest.imatrix.gguf");
  write_imatrix(first, a.string());
  write_imatrix(rest, b.string());
  {  // the GGUF holds in_sum beside in_sum2 and counts, as llama-imatrix writes
    const gguf::File f = gguf::File::open(a.string());
    EXPECT_EQ(f.tensors().size(), 3 * first.stats.size());
    EXPECT_EQ(f32_tensor(f, "blk.0.attn_q.weight.in_sum"), first.stats.at("blk.0.attn_q.weight").in_sum);
    EXPECT_EQ(f.get_int("imatrix.chunk_count"), 1);
    EXPECT_EQ(f.get_int("imatrix.chunk_size"), 64);
  }
  auto expect_whole = [&](const ImatrixResult& combined) {
    ASSERT_EQ(combined.stats.size(), whole.stats.size());
    EXPECT_EQ(combined.chunk_count(), 3);
    for (const auto& [name, w] : whole.stats) {
      SCOPED_TRACE(name);
      const ImatrixStats& c = combined.stats.at(name);
      EXPECT_EQ(c.counts, w.counts);
      ASSERT_EQ(c.in_sum2.size(), w.in_sum2.size());
      ASSERT_EQ(c.in_sum.size(), w.in_sum.size());
      // Float sums added in another order: equal to rounding.
      for (size_t j = 0; j < w.in_sum2.size(); ++j) {
        EXPECT_NEAR(c.in_sum2[j], w.in_sum2[j], 1e-5 * std::abs(w.in_sum2[j]) + 1e-6) << j;
        EXPECT_NEAR(c.in_sum[j], w.in_sum[j], 1e-4 * std::sqrt(w.in_sum2[j] * 192) + 1e-6) << j;
      }
    }
  };
  {  // --in-file a --in-file b: combined
    ImatrixResult combined;
    read_imatrix_sums(combined, a.string(), 64);
    read_imatrix_sums(combined, b.string(), 64);
    EXPECT_EQ(combined.datasets, (std::vector<std::string>{"first.txt", "rest.txt"}));
    expect_whole(combined);
  }
  {  // --in-file a with the rest of the text: the same
    ImatrixResult continued;
    read_imatrix_sums(continued, a.string(), 64);
    compute_imatrix(continued, session, vocab, tokens, o);
    EXPECT_EQ(continued.datasets, (std::vector<std::string>{"first.txt", "rest.txt"}));
    EXPECT_EQ(continued.n_chunks, 2);
    expect_whole(continued);
  }
  {  // a file for another model is refused by the weight's name
    const auto mixtral = temp_path("mixtral.imatrix.gguf");
    const Loaded other = load("oracle/tiny-mixtral-f32.gguf", 64);
    ImatrixOptions mo;
    mo.n_ctx = 64;
    mo.max_chunks = 1;
    write_imatrix(compute_imatrix(*other.session, other.vocab, perplexity_tokens(other.vocab, story()), mo),
                  mixtral.string());
    ImatrixResult mixed;
    read_imatrix_sums(mixed, a.string(), 64);
    try {
      read_imatrix_sums(mixed, mixtral.string(), 64);
      ADD_FAILURE() << "another model's matrix was combined";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("blk.0."), std::string::npos) << e.what();
    }
    std::filesystem::remove(mixtral);
  }
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Imatrix, TheLegacyFormatStoresMeansTimesCalls) {
  // Hand-made statistics: ncall = the largest count / chunk_size rounded up.
  ImatrixResult r;
  r.chunk_size = 4;
  r.datasets = {"old.txt", "calib.txt"};
  ImatrixStats experts;  // two matrices of 2 columns; the second saw nothing
  experts.ne0 = 2;
  experts.in_sum2 = {10, 20, 7, 7};
  experts.in_sum = {1, 2, 0, 0};
  experts.counts = {5, 0};
  r.stats["blk.0.ffn_up_exps.weight"] = experts;
  ImatrixStats dense;
  dense.ne0 = 3;
  dense.in_sum2 = {8, 16, 24};
  dense.counts = {8};
  r.stats["blk.0.attn_q.weight"] = dense;
  ImatrixStats unseen;  // no input at all: left out
  unseen.ne0 = 1;
  unseen.in_sum2 = {0};
  unseen.counts = {0};
  r.stats["blk.1.ffn_up_exps.weight"] = unseen;
  EXPECT_EQ(r.chunk_count(), 2);  // 8 / 4

  const auto path = temp_path("legacy.imatrix.dat");
  write_imatrix(r, path.string(), ImatrixFormat::LegacyDat);
  std::ifstream f(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  size_t at = 0;
  auto i32 = [&] {
    int32_t v = 0;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  auto str = [&](int32_t n) {
    std::string s(bytes.data() + at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
    return s;
  };
  auto floats = [&](int32_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    std::memcpy(v.data(), bytes.data() + at, v.size() * 4);
    at += v.size() * 4;
    return v;
  };
  ASSERT_GE(bytes.size(), 4u);
  EXPECT_EQ(i32(), 2);  // entries, sorted by name
  EXPECT_EQ(str(i32()), "blk.0.attn_q.weight");
  EXPECT_EQ(i32(), 2);  // ncall = 8 / 4
  EXPECT_EQ(i32(), 3);
  EXPECT_EQ(floats(3), (std::vector<float>{2, 4, 6}));  // 8/8*2, 16/8*2, 24/8*2
  EXPECT_EQ(str(i32()), "blk.0.ffn_up_exps.weight");
  EXPECT_EQ(i32(), 2);  // ceil(5 / 4)
  EXPECT_EQ(i32(), 4);
  EXPECT_EQ(floats(4), (std::vector<float>{4, 8, 2, 2}));  // 10/5*2, 20/5*2, then ncall
  EXPECT_EQ(i32(), 2);                                     // chunk count
  EXPECT_EQ(str(i32()), "calib.txt");                      // the last dataset
  EXPECT_EQ(at, bytes.size());

  // The quantizer reads the means back; combining restores sums with the chunk size given.
  const ImportanceMatrix m = read_imatrix(path.string());
  EXPECT_EQ(m.values.at("blk.0.attn_q.weight"), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(m.values.at("blk.0.ffn_up_exps.weight"), (std::vector<float>{2, 4, 1, 1}));
  EXPECT_EQ(m.chunk_count, 2);
  ImatrixResult back;
  read_imatrix_sums(back, path.string(), 4);
  EXPECT_EQ(back.datasets, std::vector<std::string>{"calib.txt"});
  const ImatrixStats& q = back.stats.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.in_sum2, (std::vector<float>{8, 16, 24}));  // 2 calls of 4 rows
  EXPECT_EQ(q.counts, std::vector<int64_t>{8});
  EXPECT_TRUE(q.in_sum.empty());
  // Sums from a file without in_sum leave none for the weight (they would be partial).
  const auto gguf_path = temp_path("with_sums.imatrix.gguf");
  write_imatrix(r, gguf_path.string());
  ImatrixResult mixed;
  read_imatrix_sums(mixed, gguf_path.string(), 4);
  EXPECT_EQ(mixed.stats.at("blk.0.ffn_up_exps.weight").in_sum, experts.in_sum);
  read_imatrix_sums(mixed, path.string(), 4);
  EXPECT_TRUE(mixed.stats.at("blk.0.ffn_up_exps.weight").in_sum.empty());
  // The legacy count (2 calls of 4) spreads over both experts.
  EXPECT_EQ(mixed.stats.at("blk.0.ffn_up_exps.weight").counts, (std::vector<int64_t>{13, 8}));
  std::filesystem::remove(path);
  std::filesystem::remove(gguf_path);
}

TEST(Imatrix, StatisticsAsLlamaImatrixShowsThem) {
  auto stats = [](int64_t ne0, std::vector<float> sum2, std::vector<float> sum, std::vector<int64_t> counts) {
    ImatrixStats s;
    s.ne0 = ne0;
    s.in_sum2 = std::move(sum2);
    s.in_sum = std::move(sum);
    s.counts = std::move(counts);
    return s;
  };
  ImatrixResult r;
  r.chunk_size = 2;
  r.stats["blk.0.attn_q.weight"] = stats(2, {2, 8}, {2, -4}, {2});         // means 1, -2; mean squares 1, 4
  r.stats["blk.1.attn_q.weight"] = stats(2, {4, 16}, {4, 0}, {4});         // means 1, 0
  r.stats["blk.1.ffn_up_exps.weight"] = stats(1, {8, 0}, {2, 0}, {2, 0});  // the second expert saw nothing
  const ImatrixStatistics st = imatrix_statistics(r);
  EXPECT_FALSE(st.legacy);
  ASSERT_EQ(st.tensors.size(), 3u);
  // By tensor, then by cosine similarity.
  const ImatrixTensorStatistics &q1 = st.tensors[0], &q0 = st.tensors[1], &up = st.tensors[2];
  EXPECT_EQ(q1.name, "blk.1.attn_q.weight");
  EXPECT_EQ(q1.layer, "1");
  EXPECT_EQ(q1.tensor, "attn_q");
  EXPECT_EQ(q0.name, "blk.0.attn_q.weight");
  EXPECT_EQ(up.tensor, "ffn_up_exps");
  // blk.0.attn_q: values 1 and -2.
  EXPECT_DOUBLE_EQ(q0.sum, -1.0);
  EXPECT_DOUBLE_EQ(q0.min, -2.0);
  EXPECT_DOUBLE_EQ(q0.max, 1.0);
  EXPECT_DOUBLE_EQ(q0.mean, -0.5);
  EXPECT_NEAR(q0.std_dev, std::sqrt(4.5), 1e-12);
  EXPECT_EQ(q0.elements, 2);
  EXPECT_NEAR(q0.entropy, -(0.2 * std::log2(0.2) + 0.8 * std::log2(0.8)), 1e-12);  // mean squares 1 : 4
  EXPECT_EQ(q0.zd_fraction, 0.0);                                                  // both 0.71 deviations out
  EXPECT_EQ(q0.cos_sim, 0.0);                                                      // no layer before
  // blk.1.attn_q against blk.0's means: (1, 0) . (1, -2) / (1 * sqrt 5); distance |(0, 2)|.
  EXPECT_NEAR(q1.cos_sim, 1.0 / std::sqrt(5.0), 1e-12);
  EXPECT_NEAR(q1.l2_distance, 2.0, 1e-12);
  // The expert that saw nothing is left out of the values.
  EXPECT_EQ(up.elements, 1);
  EXPECT_DOUBLE_EQ(up.mean, 1.0);
  EXPECT_EQ(up.std_dev, 0.0);
  // Layers: 1's sum over both weights, its similarity over the weights that have a layer before.
  ASSERT_EQ(st.layers.size(), 2u);
  EXPECT_EQ(st.layers[0].layer, 0);
  EXPECT_DOUBLE_EQ(st.layers[0].sum, -1.0);
  EXPECT_EQ(st.layers[1].layer, 1);
  EXPECT_DOUBLE_EQ(st.layers[1].sum, 2.0);
  EXPECT_NEAR(st.layers[1].cos_sim, 1.0 / std::sqrt(5.0), 1e-12);
  EXPECT_NEAR(st.layers[1].l2_distance, 2.0, 1e-12);

  // Without sums (a legacy file): the mean squares, sorted by their sum.
  for (auto& [name, s] : r.stats) s.in_sum.clear();
  r.stats["blk.1.attn_q.weight"].in_sum2 = {4, 4};  // mean squares 1, 1
  const ImatrixStatistics legacy = imatrix_statistics(r);
  EXPECT_TRUE(legacy.legacy);
  EXPECT_EQ(legacy.tensors[0].name, "blk.0.attn_q.weight");  // sum 5 before 2
  EXPECT_DOUBLE_EQ(legacy.tensors[0].sum, 5.0);
  EXPECT_NEAR(legacy.tensors[1].cos_sim, 5.0 / std::sqrt(2.0 * 17.0),
              1e-12);  // (1, 1) . (1, 4) / (sqrt 2 sqrt 17)
  // Nothing that saw input: an error.
  ImatrixResult empty;
  empty.stats["blk.0.attn_q.weight"] = stats(1, {0}, {0}, {0});
  EXPECT_THROW(imatrix_statistics(empty), Error);
}

TEST(Imatrix, ParseSpecialReadsControlTokenTexts) {
  const auto model = Model::load(kModels + "stories260K.gguf");
  const Vocab vocab = Vocab::from_gguf(*model->file());
  const std::string text = "Once upon a time</s>there was";
  const auto plain = perplexity_tokens(vocab, text), special = perplexity_tokens(vocab, text, true);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), vocab.eos()), 0);
  EXPECT_EQ(std::count(special.begin(), special.end(), vocab.eos()), 1);
}
