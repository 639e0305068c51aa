// End to end on a real trained model (../shared/models/stories260K.gguf).
#include "tessera/llm/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>

#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";

std::vector<Token> greedy(const Model& model, const Vocab& vocab, const std::string& prompt, int n,
                          int threads = 2) {
  SessionOptions so;
  so.n_threads = threads;
  Session session(model, so);
  auto tokens = vocab.encode(prompt, true);
  std::vector<float> logits = session.decode(tokens);
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler sampler(o);
  std::vector<Token> out;
  for (int i = 0; i < n; ++i) {
    const Token t = sampler.sample(logits);
    out.push_back(t);
    logits = session.decode(std::span<const Token>(&t, 1));
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST(Llama, LoadsHyperparametersOfStories260K) {
  auto model = Model::load(kModel);
  const Hparams& h = model->hparams();
  EXPECT_EQ(h.n_layer, 5);
  EXPECT_EQ(h.n_vocab, 512);
  EXPECT_GT(h.n_embd, 0);
  EXPECT_EQ(h.n_embd % h.n_head, 0);
  EXPECT_EQ(model->device(), nullptr);
  // CPU weights point into the mapped file: no copy.
  const auto* info = model->file()->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(model->weight("blk.0.attn_q.weight")->data, model->file()->tensor_data(*info));
}

TEST(Llama, GreedyStoryIsPinned) {
  auto model = Model::load(kModel);
  const auto vocab = Vocab::from_gguf(*model->file());
  const auto tokens = greedy(*model, vocab, "Once upon a time", 40);
  const std::string text = vocab.decode(tokens);
  std::printf("greedy: Once upon a time%s\n", text.c_str());
  // Pinned after reading the text: ", there was a little girl named Lily. She loved to play outside in
  // the park. One day, she saw a big, red ball."
  const std::vector<Token> expected = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396,
                                       267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385,
                                       328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426};
  EXPECT_EQ(tokens, expected) << text;
}

TEST(Llama, BatchAndTokenByTokenGiveTheSameLogits) {
  auto model = Model::load(kModel);
  const auto vocab = Vocab::from_gguf(*model->file());
  const auto tokens = vocab.encode("Once upon a time there was a little girl named Lily.", true);
  ASSERT_GT(tokens.size(), 8u);
  Session batch(*model);
  const std::vector<float> all = batch.decode(tokens, /*all_logits=*/true);
  const int64_t n_vocab = model->hparams().n_vocab;
  ASSERT_EQ(all.size(), tokens.size() * static_cast<size_t>(n_vocab));
  Session step(*model);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> one = step.decode(std::span<const Token>(&tokens[i], 1));
    const std::vector<float> row(all.begin() + static_cast<std::ptrdiff_t>(i * n_vocab),
                                 all.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab));
    EXPECT_LT(max_abs_diff(one, row), 2e-3) << "position " << i;
  }
  // Batches of 3 (prompt processing in several graphs) agree too.
  SessionOptions so;
  so.n_batch = 3;
  Session small(*model, so);
  const std::vector<float> chunked = small.decode(tokens, true);
  EXPECT_LT(max_abs_diff(chunked, all), 2e-3);
}

TEST(Llama, LongBatchesAttendInGroupsOfQueryTokensWithTheSameLogits) {
  // A batch of 512 tokens over 512 cells holds KQ (512 cells x 8 heads x 4 bytes per token) in
  // groups of 256 query tokens (the CPU's FLASH_ATTN_EXT: about 4 MiB each); batches of 256 (one group each)
  // and of 200 compute every token's attention in one product. Each token's attention is its own, so the
  // logits of every position are the same bits.
  auto model = Model::load(kModel);
  ASSERT_EQ(model->hparams().n_head, 8);
  std::vector<Token> tokens;
  for (int i = 0; i < 512; ++i) tokens.push_back(static_cast<Token>(3 + (i * 97 + 5) % 500));
  const auto run = [&](int64_t n_batch) {
    SessionOptions so;
    so.n_ctx = 512;
    so.n_batch = n_batch;
    Session s(*model, so);
    return s.decode(tokens, true);
  };
  const std::vector<float> grouped = run(512);
  ASSERT_EQ(grouped.size(), tokens.size() * static_cast<size_t>(model->hparams().n_vocab));
  for (int64_t n_batch : {256, 200}) {
    const std::vector<float> whole = run(n_batch);
    EXPECT_EQ(0, std::memcmp(whole.data(), grouped.data(), grouped.size() * sizeof(float)))
        << "batches of " << n_batch << ", max difference " << max_abs_diff(whole, grouped);
  }
}

