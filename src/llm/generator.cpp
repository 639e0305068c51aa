// A sequence's generation loop (tessera/llm/generator.h).
#include "tessera/llm/generator.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "tessera/llm/grammar_matcher.h"
#include "tessera/llm/stop_text.h"

namespace tessera::llm {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void check(const GenerateOptions& options) {
  if (options.max_tokens < 0)
    raise(ErrorCode::InvalidArgument, "max_tokens is negative ({})", options.max_tokens);
}

}  // namespace

Generator::Generator(Session& session, const Vocab& vocab, SeqId seq)
    : session_(session), vocab_(vocab), seq_(seq) {
  if (seq < 0) raise(ErrorCode::InvalidArgument, "sequence id {} is negative", seq);
}

void Generator::decode(std::span<const Token> tokens) {
  Batch b;
  const auto pos = static_cast<Pos>(held_.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], pos + static_cast<Pos>(i), seq_, i + 1 == tokens.size());
  logits_ = session_.decode(b);
  held_.insert(held_.end(), tokens.begin(), tokens.end());
}

size_t Generator::prefill(std::span<const Token> prompt, Sampler& sampler) {
  if (prompt.empty()) raise(ErrorCode::InvalidArgument, "the prompt is empty");
  KvCache& cache = session_.cache();
  // What the sequence holds is only known while it is exactly what this generator left there.
  if (static_cast<size_t>(cache.seq_pos_max(seq_) + 1) != held_.size() || cache.seq_pos_min(seq_) > 0)
    held_.clear();
  size_t keep = 0;
  while (keep < held_.size() && keep < prompt.size() && held_[keep] == prompt[keep]) ++keep;
  keep = std::min(keep, prompt.size() - 1);
  cache.seq_remove(seq_, static_cast<Pos>(keep), -1);
  held_.resize(keep);
  const int64_t free_cells = cache.size() - cache.used();
  if (static_cast<int64_t>(prompt.size() - keep) > free_cells) {
    cache.seq_clear(seq_);
    held_.clear();
    raise(ErrorCode::ContextFull, "the prompt has {} tokens to evaluate and the context {} free cells of {}",
          prompt.size() - keep, free_cells, cache.size());
  }
  for (Token t : prompt) sampler.accept(t);
  decode(prompt.subspan(keep));
  return keep;
}

GenerateResult Generator::generate(std::span<const Token> prompt, Sampler& sampler,
                                   const GenerateOptions& options) {
  check(options);
  const auto t_prompt = std::chrono::steady_clock::now();
  const size_t cached = prefill(prompt, sampler);
  const double prompt_ms = ms_since(t_prompt);
  GenerateResult r = complete(sampler, options);
  r.prompt_tokens = prompt.size();
  r.cached_tokens = cached;
  r.prompt_ms = prompt_ms;
  return r;
}

GenerateResult Generator::complete(Sampler& sampler, const GenerateOptions& options) {
  check(options);
  if (logits_.empty()) raise(ErrorCode::InvalidArgument, "complete: nothing was evaluated (prefill first)");
  GenerationRules rules(vocab_, options.stop, options.stop_at_eos, options.max_tokens);
  GenerateResult r;
  const auto t_gen = std::chrono::steady_clock::now();
  KvCache& cache = session_.cache();
  bool stopped_by_reader = false;
  auto hand_out = [&](const std::string& piece) {
    if (!piece.empty() && options.on_text && !options.on_text(piece)) stopped_by_reader = true;
  };
  r.end = GenerateEnd::Length;
  while (options.max_tokens > 0) {
    if (options.cancel != nullptr && options.cancel->load()) {
      r.end = GenerateEnd::Cancelled;
      break;
    }
    const Token next = sampler.sample(logits_);
    GenerationRules::Step step = rules.accept(next, sampler);
    if (step.joined && options.on_token) options.on_token(next);
    hand_out(step.text);
    if (step.end) {
      r.end = *step.end;
      break;
    }
    if (stopped_by_reader) {
      r.end = GenerateEnd::Cancelled;
      break;
    }
    if (cache.used() >= cache.size()) {
      r.end = GenerateEnd::ContextFull;
      break;
    }
    decode(std::span<const Token>(&next, 1));
  }
  r.generated = rules.generated();
  if (r.end != GenerateEnd::Cancelled) hand_out(rules.finish());
  r.generate_ms = ms_since(t_gen);
  return r;
}

GenerationRules::GenerationRules(const Vocab& vocab, std::vector<std::string> stop, bool stop_at_eos,
                                 int max_tokens)
    : vocab_(vocab), text_(vocab, std::move(stop)), stop_at_eos_(stop_at_eos) {
  if (max_tokens < 0) raise(ErrorCode::InvalidArgument, "max_tokens is negative ({})", max_tokens);
  max_tokens_ = static_cast<size_t>(max_tokens);
}

GenerationRules::Step GenerationRules::accept(Token token, const Sampler& sampler) {
  Step step;
  if (stop_at_eos_ && vocab_.is_end_of_generation(token)) {
    step.end = GenerateEnd::EndOfGeneration;
    return step;
  }
  step.joined = true;
  ++generated_;
  step.text = text_.push(token);
  if (text_.stopped()) {
    step.end = GenerateEnd::Stop;
  } else if (sampler.grammar() != nullptr && sampler.grammar()->only_end_of_generation()) {
    step.end = GenerateEnd::EndOfGeneration;  // the grammar's text is whole: nothing else may follow
  } else if (generated_ >= max_tokens_) {
    step.end = GenerateEnd::Length;
  }
  return step;
}

}  // namespace tessera::llm
