// The llama architecture (Llama 1/2/3, Mistral, SmolLM; see ../shared/OPS.md, "The llama
// architecture"): pre-norm attention and SILU-gated FFN blocks, NORMAL rope with the file's
// freq factors (Llama 3.1 rope scaling) when it has them. With llama.expert_count (Mixtral) every
// layer's FFN is a mixture of experts (moe_ffn), each expert feed_forward_length wide.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader&, Hparams&) {}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  p.add(p.weights().rope_freqs, "rope_freqs.weight", h.n_rot / 2, 1, kPlaceEveryLayer, /*optional=*/true);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    if (h.n_expert > 0)
      p.add_moe_ffn(il, h.n_ff);
    else
      p.add_gated_ffn(il);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Normal); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  ap.freq_factors = b.model.rope_freqs();
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) {
  // YaRN scales magnitudes as it rotates: rotating twice would scale twice.
  rope_shift_k(b, shifts, rope_of_layer, b.model.rope_freqs());
}

}  // namespace

const Architecture kLlamaArchitecture{"llama", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
