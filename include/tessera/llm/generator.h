#pragma once
// One sequence of a Session generating text: a prompt's prefix that the sequence already holds is
// reused and the rest evaluated, then tokens are sampled until an end-of-generation token, a stop
// string, the token limit, a full context or a cancel. `tessera run`, `run -cnv` and the C API
// generate through it. (The server's Engine steps many sequences in one batch; each of its slots
// applies the same GenerationRules.)
#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/llm/batch.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/stop_text.h"
#include "tessera/llm/vocab.h"

namespace tessera::llm {

struct GenerateOptions {
  int max_tokens = 128;
  std::vector<std::string> stop;  // never part of the text; empty strings are an Error
  bool stop_at_eos = true;        // end at an end-of-generation token (never part of the text)
  // Settled text as it comes (whole UTF-8 characters, a possible stop string held back); return
  // false to stop. May be empty.
  std::function<bool(std::string_view)> on_text;
  // Each sampled token that joins the text (not an ending end-of-generation token), before its
  // text is handed out. May be empty.
  std::function<void(Token)> on_token;
  const std::atomic<bool>* cancel = nullptr;  // checked before each token; set: the generation ends
};

enum class GenerateEnd { Length, EndOfGeneration, Stop, Cancelled, ContextFull };

struct GenerateResult {
  GenerateEnd end = GenerateEnd::Length;
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;  // of the prompt, reused from what the sequence held
  size_t generated = 0;      // tokens sampled (an end-of-generation token not counted)
  double prompt_ms = 0.0, generate_ms = 0.0;
};

// The rules every generation applies to each sampled token, whoever decodes it: the Generator
// here and every slot of the Engine (which decodes many sequences in one batch). An
// end-of-generation token ends it (and is not text), the text settles through StopText (a stop
// string ends it), a grammar that allows only the end ends it, and so does the token limit.
class GenerationRules {
 public:
  struct Step {
    bool joined = false;  // the token is part of the generation (not an ending end-of-generation token)
    std::string text;     // the text it settles (whole UTF-8 characters, stop strings held back)
    std::optional<GenerateEnd> end;  // the generation ends with this token
  };
  // Error(InvalidArgument) on an empty stop string or a negative max_tokens.
  GenerationRules(const Vocab& vocab, std::vector<std::string> stop, bool stop_at_eos, int max_tokens);
  // A token `sampler` just sampled (its grammar, if any, has accepted it). An Error of the grammar
  // propagates.
  Step accept(Token token, const Sampler& sampler);
  // The text still held at the end (an incomplete UTF-8 tail, a possible stop's beginning);
  // nothing after a stop string.
  std::string finish() { return text_.finish(); }
  size_t generated() const noexcept { return generated_; }

 private:
  const Vocab& vocab_;
  StopText text_;
  bool stop_at_eos_;
  size_t max_tokens_;
  size_t generated_ = 0;
};

class Generator {
 public:
  // The session and vocabulary must outlive it. The sequence is taken to hold nothing of use
  // until this generator evaluates into it (or adopt() says what it holds).
  Generator(Session& session, const Vocab& vocab, SeqId seq = 0);

  // Evaluates `prompt` after the longest prefix of it the sequence holds (at least the last token
  // is evaluated, for its logits; the cells past the prefix are dropped) and feeds the prompt to
  // the sampler's penalty history. Error(InvalidArgument) on an empty prompt, Error(ContextFull)
  // when the rest needs more cells than are free (the sequence is then cleared). Returns the tokens reused.
  size_t prefill(std::span<const Token> prompt, Sampler& sampler);
  // Samples the completion of what prefill evaluated, until an end (prompt counts and times are
  // left 0).
  GenerateResult complete(Sampler& sampler, const GenerateOptions& options);
  // prefill, then complete.
  GenerateResult generate(std::span<const Token> prompt, Sampler& sampler, const GenerateOptions& options);

  // The tokens the sequence holds, positions 0.. (the prompt and the generated tokens evaluated).
  const std::vector<Token>& held() const noexcept { return held_; }
  // Says the sequence holds `tokens` (e.g. read from a saved session), or nothing of use (it was
  // changed elsewhere): the next prompt is compared with that.
  void adopt(std::vector<Token> tokens) { held_ = std::move(tokens); }
  void forget() noexcept { held_.clear(); }
  // The last evaluated token's logits ([n_vocab]).
  std::span<const float> logits() const noexcept { return logits_; }

 private:
  void decode(std::span<const Token> tokens);

  Session& session_;
  const Vocab& vocab_;
  SeqId seq_;
  std::vector<Token> held_;
  std::vector<float> logits_;
};

}  // namespace tessera::llm
