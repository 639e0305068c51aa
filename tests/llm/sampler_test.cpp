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

// Every filter off, so that temperature alone shapes the distribution.
SamplerOptions plain(float temperature, uint64_t seed = 0) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = seed;
  return o;
}

TEST(Sampler, LogitBiasFlipsTheArgmax) {
  const std::vector<float> logits{1.0f, 2.0f, 0.5f};
  SamplerOptions o = plain(0.0f);
  EXPECT_EQ(Sampler(o).sample(logits), 1);
  o.logit_bias = {{0, 1.5f}};  // token 0: 1 + 1.5 = 2.5 > 2
  EXPECT_EQ(Sampler(o).sample(logits), 0);
  o.logit_bias = {{0, 0.5f}};  // 1.5 < 2: unchanged
  EXPECT_EQ(Sampler(o).sample(logits), 1);
  o.logit_bias = {{2, 0.5f}, {1, -1.5f}};  // token 1: 0.5, token 2: 1.0 ties token 0; the first wins
  EXPECT_EQ(Sampler(o).sample(logits), 0);
  o.logit_bias = {{2, 0.6f}, {1, -1.5f}};  // token 2: 1.1
  EXPECT_EQ(Sampler(o).sample(logits), 2);
  EXPECT_EQ(Sampler(o).options().logit_bias, (std::vector<std::pair<int32_t, float>>{{1, -1.5f}, {2, 0.6f}}));
}

TEST(Sampler, AdjustedAddsTheBiasAndIgnoresIdsPastTheLogits) {
  SamplerOptions o = plain(1.0f);
  o.logit_bias = {{1, -100.0f}, {3, 100.0f}, {7, 5.0f}};
  const std::vector<float> out = Sampler(o).adjusted(std::vector<float>{0.25f, 1.0f, -2.0f, 3.0f});
  EXPECT_EQ(out, (std::vector<float>{0.25f, -99.0f, -2.0f, 103.0f}));
}

TEST(Sampler, LogitBiasComesBeforeTheRepetitionPenalty) {
  // Token 0 was seen. Bias first: (3 - 4) * 2 = -2 beats token 1's -2.2. Penalty first would give
  // 3 / 2 - 4 = -2.5, and token 1 would win.
  SamplerOptions o = plain(0.0f);
  o.repeat_penalty = 2.0f;
  o.logit_bias = {{0, -4.0f}};
  Sampler s(o);
  s.accept(0);
  EXPECT_EQ(s.adjusted(std::vector<float>{3.0f, -2.2f}), (std::vector<float>{-2.0f, -2.2f}));
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, -2.2f}), 0);
}

TEST(Sampler, MinusOneHundredBansATokenAtTemperatureOne) {
  // Token 2 alone is biased: p = e^-100 / (3 + e^-100) ~ 1e-44, never drawn. Without the bias
  // each token has 1/4, so the count is near 2000 of 8000.
  const std::vector<float> logits{0.0f, 0.0f, 0.0f, 0.0f};
  int banned = 0, unbanned = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplerOptions o = plain(1.0f, seed);
    Sampler unbiased(o);
    o.logit_bias = {{2, -100.0f}};
    Sampler s(o);
    for (int i = 0; i < 40; ++i) {
      banned += s.sample(logits) == 2;
      unbanned += unbiased.sample(logits) == 2;
    }
  }
  EXPECT_EQ(banned, 0);
  EXPECT_NEAR(unbanned, 2000, 200);
}

TEST(Sampler, PlusOneHundredForcesATokenAtTemperatureOne) {
  // Token 1 at 0 + 100 against 5 and 0: p(others) ~ e^-95, never drawn.
  const std::vector<float> logits{5.0f, 0.0f, 0.0f};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplerOptions o = plain(1.0f, seed);
    o.logit_bias = {{1, 100.0f}};
    Sampler s(o);
    for (int i = 0; i < 10; ++i) ASSERT_EQ(s.sample(logits), 1) << "seed " << seed;
  }
}

