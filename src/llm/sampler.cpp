#include "tessera/llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/check.h"
#include "tessera/llm/grammar_matcher.h"

namespace tessera::llm {

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

Sampler::Sampler(const SamplerOptions& options) : Sampler(options, nullptr) {}

Sampler::Sampler(const SamplerOptions& options, std::unique_ptr<GrammarMatcher> grammar)
    : options_(options), grammar_(std::move(grammar)), rng_(options.seed) {
  if (!(options.temperature >= 0.0f) && !(options.temperature < 0.0f))
    raise(ErrorCode::InvalidArgument, "temperature must be a number");
  if (options.top_p <= 0.0f || std::isnan(options.top_p))
    raise(ErrorCode::InvalidArgument, "top-p must be in (0, 1], got {}", options.top_p);
  if (options.min_p < 0.0f || options.min_p > 1.0f || std::isnan(options.min_p))
    raise(ErrorCode::InvalidArgument, "min-p must be in [0, 1], got {}", options.min_p);
  if (options.repeat_penalty <= 0.0f || std::isnan(options.repeat_penalty))
    raise(ErrorCode::InvalidArgument, "repeat penalty must be > 0, got {}", options.repeat_penalty);
  // OpenAI's ranges; the negations also refuse NaN.
  if (!(options.presence_penalty >= -2.0f && options.presence_penalty <= 2.0f))
    raise(ErrorCode::InvalidArgument, "presence penalty must be in [-2, 2], got {}",
          options.presence_penalty);
  if (!(options.frequency_penalty >= -2.0f && options.frequency_penalty <= 2.0f))
    raise(ErrorCode::InvalidArgument, "frequency penalty must be in [-2, 2], got {}",
          options.frequency_penalty);
  auto& bias = options_.logit_bias;
  std::sort(bias.begin(), bias.end());
  for (size_t i = 0; i < bias.size(); ++i) {
    const auto [id, b] = bias[i];
    if (id < 0) raise(ErrorCode::InvalidArgument, "logit bias for token id {}: ids are not negative", id);
    if (!(b >= -100.0f && b <= 100.0f))
      raise(ErrorCode::InvalidArgument, "logit bias for token {} must be in [-100, 100], got {}", id, b);
    if (i > 0 && bias[i - 1].first == id)
      raise(ErrorCode::InvalidArgument, "logit bias names token {} more than once", id);
  }
}

void Sampler::accept(int32_t token) {
  history_.push_back(token);
  while (static_cast<int>(history_.size()) > std::max(0, options_.repeat_last_n)) history_.pop_front();
}

std::vector<float> Sampler::adjusted(std::span<const float> logits) {
  std::vector<float> out(logits.begin(), logits.end());
  if (grammar_) grammar_->apply(out);
  for (const auto& [id, b] : options_.logit_bias)
    if (static_cast<size_t>(id) < out.size()) out[static_cast<size_t>(id)] += b;

  const bool repeat = options_.repeat_penalty != 1.0f;
  const bool openai = options_.presence_penalty != 0.0f || options_.frequency_penalty != 0.0f;
  if (!repeat && !openai) return out;
  // Each distinct token of the history with its count.
  std::vector<int32_t> seen(history_.begin(), history_.end());
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size();) {
    const int32_t id = seen[i];
    size_t n = 1;
    while (i + n < seen.size() && seen[i + n] == id) ++n;
    i += n;
    if (id < 0 || static_cast<size_t>(id) >= out.size()) continue;
    float& l = out[static_cast<size_t>(id)];
    // Repetition penalty (as llama.cpp applies it): positive logits divided, negative multiplied.
    if (repeat) l = l > 0.0f ? l / options_.repeat_penalty : l * options_.repeat_penalty;
    if (openai) l -= options_.frequency_penalty * static_cast<float>(n) + options_.presence_penalty;
  }
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) raise(ErrorCode::InvalidArgument, "sample: empty logits");
  struct Candidate {
    int32_t id;
    float logit;
  };
  const std::vector<float> adj = adjusted(logits);
  int32_t chosen;
  if (options_.temperature <= 0.0f) {
    // Greedy: the first of the largest logits (no candidate list: a server samples a row per
    // sequence every step, on the thread the step's compute waits for).
    chosen = static_cast<int32_t>(std::max_element(adj.begin(), adj.end()) - adj.begin());
  } else {
    std::vector<Candidate> cands(adj.size());
    for (size_t i = 0; i < adj.size(); ++i) cands[i] = {static_cast<int32_t>(i), adj[i]};
    auto by_logit = [](const Candidate& a, const Candidate& b) {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    // Top-k.
    size_t k = cands.size();
    if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < k)
      k = static_cast<size_t>(options_.top_k);
    std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(k), cands.end(), by_logit);
    cands.resize(k);
    // Probabilities of the remaining candidates (sorted descending).
    auto softmax = [&](float temp) {
      std::vector<double> p(cands.size());
      const double max = cands.front().logit;
      double sum = 0.0;
      for (size_t i = 0; i < cands.size(); ++i) sum += p[i] = std::exp((cands[i].logit - max) / temp);
      for (double& v : p) v /= sum;
      return p;
    };
    // Top-p: the smallest prefix whose probability reaches top_p.
    if (options_.top_p < 1.0f) {
      const auto p = softmax(1.0f);
      double cum = 0.0;
      size_t keep = cands.size();
      for (size_t i = 0; i < p.size(); ++i) {
        cum += p[i];
        if (cum >= options_.top_p) {
          keep = i + 1;
          break;
        }
      }
      cands.resize(keep);
    }
    // Min-p: drop candidates below min_p times the most likely one's probability.
    if (options_.min_p > 0.0f) {
      const auto p = softmax(1.0f);
      size_t keep = 1;
      while (keep < p.size() && p[keep] >= options_.min_p * p[0]) ++keep;
      cands.resize(keep);
    }
    const auto p = softmax(options_.temperature);
    std::discrete_distribution<size_t> dist(p.begin(), p.end());
    chosen = cands[dist(rng_)].id;
  }
  if (grammar_) grammar_->accept(chosen);
  accept(chosen);
  return chosen;
}

}  // namespace tessera::llm
