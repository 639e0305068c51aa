// The gemma2 architecture (Gemma 2): embeddings scaled by sqrt(n_embd); each block normed before
// and after (post_attention_norm, post_ffw_norm) with the norm weights as the GGUF stores them
// (the converter already added Gemma's 1); GELU-gated FFN; attention and final logits
// soft-capped; a sliding window on the even layers (all but the last of each pair), NEOX rope.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  h.n_swa = r.int_or("attention.sliding_window", 4096, 1, int64_t{1} << 30);  // Gemma 2's own default
  h.swa_pattern = 2;
  h.rope_freq_base_swa = h.rope_freq_base;  // one rope for every layer
  h.rope_freq_scale_swa = h.rope_freq_scale;
  h.attn_softcap = r.float_or("attn_logit_softcapping", 50.0f, 0.0f, 1e6f);
  h.final_softcap = r.float_or("final_logit_softcapping", 30.0f, 0.0f, 1e6f);
  // Q is scaled by 1/sqrt(query_pre_attn_scalar): the head size, but n_embd / n_head for the 27B
  // model (46 layers); the GGUF has no key for it, so it is known by its shape (as llama.cpp does).
  const int64_t scalar = h.n_layer == 46 ? h.n_embd / h.n_head : h.head_dim();
  h.q_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    p.add_gated_ffn(il);
    p.add_post_norms(il);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t il) {
  return rope_params(h, RopeMode::Neox, h.swa_layer(il));
}

AttentionParams attention_of_layer(const GraphBuild& b, int64_t il) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap;
  ap.rope = rope_of_layer(h, il);
  ap.q_scale = h.q_scale;
  ap.kq_scale = 1.0f;
  ap.softcap = h.attn_softcap;
  ap.window = h.window(il);
  return ap;
}

Tensor* build(GraphBuild& b) { return sandwich_norm_decoder(b, attention_of_layer); }

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kGemma2Architecture{"gemma2", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
