#pragma once
// Perplexity of a model over a text, and the KL divergence of its next-token distributions from a
// base model's, computed as llama.cpp's llama-perplexity does, so that the figures compare:
//   - the text is tokenized whole, with BOS when the vocabulary adds one (perplexity_tokens);
//   - it is cut into chunks of n_ctx tokens (no overlap; the tokens after the last whole chunk are
//     not read), each evaluated from an empty KV cache with its first token replaced by BOS when the
//     vocabulary adds BOS;
//   - in each chunk the logits at positions j = n_ctx/2 ... n_ctx-2 score token j+1 (their negative
//     log-softmax), n_ctx - n_ctx/2 - 1 tokens per chunk, so every scored token has at least n_ctx/2
//     tokens of context;
//   - PPL = exp(mean NLL), and its error PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
//
// The KL divergence needs the base model's log-probabilities of every scored position: perplexity()
// writes them (options.save_base) in llama.cpp's .kld format (llama-perplexity
// --kl-divergence-base FILE), so base files are shared with llama.cpp; kl_divergence() reads one,
// evaluates the same chunks of the same tokens with another model and compares. The format (native
// byte order, little-endian on every supported host):
//   "_logits_" (8 bytes), int32 n_ctx, int32 n_vocab, int32 n_chunks,
//   int32 tokens[n_chunks * n_ctx] (the text's tokens as tokenized, the first of each chunk not
//   replaced by BOS), then per chunk, per scored position (n_ctx - n_ctx/2 - 1 of them), one record of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 uint16 words: float scale, float min_log_prob (4 words), then
//   per token q = round((logit - min_logit) / scale) where min_logit = max(min logit, max logit - 16)
//   and scale = (max logit - min_logit) / 65535 (0 for logits at or below min_logit; all 0 when
//   scale is 0), then 0 to pad to an even count. A token's base log-probability is
//   scale * q + min_log_prob.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

class Session;

struct PerplexityOptions {
  // Tokens per chunk (llama-perplexity's -c), at least 3. kl_divergence: 0 takes the base file's;
  // any other value must be the base file's.
  int64_t n_ctx = 512;
  int64_t n_batch = 2048;   // tokens per decode within a chunk (at most n_ctx are used); at least 1
  int64_t max_chunks = -1;  // evaluate at most this many chunks; < 0: every whole chunk
  // perplexity(): when set, also write the base log-probabilities of every scored position there,
  // in llama.cpp's .kld format (to a temporary file renamed at the end).
  std::string save_base;
};

// The running estimate after each chunk (perplexity's callback).
struct PerplexityChunk {
  int64_t chunk = 0;  // 1-based
  int64_t n_chunks = 0;
  double ppl = 0.0;      // over every token scored so far
  double seconds = 0.0;  // this chunk's evaluation, wall clock
};

struct PerplexityResult {
  double ppl = 0.0;
  double ppl_error = 0.0;  // llama.cpp's "+/-" (0 when the NLL's variance is not positive)
  double mean_nll = 0.0;   // ln(ppl)
  int64_t n_chunks = 0;
  int64_t n_scored = 0;  // tokens scored: n_chunks * (n_ctx - n_ctx/2 - 1)
};

// A value and its standard error, as llama-perplexity prints "value ± error".
struct Estimate {
  double value = 0.0;
  double error = 0.0;
};

// The running sums of a perplexity estimate (shared with llama-imatrix's running perplexity):
// each scored token's negative log-likelihood, -log softmax(logits)[next token].
struct NllSums {
  double nll = 0.0, nll2 = 0.0;
  int64_t count = 0;

  void add(double token_nll) noexcept {
    nll += token_nll;
    nll2 += token_nll * token_nll;
    ++count;
  }
  // Adds a chunk's scored tokens: `logits` holds the rows of positions n_ctx/2 ... n_ctx-2 (n_vocab
  // each), which score chunk[n_ctx/2 + 1] ... chunk[n_ctx - 1] (none for a chunk under 3 tokens).
  void add_chunk(std::span<const float> logits, std::span<const Token> chunk);
  double ppl() const;  // exp(mean NLL); NaN before any token
  // PPL, its error and the mean NLL over n_chunks chunks.
  PerplexityResult result(int64_t n_chunks) const;
};

// -log softmax(logits)[tok], as llama-perplexity computes it (float exponentials summed in double).
double token_nll(std::span<const float> logits, Token tok);