TEST(Llama, ThreadCountDoesNotChangeLogits) {
  auto model = Model::load(kModel);
  const auto vocab = Vocab::from_gguf(*model->file());
  const auto tokens = vocab.encode("The cat sat", true);
  SessionOptions one, two;
  one.n_threads = 1;
  two.n_threads = 2;
  Session a(*model, one), b(*model, two);
  EXPECT_EQ(a.decode(tokens, true), b.decode(tokens, true));
}

TEST(Llama, BadInputIsAnError) {
  EXPECT_THROW(Model::load("/nonexistent/model.gguf"), Error);
  // Not a GGUF.
  const std::string junk = testing::TempDir() + "/junk.gguf";
  {
    std::ofstream f(junk, std::ios::binary);
    f << "this is not a gguf file at all";
  }
  EXPECT_THROW(Model::load(junk), Error);
  // A GGUF of another architecture.
  {
    gguf::Writer w;
    w.set("general.architecture", std::string("mamba"));
    w.write(testing::TempDir() + "/mamba.gguf");
  }
  try {
    Model::load(testing::TempDir() + "/mamba.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mamba"), std::string::npos) << e.what();
  }
  auto model = Model::load(kModel);
  SessionOptions so;
  so.n_ctx = 8;
  Session s(*model, so);
  std::vector<Token> too_long(9, 1);
  EXPECT_THROW(s.decode(too_long), Error);
  std::vector<Token> bad_id{100000};
  EXPECT_THROW(s.decode(bad_id), Error);
  // An unknown device.
  LoadOptions lo;
  lo.device = "NoSuchDevice";
  lo.n_gpu_layers = 1;
  EXPECT_THROW(Model::load(kModel, lo), Error);
}

TEST(Llama, SyntheticModelRuns) {
  SyntheticSpec spec;
  spec.n_embd = 64;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 96;
  spec.n_vocab = 100;
  spec.type = DType::Q8_0;
  auto model = Model::synthetic(spec);
  Session s(*model);
  std::vector<Token> tokens{1, 5, 7, 9};
  const auto& logits = s.decode(tokens);
  ASSERT_EQ(logits.size(), 100u);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  // Deterministic: the same spec gives the same weights and logits.
  auto again = Model::synthetic(spec);
  Session s2(*again);
  EXPECT_EQ(s2.decode(tokens), logits);
}

namespace {

// stories260K rewritten without the tensor `drop`, plus whatever `extra` adds.
std::string rewritten(const std::string& name, const std::string& drop,
                      const std::function<void(gguf::Writer&)>& extra = {}) {
  const auto f = gguf::File::open(kModel);
  gguf::Writer w;
  for (const auto& [k, v] : f.kvs())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : f.tensors())
    if (t.name != drop)
      w.add_tensor_raw(t.name, t.type_id,
                       std::span<const int64_t>(t.ne.data(), static_cast<size_t>(t.n_dims)), f.tensor_data(t),
                       t.nbytes);
  if (extra) extra(w);
  const std::string path = testing::TempDir() + "/" + name;
  w.write(path);
  return path;
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Llama, MissingNormWeightIsAnError) {
  // A 1-D weight (a norm) used to be dereferenced without a look-up check: a crash.
  const std::string msg = load_error(rewritten("no_norm.gguf", "blk.1.ffn_norm.weight"));
  EXPECT_NE(msg.find("blk.1.ffn_norm.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(Llama, RopeFreqsAreLoadedAndChecked) {
  const int64_t half = Model::load(kModel)->hparams().n_rot / 2;
  std::vector<float> ones(static_cast<size_t>(half), 1.0f);
  const int64_t ne_ok[] = {half};
  auto model = Model::load(rewritten("freqs.gguf", "", [&](gguf::Writer& w) {
    w.add_tensor("rope_freqs.weight", DType::F32, ne_ok, ones.data(), ones.size() * 4);
  }));
  ASSERT_NE(model->weight("rope_freqs.weight"), nullptr);
  EXPECT_EQ(model->weight("rope_freqs.weight")->ne[0], half);
  auto plain = Model::load(kModel);
  EXPECT_EQ(plain->weight("rope_freqs.weight"), nullptr);
  // Factors of 1 change nothing: the same logits as without them.
  Session with(*model), without(*plain);
  const std::vector<Token> tokens{1, 403, 407, 261, 378};
  EXPECT_EQ(with.decode(tokens, true), without.decode(tokens, true));
  // The wrong length is an Error naming the tensor.
  const int64_t ne_bad[] = {half + 1};
  std::vector<float> more(static_cast<size_t>(half + 1), 1.0f);
  const std::string msg = load_error(rewritten("bad_freqs.gguf", "", [&](gguf::Writer& w) {
    w.add_tensor("rope_freqs.weight", DType::F32, ne_bad, more.data(), more.size() * 4);
  }));
  EXPECT_NE(msg.find("rope_freqs.weight"), std::string::npos) << msg;
}
