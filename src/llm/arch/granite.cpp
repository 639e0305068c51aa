// The granite and granitemoe architectures (IBM Granite 3.x; llama.cpp's granite graph serves both):
// the llama decoder with four scales (token embeddings times granite.embedding_scale, each block's
// attention and FFN output times residual_scale before its residual add, KQ scaled by
// attention.scale instead of 1 / sqrt(head_dim), logits divided by logit_scale, which is required),
// NORMAL rope with the file's freq factors when it has them, or no rope at all when
// rope.scaling.finetuned is false; the optional biases of Q/K/V, the attention output and the
// FFN. With expert_count (granitemoe) every layer's FFN is a mixture of experts of
// feed_forward_length, routed by softmax with the picked weights renormalised, plus a shared
// expert of expert_shared_feed_forward_length when the file has one.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  require_full_rope(r, h);
  h.logit_scale = r.required_float("logit_scale", 1e-6f, 1e6f);
  h.residual_scale = r.float_or("residual_scale", 0.0f, 0.0f, 1e6f);
  h.embedding_scale = r.float_or("embedding_scale", 0.0f, 0.0f, 1e6f);
  h.attention_scale = r.float_or("attention.scale", 0.0f, 0.0f, 1e6f);
  h.use_rope = r.bool_or("rope.scaling.finetuned", true);  // Granite's switch for rope, as llama.cpp reads it
  if (r.has("deepstack_mapping"))
    raise(ErrorCode::Unsupported, "hyperparameter {} (Granite Vision's deepstack inputs) is not supported",
          r.full("deepstack_mapping"));
  h.n_ff_shexp = r.int_or("expert_shared_feed_forward_length", 0, 0, int64_t{1} << 20);
  if (h.n_expert == 0 && h.n_ff_shexp > 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} = {} without {}",
          r.full("expert_shared_feed_forward_length"), h.n_ff_shexp, r.full("expert_count"));
  if (h.n_expert > 0) refuse_other_moe_routing(r, /*renormalized=*/true);
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.require_every_tensor_read();
  p.add_embeddings_and_output();
  p.add(p.weights().rope_freqs, "rope_freqs.weight", h.n_rot / 2, 1, kPlaceEveryLayer, /*optional=*/true);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    p.add_attention_biases(il);
    p.add_layer_bias(il, p.layer(il).bo, "attn_output", h.n_embd, /*optional=*/true);
    if (h.n_expert > 0) {
      p.add_moe_ffn(il, h.n_ff);
      if (h.n_ff_shexp > 0) p.add_shared_expert(il, h.n_ff_shexp);
    } else {
      p.add_gated_ffn(il, /*biases=*/true);
    }
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Normal); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  ap.freq_factors = b.model.rope_freqs();
  if (h.attention_scale != 0.0f) ap.kq_scale = h.attention_scale;
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) {
  rope_shift_k(b, shifts, rope_of_layer, b.model.rope_freqs());
}

}  // namespace

const Architecture kGraniteArchitecture{"granite", read_hparams, declare_weights, build, build_k_shift};
const Architecture kGraniteMoeArchitecture{"granitemoe", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