TEST(Sampler, FrequencyPenaltyLowersByItTimesTheCount) {
  SamplerOptions o = plain(0.0f);
  o.frequency_penalty = 0.5f;
  Sampler s(o);
  for (int32_t t : {0, 2, 0, 0}) s.accept(t);
  // Token 0 seen 3 times: 5 - 1.5; token 2 once: 1 - 0.5; token 1 never: unchanged.
  EXPECT_EQ(s.adjusted(std::vector<float>{5.0f, 3.25f, 1.0f}), (std::vector<float>{3.5f, 3.25f, 0.5f}));
  // Greedy follows: 3.5 > 3.25 picks token 0 (seen a fourth time), then 5 - 2 = 3 < 3.25.
  EXPECT_EQ(s.sample(std::vector<float>{5.0f, 3.25f, 1.0f}), 0);
  EXPECT_EQ(s.sample(std::vector<float>{5.0f, 3.25f, 1.0f}), 1);
}

TEST(Sampler, PresencePenaltyCountsATokenOnce) {
  SamplerOptions o = plain(0.0f);
  o.presence_penalty = 0.75f;
  Sampler s(o);
  for (int32_t t : {1, 1, 1, 3}) s.accept(t);
  EXPECT_EQ(s.adjusted(std::vector<float>{0.0f, 2.0f, -1.0f, -1.0f}),
            (std::vector<float>{0.0f, 1.25f, -1.0f, -1.75f}));
}

TEST(Sampler, PenaltiesAddUpAndNegativeOnesRaise) {
  SamplerOptions o = plain(0.0f);
  o.frequency_penalty = 0.25f;
  o.presence_penalty = 1.0f;
  Sampler s(o);
  for (int32_t t : {0, 0}) s.accept(t);
  EXPECT_EQ(s.adjusted(std::vector<float>{4.0f, 0.0f}), (std::vector<float>{2.5f, 0.0f}));  // 4 - 0.5 - 1
  o.frequency_penalty = -2.0f;
  o.presence_penalty = -0.5f;
  Sampler r(o);
  r.accept(1);
  EXPECT_EQ(r.adjusted(std::vector<float>{4.0f, 0.0f}), (std::vector<float>{4.0f, 2.5f}));  // 0 + 2 + 0.5
}

TEST(Sampler, PenaltiesSeeOnlyTheLastRepeatLastNTokens) {
  SamplerOptions o = plain(0.0f);
  o.frequency_penalty = 1.0f;
  o.repeat_last_n = 3;
  Sampler s(o);
  for (int32_t t : {0, 0, 0, 1, 1}) s.accept(t);  // the window holds 0, 1, 1
  EXPECT_EQ(s.adjusted(std::vector<float>{0.0f, 0.0f, 0.0f}), (std::vector<float>{-1.0f, -2.0f, 0.0f}));
  o.repeat_last_n = 0;  // no history: no penalty
  Sampler none(o);
  for (int32_t t : {0, 1}) none.accept(t);
  EXPECT_EQ(none.adjusted(std::vector<float>{0.0f, 0.0f}), (std::vector<float>{0.0f, 0.0f}));
}

TEST(Sampler, ZeroPenaltiesAndNoBiasChangeNothing) {
  // The same seed with the new options at their defaults spelled out draws the same tokens, and
  // adjusted() is the identity with a history present.
  SamplerOptions o = plain(1.0f, 3);
  Sampler a(o);
  o.presence_penalty = 0.0f;
  o.frequency_penalty = 0.0f;
  o.logit_bias = {};
  Sampler b(o);
  const std::vector<float> logits{0.3f, -0.2f, 1.1f, 0.0f, 0.7f};
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.sample(logits), b.sample(logits));
  EXPECT_EQ(b.adjusted(logits), logits);
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
  for (float bad : {2.5f, -2.01f, NAN}) {
    o = {};
    o.presence_penalty = bad;
    EXPECT_THROW(Sampler{o}, Error);
    o = {};
    o.frequency_penalty = bad;
    EXPECT_THROW(Sampler{o}, Error);
  }
  for (float bad : {100.5f, -101.0f, NAN, INFINITY}) {
    o = {};
    o.logit_bias = {{3, bad}};
    EXPECT_THROW(Sampler{o}, Error);
  }
  o = {};
  o.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler{o}, Error);
  o.logit_bias = {{4, 1.0f}, {2, 0.0f}, {4, -1.0f}};  // token 4 twice
  EXPECT_THROW(Sampler{o}, Error);
  o.logit_bias = {{4, 100.0f}, {2, -100.0f}};  // the ends of the range are allowed
  EXPECT_NO_THROW(Sampler{o});
  Sampler s;
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
}
