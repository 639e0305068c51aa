#include "tessera/llm/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tessera/error.h"

using namespace tessera;
using namespace tessera::llm;

TEST(Sampler, GreedyPicksTheFirstLargest) {
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler s(o);
  const std::vector<float> logits{0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplerOptions o;
  o.temperature = 5.0f;
  o.top_k = 1;
  Sampler s(o);
  const std::vector<float> logits{0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = 42;
  Sampler a(o), b(o);
  const std::vector<float> logits{0.0f, 0.5f, 1.0f, 0.2f, -0.3f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // p = softmax([0, ln 3]) = [0.25, 0.75] at temperature 1.
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = 7;
  Sampler s(o);
  const std::vector<float> logits{0.0f, std::log(3.0f)};
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(logits) == 1;
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.02);
}

TEST(Sampler, TopPKeepsTheSmallestPrefix) {
  // probs ~ [0.64, 0.24, 0.09, 0.03]; top_p 0.7 keeps the first two.
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 0.7f;
  o.min_p = 0.0f;
  Sampler s(o);
  const std::vector<float> logits{3.0f, 2.0f, 1.0f, 0.0f};
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(logits)];
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p1/p0 = e^-3 ~ 0.05 < 0.1: only token 0 survives.
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.1f;
  Sampler s(o);
  const std::vector<float> logits{3.0f, 0.0f, -1.0f};
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplerOptions o;
  o.temperature = 0.0f;
  o.repeat_penalty = 2.0f;
  Sampler s(o);
  s.accept(0);
  // Token 0: 3 -> 1.5 < 2 (token 1 wins).
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.0f}), 1);
  Sampler t(o);
  t.accept(1);
  // Token 1: -1 -> -2 < -1.5 (token 0 wins).
  EXPECT_EQ(t.sample(std::vector<float>{-1.5f, -1.0f}), 0);
}

TEST(Sampler, RejectsBadOptions) {
  SamplerOptions o;
  o.top_p = 0.0f;
  EXPECT_THROW(Sampler{o}, Error);
  o = {};
  o.min_p = 2.0f;
  EXPECT_THROW(Sampler{o}, Error);
  o = {};
  o.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{o}, Error);
  Sampler s;
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
}
