// The phi3 architecture (Phi-3, Phi-3.5 and Phi-4 mini): the llama decoder with Q, K and V in one
// fused projection (attn_qkv), gate and up in one fused ffn_up of 2 * n_ff rows, NEOX rope with the
// file's long/short rope factors when it has them, Q scaled before KQ, and usually a tied output.
// Its attention.sliding_window key is ignored, as llama.cpp does (the converters fill it
// inconsistently).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  // Long-context files (LongRoPE) state the context their short factors serve and the scale that
  // the rope applies to magnitudes with the long ones.
  h.rope_n_ctx_orig =
      r.int_or("rope.scaling.original_context_length", h.rope_n_ctx_orig, 1, int64_t{1} << 30);
  h.rope_attn_factor = r.float_or("rope.scaling.attn_factor", 1.0f, 1e-3f, 1e3f);
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  ModelWeights& w = p.weights();
  p.add_embeddings_and_output();
  p.add(w.rope_factors_long, "rope_factors_long.weight", h.n_rot / 2, 1, kPlaceEveryLayer, true);
  p.add(w.rope_factors_short, "rope_factors_short.weight", h.n_rot / 2, 1, kPlaceEveryLayer, true);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    Layer& l = p.layer(il);
    p.add_layer(il, l.attn_norm, "attn_norm", h.n_embd);
    p.add_layer(il, l.wqkv, "attn_qkv", h.n_embd, h.n_embd_q() + h.n_embd_kv() + h.n_embd_v_kv());
    p.add_layer(il, l.wo, "attn_output", h.head_dim_v() * h.n_head, h.n_embd);
    p.add_layer(il, l.ffn_norm, "ffn_norm", h.n_embd);
    p.add_layer(il, l.ffn_up, "ffn_up", h.n_embd, 2 * h.n_ff);
    p.add_layer(il, l.ffn_down, "ffn_down", h.n_ff, h.n_embd);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Neox); }

// The long factors when the cache holds more positions than the original context, else the short.
Tensor* rope_factors(const GraphBuild& b) {
  const ModelWeights& w = b.model.weights();
  const bool long_context = b.cache.size() > b.model.hparams().rope_n_ctx_orig;
  Tensor* f = long_context ? w.rope_factors_long : w.rope_factors_short;
  return f != nullptr ? f : (long_context ? w.rope_factors_short : w.rope_factors_long);
}

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap;
  ap.rope = rope_of_layer(h, 0);
  ap.freq_factors = rope_factors(b);
  ap.q_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  ap.kq_scale = 1.0f;
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) {
  if (b.model.hparams().rope_yarn_ext_factor != 0.0f || b.model.hparams().rope_attn_factor != 1.0f)
    raise(ErrorCode::Unsupported, "shifting positions is not supported with a rope that scales magnitudes");
  rope_shift_k(b, shifts, rope_of_layer, rope_factors(b));
}

}  // namespace

const Architecture kPhi3Architecture{"phi3", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
