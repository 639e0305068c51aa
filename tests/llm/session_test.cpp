// Session with several sequences in one KV cache (stories260K): a mixed batch gives each sequence
// the logits it gets alone; removing, copying and shifting sequences keep logits right; generation
// graphs keep one shape from token to token.
#include "tessera/llm/session.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/opencl.h"
#include "tessera/buffer.h"
#include "tessera/convert.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";

class SessionTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::load(kModel).release();
    vocab_ = new Vocab(Vocab::from_gguf(*model_->file()));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
  }
  static std::vector<Token> encode(const std::string& s, bool bos = true) { return vocab_->encode(s, bos); }
  static int64_t n_vocab() { return model_->hparams().n_vocab; }
  // Row r of a [rows][n_vocab] logits array.
  static std::vector<float> row(const std::vector<float>& all, size_t r) {
    const auto n = static_cast<size_t>(n_vocab());
    return {all.begin() + static_cast<std::ptrdiff_t>(r * n),
            all.begin() + static_cast<std::ptrdiff_t>((r + 1) * n)};
  }
  static Model* model_;
  static Vocab* vocab_;
};
Model* SessionTest::model_ = nullptr;
Vocab* SessionTest::vocab_ = nullptr;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

constexpr double kTol = 2e-3;  // as the batch-vs-token-by-token test: F16 K/V, other summation orders

}  // namespace

TEST_F(SessionTest, MixedBatchGivesEachSequenceItsOwnLogits) {
  const auto a = encode("Once upon a time there was a cat");
  const auto b = encode("The little dog ran to the park");
  Session alone(*model_);
  const std::vector<float> la = alone.decode(a, true);
  alone.reset();
  const std::vector<float> lb = alone.decode(b, true);

  // Interleave the two prompts token by token (sequences 3 and 5), every logit wanted.
  Session mixed(*model_);
  Batch batch;
  std::vector<std::pair<int, size_t>> order;  // (which prompt, index)
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) batch.add(a[i], static_cast<Pos>(i), 3, true), order.push_back({0, i});
    if (i < b.size()) batch.add(b[i], static_cast<Pos>(i), 5, true), order.push_back({1, i});
  }
  const std::vector<float> lm = mixed.decode(batch);
  ASSERT_EQ(lm.size(), (a.size() + b.size()) * static_cast<size_t>(n_vocab()));
  for (size_t r = 0; r < order.size(); ++r) {
    const auto& [which, i] = order[r];
    EXPECT_LT(max_abs_diff(row(lm, r), row(which == 0 ? la : lb, i)), kTol)
        << "prompt " << which << " token " << i;
  }
  EXPECT_EQ(mixed.cache().seq_pos_max(3), static_cast<Pos>(a.size() - 1));
  EXPECT_EQ(mixed.cache().seq_pos_max(5), static_cast<Pos>(b.size() - 1));

  // One generation step for both in one batch, only some logits wanted: the same as alone.
  const Token ta = 300, tb = 301;
  Batch step;
  step.add(ta, static_cast<Pos>(a.size()), 3, true);
  step.add(tb, static_cast<Pos>(b.size()), 5, true);
  const std::vector<float> ls = mixed.decode(step);
  Session sa(*model_), sb(*model_);
  sa.decode(a);
  sb.decode(b);
  EXPECT_LT(max_abs_diff(row(ls, 0), sa.decode(std::vector<Token>{ta})), kTol);
  EXPECT_LT(max_abs_diff(row(ls, 1), sb.decode(std::vector<Token>{tb})), kTol);
}

