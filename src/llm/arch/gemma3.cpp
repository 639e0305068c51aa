// The gemma3 architecture (Gemma 3 text): Gemma 2's sandwich-normed decoder without soft-capping,
// with per-head RMS norms of Q and K before rope, windowed layers by attention.sliding_window_pattern
// (all but the last of each group; 6 by default), and a separate rope base on the windowed layers
// (rope.freq_base_swa, else llama.cpp's constant 10000, unscaled).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  h.n_swa = r.int_or("attention.sliding_window", 0, 0, int64_t{1} << 30);
  h.swa_pattern = h.n_swa > 0 ? r.int_or("attention.sliding_window_pattern", 6, 1, h.n_layer + 1) : 1;
  h.rope_freq_base_swa = r.float_or("rope.freq_base_swa", 10000.0f, 1e-3f, 1e30f);
  h.rope_freq_scale_swa = 1.0f;
  // As Gemma 2: 1/sqrt(query_pre_attn_scalar), n_embd / n_head for the 27B model (62 layers).
  const int64_t scalar = h.n_layer == 62 ? h.n_embd / h.n_head : h.head_dim();
  h.q_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer(il, l.q_norm, "attn_q_norm", h.head_dim());
    p.add_layer(il, l.k_norm, "attn_k_norm", h.head_dim());
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
  ap.window = h.window(il);
  return ap;
}

Tensor* build(GraphBuild& b) { return sandwich_norm_decoder(b, attention_of_layer); }

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kGemma3Architecture{"gemma3", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
