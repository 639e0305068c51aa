// A model split into pipeline stages in one process (what mpi/pipeline.h runs in several): each
// stage loads only its layers, the first computes hidden states from tokens, the later ones take
// the previous stage's, and the last stage's logits equal the whole model's, for a prompt in
// several micro-batches, generation steps, several sequences and a position shift; a serving
// engine on the first stage generates the whole model's text.
#include <gtest/gtest.h>

#include <string>

#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/batch.h"
#include "tessera/llm/engine.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

std::string shared_model(const std::string& name) {
  return std::string(TESSERA_SHARED_DIR) + "/models/" + name;
}

LoadOptions stage(int64_t first, int64_t end) {
  LoadOptions o;
  o.stage = LayerRange{first, end};
  return o;
}

// One model as a chain of stage sessions.
class Stages {
 public:
  Stages(const std::string& path, const std::vector<int64_t>& cuts, const SessionOptions& options) {
    const int64_t n_layer = Model::load(path)->hparams().n_layer;
    std::vector<int64_t> bounds{0};
    bounds.insert(bounds.end(), cuts.begin(), cuts.end());
    bounds.push_back(n_layer);
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      models_.push_back(Model::load(path, stage(bounds[s], bounds[s + 1])));
      sessions_.push_back(std::make_unique<Session>(*models_.back(), options));
    }
  }
  // The last stage's logits, each stage's output feeding the next.
  std::vector<float> decode(const Batch& batch) {
    std::vector<float> x = sessions_[0]->decode(batch);
    for (size_t s = 1; s < sessions_.size(); ++s) x = sessions_[s]->decode(batch, x);
    return x;
  }
  // A cache operation on every stage's cache.
  template <typename F>
  void each_cache(F f) {
    for (auto& s : sessions_) f(s->cache());
  }
  const Model& model(size_t s) const { return *models_[s]; }
  Session& session(size_t s) { return *sessions_[s]; }

 private:
  std::vector<std::unique_ptr<Model>> models_;
  std::vector<std::unique_ptr<Session>> sessions_;
};

Batch prompt(int64_t n_vocab, SeqId seq, size_t n, Pos start = 0) {
  Batch b;
  for (size_t i = 0; i < n; ++i)
    b.add(static_cast<Token>((7 + 13 * i + 5 * static_cast<size_t>(seq)) % static_cast<size_t>(n_vocab)),
          start + static_cast<Pos>(i), seq, true);
  return b;
}

struct StageCase {
  const char* file;
  std::vector<int64_t> cuts;
  bool shifts = true;  // false: the model's rope (YaRN) cannot shift positions
};

class PipelineStages : public testing::TestWithParam<StageCase> {};

}  // namespace

// The same graph ops on the same values, cut between layers: the logits are the same numbers.
TEST_P(PipelineStages, LastStageGivesTheWholeModelsLogits) {
  const std::string path = shared_model(GetParam().file);
  const SessionOptions options{.n_ctx = 64, .n_batch = 5};  // a 12-token prompt in three micro-batches
  auto whole_model = Model::load(path);
  Session whole(*whole_model, options);
  Stages stages(path, GetParam().cuts, options);
  const int64_t n_vocab = whole_model->hparams().n_vocab;

  // Two sequences' prompts in one batch.
  Batch first = prompt(n_vocab, 0, 12);
  const Batch other = prompt(n_vocab, 1, 4);
  for (size_t i = 0; i < other.size(); ++i)
    first.add(other.tokens[i], other.positions[i], other.seq_ids[i], i + 1 == other.size());
  const std::vector<float> expected = whole.decode(first);
  EXPECT_TRUE(stages.decode(first) == expected) << "the prompts' logits differ";

  // Generation steps of sequence 0.
  for (Pos p = 12; p < 15; ++p) {
    Batch step;
    step.add(static_cast<Token>(p * 3 % n_vocab), p, 0, true);
    const std::vector<float> want = whole.decode(step);
    EXPECT_TRUE(stages.decode(step) == want) << "position " << p;
  }

  if (!GetParam().shifts) return;
  // Drop sequence 0's positions [2, 6) and shift the rest back (K re-roped on every stage).
  whole.cache().seq_remove(0, 2, 6);
  whole.cache().seq_shift(0, 6, -1, -4);
  stages.each_cache([](KvCache& c) {
    c.seq_remove(0, 2, 6);
    c.seq_shift(0, 6, -1, -4);
  });
  Batch after;
  after.add(3, 11, 0, true);
  after.add(4, 4, 1, true);
  const std::vector<float> want = whole.decode(after);
  EXPECT_TRUE(stages.decode(after) == want) << "after the shift";
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineStages,
                         testing::Values(StageCase{"stories260K.gguf", {2}},
                                         StageCase{"stories260K.gguf", {1, 3}},
                                         StageCase{"oracle/tiny-gemma2-f32.gguf", {1}},
                                         StageCase{"oracle/tiny-phi3-f16.gguf", {1}},
                                         StageCase{"oracle/tiny-qwen3moe-q4_k_m.gguf", {1}},
                                         StageCase{"oracle/tiny-gptoss-mxfp4.gguf", {1}, false}),
                         [](const testing::TestParamInfo<StageCase>& info) {
                           std::string name = info.param.file;
                           name = name.substr(name.find('/') + 1);
                           name = name.substr(0, name.find('.'));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name + "_" + std::to_string(info.param.cuts.size() + 1) + "_stages";
                         });