// A sequence in its own range of the cache (a server's slot), its tokens decoded one at a time
// between another sequence's: the logits are bit for bit those it gets alone in cells 0... (its
// attention runs over its own span of cells, whose ends fall on the same lanes).
TEST_F(SessionTest, ASequenceInItsOwnRangeHasTheLogitsItHasAlone) {
  const auto a = encode("Once upon a time there was a cat who liked to sit in the sun all day long");
  const auto b = encode("The little dog ran to the park");
  SessionOptions options;
  options.n_ctx = 256;
  Session alone(*model_, options);
  std::vector<std::vector<float>> expected;
  for (size_t i = 0; i < a.size(); ++i) {
    Batch one;
    one.add(a[i], static_cast<Pos>(i), 0, true);
    expected.push_back(alone.decode(one));
  }
  Session ranged(*model_, options);
  ranged.cache().set_seq_ranges(4);  // 64 cells each: sequence 2 lives in cells 128-191
  for (size_t i = 0; i < a.size(); ++i) {
    if (i < b.size()) {
      Batch other;
      other.add(b[i], static_cast<Pos>(i), 0, true);
      ranged.decode(other);
    }
    Batch one;
    one.add(a[i], static_cast<Pos>(i), 2, true);
    ASSERT_EQ(ranged.decode(one), expected[i]) << "token " << i;
  }
  for (int64_t c = 0; c < ranged.cache().size(); ++c) {
    const KvCell& cell = ranged.cache().cell(c);
    if (cell.has(2)) {
      EXPECT_TRUE(c >= 128 && c < 192) << c;
    }
    if (cell.has(0)) {
      EXPECT_LT(c, 64) << c;
    }
  }
}

TEST_F(SessionTest, RemovingASequenceAndDecodingAgainGivesTheSameLogits) {
  const auto a = encode("Once upon a time");
  const auto b = encode("Lily saw a big red ball");
  Session s(*model_);
  Batch batch;
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<Pos>(i), 0, true);
  for (size_t i = 0; i < b.size(); ++i) batch.add(b[i], static_cast<Pos>(i), 1, i + 1 == b.size());
  const std::vector<float> first = s.decode(batch);
  const std::vector<float> first_a(first.begin(), first.end() - n_vocab());

  s.cache().seq_clear(0);
  EXPECT_EQ(s.cache().seq_pos_max(0), -1);
  EXPECT_EQ(s.cache().used(), static_cast<int64_t>(b.size()));
  // Sequence 0 again, now in the cells it freed, next to sequence 1's: the same logits.
  Batch again;
  for (size_t i = 0; i < a.size(); ++i) again.add(a[i], static_cast<Pos>(i), 0, true);
  EXPECT_LT(max_abs_diff(s.decode(again), first_a), kTol);

  // Removing the tail of a sequence and decoding it again gives the tail's logits again.
  s.cache().seq_remove(0, 2, -1);
  EXPECT_EQ(s.cache().seq_pos_max(0), 1);
  Batch tail;
  for (size_t i = 2; i < a.size(); ++i) tail.add(a[i], static_cast<Pos>(i), 0, true);
  const std::vector<float> lt = s.decode(tail);
  for (size_t i = 2; i < a.size(); ++i) EXPECT_LT(max_abs_diff(row(lt, i - 2), row(first_a, i)), kTol) << i;

  // Sequence 1 was not disturbed.
  Batch next;
  next.add(300, static_cast<Pos>(b.size()), 1, true);
  Session alone(*model_);
  alone.decode(b);
  EXPECT_LT(max_abs_diff(s.decode(next), alone.decode(std::vector<Token>{300})), kTol);
}

TEST_F(SessionTest, CopiedSequenceSharesThePrefix) {
  const auto prefix = encode("Once upon a time, there was");
  const auto c1 = encode(" a little girl", false);
  const auto c2 = encode(" a big dog named", false);
  Session s(*model_);
  s.decode(prefix);
  s.cache().seq_copy(0, 1, -1, -1);
  EXPECT_EQ(s.cache().seq_pos_max(1), static_cast<Pos>(prefix.size() - 1));
  Batch batch;
  const auto p0 = static_cast<Pos>(prefix.size());
  for (size_t i = 0; i < c1.size(); ++i) batch.add(c1[i], p0 + static_cast<Pos>(i), 0, true);
  for (size_t i = 0; i < c2.size(); ++i) batch.add(c2[i], p0 + static_cast<Pos>(i), 1, true);
  const std::vector<float> lm = s.decode(batch);
  // The prefix's cells are held once.
  EXPECT_EQ(s.cache().used(), static_cast<int64_t>(prefix.size() + c1.size() + c2.size()));

  for (int which = 0; which < 2; ++which) {
    const auto& cont = which == 0 ? c1 : c2;
    std::vector<Token> whole = prefix;
    whole.insert(whole.end(), cont.begin(), cont.end());
    Session alone(*model_);
    const std::vector<float> la = alone.decode(whole, true);
    for (size_t i = 0; i < cont.size(); ++i)
      EXPECT_LT(max_abs_diff(row(lm, (which == 0 ? 0 : c1.size()) + i), row(la, prefix.size() + i)), kTol)
          << "continuation " << which << " token " << i;
  }
}

