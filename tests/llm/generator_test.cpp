// Generator on stories260K: its text is the hand-written loop's (Session, Sampler,
// TokenStreamer), a longer prompt reuses the prefix with the logits of a fresh evaluation, and
// each end (stop string, reader, cancel, full context) ends it as documented.
#include "tessera/llm/generator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/stories_model.h"
#include "tessera/error.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

class GeneratorTest : public testing_support::StoriesModelTest {
 protected:
  static SessionOptions options(int64_t n_ctx = 256) {
    return SessionOptions{.n_ctx = n_ctx, .n_threads = 1};
  }
  static Sampler greedy() {
    SamplerOptions o;
    o.temperature = 0.0f;
    return Sampler(o);
  }
};

GenerateOptions collecting(std::string& text, int max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.on_text = [&text](std::string_view piece) {
    text += piece;
    return true;
  };
  return o;
}

}  // namespace

TEST_F(GeneratorTest, GreedyTextIsTheHandWrittenLoops) {
  const std::vector<Token> prompt = vocab_->encode("Once upon a time", true);
  Session s(*model_, options());
  Generator g(s, *vocab_);
  Sampler sampler = greedy();
  std::string text;
  const GenerateResult r = g.generate(prompt, sampler, collecting(text, 48));
  EXPECT_EQ(text, greedy_reference("Once upon a time", 48));
  EXPECT_EQ(r.prompt_tokens, prompt.size());
  EXPECT_EQ(r.cached_tokens, 0u);
  EXPECT_GT(r.generated, 0u);
  // The sequence holds the prompt and every generated token but the last (sampled, not evaluated).
  EXPECT_EQ(g.held().size(), prompt.size() + r.generated - (r.end == GenerateEnd::Length ? 1 : 0));
  EXPECT_EQ(static_cast<size_t>(s.cache().seq_pos_max(0) + 1), g.held().size());
}

TEST_F(GeneratorTest, ALongerPromptReusesThePrefixWithTheSameLogits) {
  const std::vector<Token> first = vocab_->encode("Once upon a time, there was a dog", true);
  std::vector<Token> second = first;
  for (Token t : vocab_->encode(" who liked to run", false)) second.push_back(t);
  Session s(*model_, options());
  Generator g(s, *vocab_);
  Sampler sampler = greedy();
  EXPECT_EQ(g.prefill(first, sampler), 0u);
  EXPECT_EQ(g.prefill(second, sampler), first.size());
  Session fresh(*model_, options());
  const std::vector<float> expected = fresh.decode(second);
  ASSERT_EQ(g.logits().size(), expected.size());
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::fabs(double(g.logits()[i]) - expected[i]));
  EXPECT_LT(worst, 2e-3);  // F16 K/V evaluated in two batches instead of one
  // The same prompt again: everything but its last token is reused.
  EXPECT_EQ(g.prefill(second, sampler), second.size() - 1);
  // A change made elsewhere: nothing is reused.
  s.cache().seq_remove(0, 3, -1);
  EXPECT_EQ(g.prefill(second, sampler), 0u);
  // Another sequence is left alone.
  Generator other(s, *vocab_, 1);
  other.prefill(first, sampler);
  EXPECT_EQ(s.cache().seq_pos_max(0) + 1, static_cast<Pos>(second.size()));
  EXPECT_EQ(s.cache().seq_pos_max(1) + 1, static_cast<Pos>(first.size()));
}

TEST_F(GeneratorTest, EachEndEndsItAsDocumented) {
  const std::vector<Token> prompt = vocab_->encode("Once upon a time", true);
  const std::string full = greedy_reference("Once upon a time", 48);
  ASSERT_GT(full.size(), 20u);
  Session s(*model_, options());
  Generator g(s, *vocab_);
  {  // a stop string from the middle of the text: the text ends just before it
    std::string text;
    GenerateOptions o = collecting(text, 48);
    o.stop = {full.substr(full.size() / 2, 4)};
    Sampler sampler = greedy();
    EXPECT_EQ(g.generate(prompt, sampler, o).end, GenerateEnd::Stop);
    EXPECT_EQ(text, full.substr(0, full.find(o.stop[0])));
  }
  {  // the reader says stop after its first piece
    int pieces = 0;
    GenerateOptions o;
    o.on_text = [&pieces](std::string_view) { return ++pieces < 1; };
    Sampler sampler = greedy();
    EXPECT_EQ(g.generate(prompt, sampler, o).end, GenerateEnd::Cancelled);
    EXPECT_EQ(pieces, 1);
  }
  {  // cancelled before the first token
    std::atomic<bool> cancel{true};
    GenerateOptions o;
    o.cancel = &cancel;
    Sampler sampler = greedy();
    const GenerateResult r = g.generate(prompt, sampler, o);
    EXPECT_EQ(r.end, GenerateEnd::Cancelled);
    EXPECT_EQ(r.generated, 0u);
  }
  {  // 16 cells: the prompt and a few tokens fill them
    Session small(*model_, options(16));
    Generator gs(small, *vocab_);
    Sampler sampler = greedy();
    std::string text;
    const GenerateResult r = gs.generate(prompt, sampler, collecting(text, 48));
    EXPECT_EQ(r.end, GenerateEnd::ContextFull);
    EXPECT_EQ(r.generated, 16 - prompt.size() + 1);
    std::vector<Token> long_prompt(20, prompt.back());
    long_prompt[0] = vocab_->bos();
    try {
      gs.prefill(long_prompt, sampler);
      ADD_FAILURE() << "20 tokens in 16 cells";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::ContextFull) << e.what();
    }
    EXPECT_EQ(small.cache().used(), 0);
    EXPECT_TRUE(gs.held().empty());
  }
  Sampler sampler = greedy();
  EXPECT_THROW(g.prefill({}, sampler), Error);
}
