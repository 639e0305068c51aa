#pragma once
// Token sampling: repetition penalty, top-k, top-p, min-p, temperature, seeded RNG; greedy at temp 0.
#include <cstdint>
#include <deque>
#include <random>
#include <span>

namespace tessera::llm {

struct SamplerOptions {
  float temperature = 0.8f;     // <= 0: greedy (argmax)
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options = {});
  // Picks the next token from logits ([n_vocab]); remembers it for the repetition penalty.
  int32_t sample(std::span<const float> logits);
  // Adds tokens (e.g. the prompt) to the repetition-penalty history.
  void accept(int32_t token);
  const SamplerOptions& options() const noexcept { return options_; }

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
};

}  // namespace tessera::llm