// A stage holds its own layers' weights and cache, and the embeddings or the output layer only
// when it begins or ends the model.
TEST(PipelineStage, HoldsOnlyItsLayers) {
  const std::string path = shared_model("stories260K.gguf");
  auto whole = Model::load(path);
  auto first = Model::load(path, stage(0, 2));
  auto last = Model::load(path, stage(2, whole->hparams().n_layer));
  EXPECT_TRUE(first->first_stage());
  EXPECT_FALSE(first->last_stage());
  EXPECT_FALSE(last->first_stage());
  EXPECT_TRUE(last->last_stage());
  EXPECT_EQ(first->end_layer(), 2);
  EXPECT_EQ(last->first_layer(), 2);
  EXPECT_LT(first->weight_bytes(), whole->weight_bytes());
  EXPECT_LT(last->weight_bytes(), whole->weight_bytes());
  // Every weight is in one stage or the other, the tied embeddings/output (if any) in both.
  EXPECT_GE(first->weight_bytes() + last->weight_bytes(), whole->weight_bytes());
  KvCache cache(*first, 8);
  EXPECT_NO_THROW(cache.k(1));
  EXPECT_THROW(cache.k(2), Error);
}

TEST(PipelineStage, BadStagesAndInputsAreErrors) {
  const std::string path = shared_model("stories260K.gguf");
  const int64_t n_layer = Model::load(path)->hparams().n_layer;
  EXPECT_THROW(Model::load(path, stage(2, 2)), Error);
  EXPECT_THROW(Model::load(path, stage(-1, 2)), Error);
  EXPECT_THROW(Model::load(path, stage(1, n_layer + 1)), Error);

  auto later = Model::load(path, stage(2, n_layer));
  Session s(*later);
  const Batch b = prompt(later->hparams().n_vocab, 0, 3);
  EXPECT_THROW(s.decode(b), Error);  // a later stage needs the previous stage's hidden states
  std::vector<float> hidden(3 * static_cast<size_t>(later->hparams().n_embd) - 1, 0.0f);
  EXPECT_THROW(s.decode(b, hidden), Error);  // one value short
  EXPECT_EQ(s.cache().used(), 0);
  struct NoLink : StageLink {
    void begin(KvCache&) override {}
    void forward(const Batch&, size_t, size_t, std::span<const float>) override {}
    void finish(std::vector<float>&) override {}
  } link;
  EXPECT_THROW(s.set_stage_link(&link), Error);  // only a first stage sends on

  auto whole = Model::load(path);
  Session w(*whole);
  EXPECT_THROW(w.decode(b, std::vector<float>(3 * static_cast<size_t>(whole->hparams().n_embd))), Error);
  EXPECT_THROW(w.set_stage_link(&link), Error);
}

namespace {

// A pipeline's link within one process: the later stage decodes each micro-batch as it is sent, its
// cells first set to what the first stage's were as the decode began (as mpi/pipeline.cpp does
// between ranks).
class InProcessLink final : public StageLink {
 public:
  explicit InProcessLink(Session& later) : later_(later) {}
  void begin(KvCache& cache) override {
    cells_ = cache.save_cells();
    first_ = true;
  }
  void forward(const Batch& batch, size_t start, size_t n, std::span<const float> hidden) override {
    if (first_) later_.cache().load_cells(cells_);
    first_ = false;
    Batch part;
    for (size_t i = start; i < start + n; ++i)
      part.add(batch.tokens[i], batch.positions[i], batch.seq_ids[i], batch.logits[i] != 0);
    const std::vector<float>& out = later_.decode(part, hidden);
    logits_.insert(logits_.end(), out.begin(), out.end());
    ++micro_batches;
  }
  void finish(std::vector<float>& logits) override {
    logits.insert(logits.end(), logits_.begin(), logits_.end());
    logits_.clear();
  }
  int micro_batches = 0;