TEST_F(SessionTest, ShiftedPositionsAreReRoped) {
  const auto a = encode("Once upon a time there was a little girl");
  constexpr Pos kShift = 7;
  // Decoded at 0.. then moved to kShift..: the next token sees what it sees after a decode at kShift...
  Session shifted(*model_);
  shifted.decode(a);
  shifted.cache().seq_shift(0, -1, -1, kShift);
  EXPECT_TRUE(shifted.cache().needs_k_shift());
  EXPECT_EQ(shifted.n_past(), static_cast<int64_t>(a.size()) + kShift);
  const std::vector<float> ls = shifted.decode(std::vector<Token>{300});
  EXPECT_FALSE(shifted.cache().needs_k_shift());

  Session direct(*model_);
  Batch batch;
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], kShift + static_cast<Pos>(i), 0, false);
  direct.decode(batch);
  const std::vector<float> ld = direct.decode(std::vector<Token>{300});
  EXPECT_LT(max_abs_diff(ls, ld), 1e-2);  // K rounded to F16 twice instead of once
  // Without the re-rope the logits differ by far more than that.
  Session unroped(*model_);
  unroped.decode(a);
  Batch next;
  next.add(300, static_cast<Pos>(a.size()) + kShift, 0, true);
  EXPECT_GT(max_abs_diff(unroped.decode(next), ld), 0.1);
}

// The mark of a graph attending to n_kv cells in its shapes: the view of the cache's K that
// FLASH_ATTN_EXT reads.
std::string attends(const Model& m, int64_t n_kv) {
  const Hparams& h = m.hparams();
  return fmt::format("VIEW[{},{},{},1]", h.head_dim(), n_kv, h.n_head_kv);
}

TEST_F(SessionTest, GenerationGraphsKeepOneShape) {
  for (bool fa : {true, false}) {
    SCOPED_TRACE(fa ? "online softmax" : "the CPU's choice");
    SessionOptions so;
    so.n_ctx = 512;
    so.kv_pad = 256;
    so.flash_attn = fa;
    Session s(*model_, so);
    s.decode(encode("Once upon a time"));
    s.decode(std::vector<Token>{300});
    const std::string first = s.last_graph_shapes();
    EXPECT_NE(first.find("FLASH_ATTN_EXT["), std::string::npos) << first;  // either way one node
    EXPECT_EQ(first.find("SOFT_MAX["), std::string::npos) << first;
    EXPECT_NE(first.find(attends(*model_, 256)), std::string::npos) << first;  // padded to 256 cells
    const uint64_t built = s.plans_built(), reused = s.plans_reused();
    for (Token t = 301; t < 340; ++t) {
      s.decode(std::vector<Token>{t});
      ASSERT_EQ(s.last_graph_shapes(), first) << "at position " << s.n_past() - 1;
    }
    // ... so the scheduler planned once and reused that plan for every step.
    EXPECT_EQ(s.plans_built(), built);
    EXPECT_EQ(s.plans_reused(), reused + 39);
    // Past 256 cells the graph attends to 512.
    while (s.n_past() < 256) s.decode(std::vector<Token>{300});
    s.decode(std::vector<Token>{300});
    EXPECT_NE(s.last_graph_shapes().find(attends(*model_, 512)), std::string::npos);

    // The default pads to 32 cells: positions 5..31 share one shape, 32 starts the next.
    Session d(*model_, SessionOptions{.n_ctx = 512, .flash_attn = fa});
    d.decode(encode("Once upon a time"));
    d.decode(std::vector<Token>{300});
    const std::string block = d.last_graph_shapes();
    EXPECT_NE(block.find(attends(*model_, 32)), std::string::npos) << block;
    while (d.n_past() < 32) {
      d.decode(std::vector<Token>{301});
      ASSERT_EQ(d.last_graph_shapes(), block) << "at position " << d.n_past() - 1;
    }
    d.decode(std::vector<Token>{302});
    EXPECT_NE(d.last_graph_shapes().find(attends(*model_, 64)), std::string::npos);
  }
}