// The sums over the scored tokens that the KL divergence statistics come from, and those
// statistics by llama.cpp's formulas (errors are 0 with 10 or fewer tokens). "Q" is the model
// evaluated, "base" the one that wrote the base file; p and p_base are the probabilities the two
// give the actual next token.
struct KlDivergenceStats {
  double sum_nll = 0.0, sum_nll2 = 0.0;
  double sum_nll_base = 0.0, sum_nll_base2 = 0.0;
  double sum_nll_nll_base = 0.0;
  double sum_kld = 0.0, sum_kld2 = 0.0;
  double sum_p_diff = 0.0, sum_p_diff2 = 0.0, sum_p_diff4 = 0.0;
  float max_p_diff = 0.0f;  // max |p - p_base|
  int64_t n_same_top = 0;   // positions where both models' most likely token is the same
  int64_t count = 0;        // tokens scored

  Estimate ppl() const;               // PPL(Q)
  Estimate ppl_base() const;          // PPL(base)
  Estimate ln_ppl_ratio() const;      // ln(PPL(Q) / PPL(base))
  Estimate ppl_ratio() const;         // PPL(Q) / PPL(base)
  Estimate ppl_diff() const;          // PPL(Q) - PPL(base)
  double ln_ppl_correlation() const;  // Cor(ln(PPL(Q)), ln(PPL(base)))
  Estimate kld() const;               // mean KL(base || Q)
  Estimate p_diff() const;            // mean p - p_base
  Estimate rms_p_diff() const;        // RMS of p - p_base
  Estimate same_top() const;          // fraction of positions with the same top token
};

// The running statistics after each chunk (kl_divergence's callback).
struct KlDivergenceChunk {
  int64_t chunk = 0;  // 1-based
  int64_t n_chunks = 0;
  double seconds = 0.0;
  KlDivergenceStats stats;  // over every token scored so far
};

struct KlDivergenceResult {
  KlDivergenceStats stats;
  int64_t n_ctx = 0;  // the base file's
  int64_t n_chunks = 0;
  std::vector<float> kld;     // per scored token, sorted ascending
  std::vector<float> p_diff;  // p - p_base per scored token, sorted ascending
};

// A .kld base file's header.
struct KlDivergenceBaseInfo {
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;
  int64_t n_chunks = 0;
};
// Reads and checks the header (Error(Io) when the file cannot be read, Error(CorruptFile) when it is
// not a .kld file, its header is out of range or its size is not what the header says).
KlDivergenceBaseInfo read_kl_divergence_base_info(const std::string& path);

// llama-perplexity's percentile of ascending values: linear between the two nearest (fraction in
// [0, 1]; <= 0 the first, >= 1 the last). median() is the middle value, or the mean of the middle two.
// Error(InvalidArgument) when `sorted` is empty.
float percentile(std::span<const float> sorted, float fraction);
float median(std::span<const float> sorted);

// The text's tokens as llama-perplexity reads them: the whole text (special-token texts read as
// plain text unless parse_special, as llama-imatrix --parse-special), BOS first when the vocabulary
// adds BOS, no EOS.
std::vector<Token> perplexity_tokens(const Vocab& vocab, std::string_view text, bool parse_special = false);

// The perplexity of the session's model over `tokens` (perplexity_tokens). The session's cache is
// cleared before each chunk and must hold n_ctx cells. on_chunk, when set, is called after each
// chunk. Error(InvalidArgument) when the options are out of range or the tokens fill no chunk;
// Error(Io) when save_base cannot be written; decode's Errors pass through.
PerplexityResult perplexity(Session& session, const Vocab& vocab, std::span<const Token> tokens,
                            const PerplexityOptions& options = {},
                            const std::function<void(const PerplexityChunk&)>& on_chunk = {});

// The session's model against the base file at `base_path` (written by perplexity() with save_base,
// or by llama-perplexity --kl-divergence-base): the base file's chunks of its tokens, at most
// options.max_chunks of them. Error(InvalidArgument) naming the mismatch when the file was made with
// another vocabulary size or another n_ctx than options.n_ctx (when not 0); Error(Io) when it cannot
// be read; Error(CorruptFile) when it is not a .kld file, its header is out of range or its size is
// not what the header says.
KlDivergenceResult kl_divergence(Session& session, const Vocab& vocab, const std::string& base_path,
                                 const PerplexityOptions& options = {},
                                 const std::function<void(const KlDivergenceChunk&)>& on_chunk = {});

}  // namespace tessera::llm