 private:
  Session& later_;
  std::vector<int32_t> cells_;
  std::vector<float> logits_;
  bool first_ = false;
};

}  // namespace

// `serve --pipeline` in one process: the engine runs on the first stage with its session linked to
// a later stage made by Engine::make_session; concurrent requests (more than the slots, prompts
// read in several chunks) and a reused prefix give the whole model's greedy text.
TEST(PipelineStage, AnEngineOnTheFirstStageGeneratesTheWholeModelsText) {
  const std::string path = shared_model("stories260K.gguf");
  auto whole = Model::load(path);
  const Vocab vocab = Vocab::from_gguf(*whole->file());
  const EngineOptions options{.n_slots = 2, .n_ctx = 2 * 128, .prompt_chunk = 5};
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Tom went to the park", "Once upon a time there"};
  GenerationParams greedy;
  greedy.sampling.temperature = 0.0f;
  greedy.max_tokens = 32;
  const auto generate = [&](Engine& engine) {
    std::vector<std::shared_ptr<Generation>> jobs;
    for (const auto& p : prompts) jobs.push_back(engine.submit(vocab.encode(p, true), greedy));
    std::vector<GenerationUpdate> out;
    for (auto& j : jobs) out.push_back(j->wait());
    // The last prompt again, alone: the cells a finished slot holds for it are reused.
    out.push_back(engine.submit(vocab.encode(prompts.back(), true), greedy)->wait());
    return out;
  };
  std::vector<GenerationUpdate> want;
  {
    Engine engine(*whole, vocab, options);
    want = generate(engine);
  }

  const int64_t n_layer = whole->hparams().n_layer;
  auto first = Model::load(path, stage(0, 2));
  auto later = Model::load(path, stage(2, n_layer));
  const auto later_session = Engine::make_session(*later, options);
  InProcessLink link(*later_session);
  EngineOptions linked = options;
  linked.stage_link = &link;
  std::vector<GenerationUpdate> got;
  {
    Engine engine(*first, vocab, linked);
    got = generate(engine);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].text, want[i].text) << i;
    EXPECT_EQ(got[i].completion_tokens, 32) << i;
  }
  EXPECT_GT(got.back().cached_tokens, 0);
  EXPECT_EQ(got.back().text, got[prompts.size() - 1].text);
  EXPECT_GT(link.micro_batches, 32);
}

// A pipeline's ranks share the layers by their bytes: hand-worked splits, and each layer's bytes
// as the file's tensor names place them (blk.N.* in layer N, the output layer's with the last, the
// token embeddings' with the first unless mapped).
TEST(PipelineStage, LayersAreSharedByTheirBytes) {
  // Sizes 1 1 1 1 4 in halves: the middles are at 1/16, 3/16, 5/16, 7/16 and 12/16 of the whole.
  EXPECT_EQ(split_by_shares(std::vector<double>{1, 1, 1, 1, 4}, std::vector<double>{1, 1}, "test"),
            (std::vector<size_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(split_by_shares(std::vector<double>{4, 1, 1, 1, 1}, std::vector<double>{1, 1}, "test"),
            (std::vector<size_t>{0, 1, 1, 1, 1}));
  // Equal sizes: the rule by count.
  EXPECT_EQ(split_by_shares(std::vector<double>{2, 2, 2, 2, 2}, std::vector<double>{1, 3, 1}, "test"),
            split_by_shares(5, std::vector<double>{1, 3, 1}, "test"));
  EXPECT_THROW(split_by_shares(std::vector<double>{1, 1}, std::vector<double>{0, 0}, "test"), Error);

  for (const char* name :
       {"stories260K.gguf", "oracle/tiny-gemma2-f32.gguf", "oracle/tiny-qwen3moe-q4_k_m.gguf"}) {
    const auto file = gguf::File::open(shared_model(name), {.metadata_only = true});
    const int64_t n_layer = read_hparams(file).n_layer;
    std::vector<double> want(static_cast<size_t>(n_layer), 0.0);
    double embeddings = 0;
    for (const gguf::TensorInfo& t : file.tensors()) {
      const auto b = static_cast<double>(t.nbytes);
      if (t.name.starts_with("blk."))
        want[std::stoul(t.name.substr(4))] += b;
      else if (t.name.starts_with("output"))
        want.back() += b;
      else if (t.name == "token_embd.weight")
        embeddings = b;
    }
    if (file.find_tensor("output.weight") == nullptr) want.back() += embeddings;  // tied
    EXPECT_EQ(stage_layer_bytes(file, true), want) << name;
    want.front() += embeddings;
    EXPECT_EQ(stage_layer_bytes(file, false), want) << name;
  }
}
