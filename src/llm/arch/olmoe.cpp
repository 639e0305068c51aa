// The olmoe architecture (AllenAI OLMoE): the llama decoder with RMS norms of the whole Q and K
// projections (attn_q_norm / attn_k_norm as wide as them, before the split into heads), NEOX rope,
// and a mixture of experts in every layer, feed_forward_length wide, routed by softmax over the
// router's logits with the picked probabilities weighting as they are (not renormalised).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {

void require_full_rope(const HparamReader& r, const Hparams& h) {
  if (h.n_rot != h.head_dim())
    raise(ErrorCode::Unsupported,
          "hyperparameter {} = {}: rope over part of a head ({}) is not supported here",
          r.full("rope.dimension_count"), h.n_rot, h.head_dim());
  if (h.head_dim_v() != h.head_dim())
    raise(ErrorCode::Unsupported,
          "hyperparameters: value heads of {} with key heads of {} are not supported here", h.head_dim_v(),
          h.head_dim());
}

void refuse_other_moe_routing(const HparamReader& r, bool renormalized) {
  // The graph routes by a softmax over the router's logits, renormalised or not as the architecture
  // has it and unscaled: keys asking for anything else are refused rather than ignored.
  if (r.has("expert_gating_func") && r.int_or("expert_gating_func", 1, 0, 1 << 20) != 1)
    raise(ErrorCode::Unsupported, "hyperparameter {} = {}: only softmax gating (1) is supported here",
          r.full("expert_gating_func"), r.int_or("expert_gating_func", 1, 0, 1 << 20));
  if (r.has("expert_weights_norm") && r.bool_or("expert_weights_norm", renormalized) != renormalized)
    raise(ErrorCode::Unsupported,
          "hyperparameter {} = {} is not supported: this architecture's weights are {}",
          r.full("expert_weights_norm"), !renormalized, renormalized ? "renormalised" : "not renormalised");
  if (const float s = r.float_or("expert_weights_scale", 1.0f, -1e30f, 1e30f); s != 0.0f && s != 1.0f)
    raise(ErrorCode::Unsupported, "hyperparameter {} = {} is not supported (only 1)",
          r.full("expert_weights_scale"), s);
  if (r.int_or("expert_shared_count", 0, 0, 1 << 20) != 0)
    raise(ErrorCode::Unsupported, "hyperparameter {} is not supported here", r.full("expert_shared_count"));
}

namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  require_full_rope(r, h);
  if (h.n_expert == 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} is required (and must be positive)",
          r.full("expert_count"));
  // llama.cpp's olmoe normalises Q and K with n_embd-wide weights: both projections are n_embd wide.
  if (h.n_embd_q() != h.n_embd || h.n_embd_kv() != h.n_embd)
    raise(ErrorCode::Unsupported,
          "hyperparameters: olmoe with Q ({}) or K ({}) projections narrower or wider than {} = {} is not "
          "supported",
          h.n_embd_q(), h.n_embd_kv(), r.full("embedding_length"), h.n_embd);
  refuse_other_moe_routing(r, /*renormalized=*/false);
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.require_every_tensor_read();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer(il, l.q_norm, "attn_q_norm", h.n_embd_q());
    p.add_layer(il, l.k_norm, "attn_k_norm", h.n_embd_kv());
    p.add_moe_ffn(il, h.n_ff);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Neox); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  MoeParams moe;
  moe.renormalize = false;
  return pre_norm_decoder(b, ap, moe);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kOlmoeArchitecture{"olmoe", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
