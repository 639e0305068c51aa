#pragma once
// Token sampling: logit bias, repetition/presence/frequency penalties, top-k, top-p, min-p,
// temperature, seeded RNG; greedy at temp 0.
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace tessera::llm {

class GrammarMatcher;

struct SamplerOptions {
  float temperature = 0.8f;     // <= 0: greedy (argmax)
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  // The penalties look at the last repeat_last_n tokens the sampler accepted (the prompt's, then
  // its own picks); <= 0: no history, so every penalty is off.
  int repeat_last_n = 64;
  // OpenAI's penalties, in [-2, 2] (0: off; negative ones encourage repeats): the logit of a token
  // seen n times in the history loses frequency_penalty * n + presence_penalty * (n > 0).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // OpenAI's logit_bias: (token id, bias in [-100, 100]) added to the logit before anything else
  // (-100 in effect bans a token, 100 in effect forces it). Any order, each token once; ids past
  // the logits are ignored (the engine refuses ids outside the vocabulary).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Error(InvalidArgument) on options out of range. Keeps logit_bias sorted by token id. With a
  // grammar, its mask comes before everything else (every token it forbids gets -infinity, so
  // neither bias nor penalties bring it back) and each sampled token advances it.
  explicit Sampler(const SamplerOptions& options = {});
  Sampler(const SamplerOptions& options, std::unique_ptr<GrammarMatcher> grammar);
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  // Picks the next token from logits ([n_vocab]); remembers it for the penalties and advances the
  // grammar. Error(InvalidArgument) when the grammar allows no token.
  int32_t sample(std::span<const float> logits);
  // The logits after the grammar mask, the bias and the penalties: what temperature, top-k, top-p
  // and min-p see.
  std::vector<float> adjusted(std::span<const float> logits);
  // Adds tokens (e.g. the prompt) to the penalties' history (the grammar does not see them).
  void accept(int32_t token);
  const SamplerOptions& options() const noexcept { return options_; }
  GrammarMatcher* grammar() const noexcept { return grammar_.get(); }

 private:
  SamplerOptions options_;
  std::unique_ptr<GrammarMatcher> grammar_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
};

}  // namespace tessera::llm
