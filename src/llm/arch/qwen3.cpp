// The qwen3 architecture (Qwen3 dense): the llama decoder with per-head RMS norms of Q and K
// before rope, head sizes from attention.key_length / value_length, and NEOX rope.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader&, Hparams&) {}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer(il, l.q_norm, "attn_q_norm", h.head_dim());
    p.add_layer(il, l.k_norm, "attn_k_norm", h.head_dim());
    p.add_gated_ffn(il);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Neox); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap;
  ap.rope = rope_of_layer(h, 0);
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) {
  if (b.model.hparams().rope_yarn_ext_factor != 0.0f)
    raise(ErrorCode::Unsupported, "shifting positions is not supported with YaRN rope scaling");
  rope_shift_k(b, shifts, rope_of_layer, nullptr);
}

}  // namespace

const Architecture kQwen3Architecture{"qwen3", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
