#pragma once
// Sentence embeddings from a Session in embeddings mode (SessionOptions::embeddings): one
// sequence's hidden states pooled into one vector (mean, first token, last token, or every token),
// optionally L2-normalized, as llama.cpp's embeddings are.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/llm/batch.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

namespace tessera::llm {

// How a sequence's hidden states become one embedding. The numbers of None..Last are llama.cpp's
// (llama_pooling_type, `<arch>.pooling_type`).
enum class Pooling : int32_t {
  None = 0,  // every token's hidden state ([n_tokens][n_embd])
  Mean = 1,  // the mean over the sequence's tokens
  Cls = 2,   // the first token's (BERT's [CLS])
  Last = 3,  // the last token's
};

// "none", "mean", "cls", "last".
const char* pooling_name(Pooling p) noexcept;
// The pooling called `name` (one of pooling_name's), or nullopt.
std::optional<Pooling> parse_pooling(std::string_view name) noexcept;

// The model's pooling: the file's `<arch>.pooling_type` when it names one of ours, else Mean.
// (Generative models' files name none: a mean over the prompt is the usual choice for them.)
Pooling default_pooling(const Model& model) noexcept;

// Scales v to unit Euclidean length (summed in double); a zero vector stays zero.
void l2_normalize(std::span<float> v) noexcept;

// Evaluates `tokens` as sequence `seq` of `session` (which must be in embeddings mode), from
// position 0: the sequence is cleared first, and again afterwards, so the cache ends as it began
// for every other sequence. Returns the pooled embedding ([n_embd] floats), or with Pooling::None
// every token's ([n_tokens * n_embd]); each vector L2-normalized when `normalize`.
// Error(InvalidArgument) for a session that computes logits, no tokens, or an encoder model's
// sequence longer than the session's batch (its attention sees the whole sequence at once);
// Error(ContextFull) when the tokens do not fit in the cache.
std::vector<float> embed(Session& session, std::span<const Token> tokens, Pooling pooling, bool normalize,
                         SeqId seq = 0);

}  // namespace tessera::llm