// The CPU's online-softmax kernel (flash_attn) and its default (the composed ops' kernels) give the
// same logits, in a prompt and in the generation steps after it, on this real file.
TEST_F(SessionTest, FlashAttentionMatchesComposedAttention) {
  Session fused(*model_, SessionOptions{.n_ctx = 256, .flash_attn = true});
  Session composed(*model_, SessionOptions{.n_ctx = 256, .flash_attn = false});
  const std::vector<Token> prompt = encode("Once upon a time, there was a little girl named Lily.");
  // The same attention but for rounding: the composed ops multiply the F16 cache by Q and by the
  // softmax rounded to f16 (MUL_MAT's semantics for F16 weights, as llama.cpp without flash
  // attention), the fused kernel keeps them in f32.
  auto nmse = [](const std::vector<float>& x, const std::vector<float>& y) {
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(y[i]) * y[i];
    }
    return err / norm;
  };
  std::vector<float> a = fused.decode(prompt, /*all_logits=*/true);
  std::vector<float> b = composed.decode(prompt, /*all_logits=*/true);
  ASSERT_EQ(a.size(), b.size());
  std::printf("prompt: NMSE %.3g, max |diff| %.3g\n", nmse(a, b), max_abs_diff(a, b));
  EXPECT_LT(nmse(a, b), 1e-6);
  for (Token t : {300, 301, 302}) {
    a = fused.decode(std::vector<Token>{t});
    b = composed.decode(std::vector<Token>{t});
    std::printf("token %d: NMSE %.3g, max |diff| %.3g\n", t, nmse(a, b), max_abs_diff(a, b));
    EXPECT_LT(nmse(a, b), 1e-6) << "token " << t;
  }
}

TEST_F(SessionTest, BadBatchesAreErrorsAndLeaveTheCacheAlone) {
  SessionOptions so;
  so.n_ctx = 8;
  Session s(*model_, so);
  s.decode(std::vector<Token>{1, 2, 3});
  Batch b;
  b.add(5, 3, 0, true);
  b.positions.push_back(4);  // sizes disagree
  EXPECT_THROW(s.decode(b), Error);
  b.clear();
  b.add(5, -1, 0, true);
  EXPECT_THROW(s.decode(b), Error);
  b.clear();
  b.add(5, 3, -2, true);
  EXPECT_THROW(s.decode(b), Error);
  b.clear();
  EXPECT_THROW(s.decode(b), Error);                   // empty
  for (Pos p = 0; p < 6; ++p) b.add(5, p, 1, false);  // 6 tokens, 5 free cells
  try {
    s.decode(b);
    ADD_FAILURE() << "6 tokens decoded into 5 free cells";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ContextFull) << e.what();
  }
  EXPECT_EQ(s.cache().used(), 3);
  EXPECT_EQ(s.cache().seq_pos_max(1), -1);
  SessionOptions bad;
  bad.kv_pad = 0;
  EXPECT_THROW(Session(*model_, bad), Error);
}

TEST(SessionDevice, ShiftAndSequencesWorkWithTheCacheOnOpenCL0) {
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL0");
  LoadOptions lo;
  lo.n_gpu_layers = 99;
  lo.device = "OpenCL0";
  auto dev_model = Model::load(kModel, lo);
  auto cpu_model = Model::load(kModel);
  const auto vocab = Vocab::from_gguf(*cpu_model->file());
  const auto a = vocab.encode("Once upon a time there was", true);
  const auto b = vocab.encode("The dog ran", true);
  auto run = [&](const Model& m) {
    Session s(m);
    Batch batch;
    for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<Pos>(i), 0, false);
    for (size_t i = 0; i < b.size(); ++i) batch.add(b[i], static_cast<Pos>(i), 1, i + 1 == b.size());
    std::vector<float> out = s.decode(batch);
    s.cache().seq_shift(0, -1, -1, 4);  // re-roped in the cache's own memory
    Batch next;
    next.add(300, static_cast<Pos>(a.size()) + 4, 0, true);
    const std::vector<float>& l = s.decode(next);
    out.insert(out.end(), l.begin(), l.end());
    return out;
  };
  const std::vector<float> on_cpu = run(*cpu_model), on_device = run(*dev_model);
  EXPECT_LT(max_abs_diff(on_cpu, on_device), kTol);
}

TEST_F(SessionTest, ReserveCoversEveryLaterDecodeAndChangesNoLogits) {
  SessionOptions o;
  o.n_ctx = 256;
  o.n_batch = 32;
  Session fresh(*model_, o);
  Session reserved(*model_, o);
  reserved.reserve(4);
  EXPECT_EQ(reserved.cache().used(), 0);
  const size_t bytes = reserved.activation_bytes();
  EXPECT_GT(bytes, 0u);
  // Sequences join and grow the cache to nearly full, in batches of every size up to n_batch and
  // up to 4 logits rows: none needs more memory than the reservation, and the logits are a
  // fresh session's.
  const std::vector<Token> story = encode(
      "Once upon a time there was a little girl named Lily. She loved to play outside in the park. One "
      "day, she saw a big, red ball. She ran to get it and kicked it high in the sky.");
  ASSERT_GE(story.size(), 40u);
  std::vector<Pos> next(4, 0);
  int64_t batch_size = 1;
  while (reserved.cache().used() + 32 <= 250) {
    Batch b;
    for (SeqId s = 0; s < 4 && static_cast<int64_t>(b.size()) < batch_size; ++s) {
      const int64_t n = std::min<int64_t>(batch_size - static_cast<int64_t>(b.size()), 1 + s * 3);
      for (int64_t i = 0; i < n; ++i, ++next[s])
        b.add(story[static_cast<size_t>(next[s]) % story.size()], next[s], s, i + 1 == n);
    }
    const std::vector<float> want = fresh.decode(b);
    const std::vector<float> got = reserved.decode(b);
    ASSERT_EQ(got, want) << "batch of " << b.size();
    EXPECT_EQ(reserved.activation_bytes(), bytes)
        << "after a batch of " << b.size() << " at " << reserved.cache().used() << " cells";
    batch_size = batch_size % 32 + 7;
  }
  EXPECT_GT(fresh.activation_bytes(), 0u);
}

TEST_F(SessionTest, EmbeddingsAreTheHiddenStatesTheOutputMatrixTurnsIntoLogits) {
  // The hidden states of an embeddings session, multiplied by the output matrix here, give the
  // logits a plain session computes.
  Session plain(*model_, SessionOptions{.n_ctx = 64});
  Session hidden(*model_, SessionOptions{.n_ctx = 64, .embeddings = true});
  const std::vector<Token> prompt = encode("Once upon a time, there was a cat.");
  const std::vector<float> logits = plain.decode(prompt, /*all_logits=*/true);
  const std::vector<float> states = hidden.decode(prompt, /*all_logits=*/true);
  const auto n_embd = static_cast<size_t>(model_->hparams().n_embd);
  const auto n = static_cast<size_t>(n_vocab());
  ASSERT_EQ(states.size(), prompt.size() * n_embd);
  ASSERT_EQ(logits.size(), prompt.size() * n);
  const Tensor& w = *model_->output();
  ASSERT_TRUE(w.type == DType::F32 || w.type == DType::F16) << "stories260K's output matrix";
  std::vector<float> weights(n * n_embd);
  if (w.type == DType::F32) {
    tensor_get(w, weights.data(), 0, weights.size() * sizeof(float));
  } else {
    std::vector<uint16_t> halves(weights.size());
    tensor_get(w, halves.data(), 0, halves.size() * sizeof(uint16_t));
    fp16_to_fp32_row(halves.data(), weights.data(), static_cast<int64_t>(halves.size()));
  }
  double worst = 0.0;
  for (size_t t = 0; t < prompt.size(); ++t)
    for (size_t v = 0; v < n; ++v) {
      double sum = 0.0;
      for (size_t j = 0; j < n_embd; ++j)
        sum += static_cast<double>(weights[v * n_embd + j]) * states[t * n_embd + j];
      worst = std::max(worst, std::fabs(sum - logits[t * n + v]));
    }
  EXPECT_LT(worst, 1e-3);
  // A batch asking for no output still fills the cache; hidden states count per wanted token.
  Batch b;
  b.add(300, static_cast<Pos>(prompt.size()), 0, false);
  EXPECT_TRUE(hidden.decode(b).empty());
}
