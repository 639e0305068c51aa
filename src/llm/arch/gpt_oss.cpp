// The gpt-oss architecture (OpenAI gpt-oss; llama.cpp's openai-moe graph): Q/K/V and output
// projections with biases; a learned sink logit per head in every softmax; a sliding window on
// the even layers (all but the last of each attention.sliding_window_pattern, default 2), full
// attention on the others; NEOX rope with the file's YaRN scaling on every layer; post_attention_norm
// as the FFN's input norm; a mixture of experts in every layer with the router's bias, the
// largest expert_used_count logits picked and a softmax over just those, the experts' biases and
// the clamped SwiGLU (alpha 1.702, limit 7).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  if (h.n_expert == 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} is required (and must be positive)",
          r.full("expert_count"));
  h.n_ff_exp = r.required_int("expert_feed_forward_length", 1, int64_t{1} << 20);
  h.n_swa = r.required_int("attention.sliding_window", 1, int64_t{1} << 30);
  h.swa_pattern = r.int_or("attention.sliding_window_pattern", 2, 1, int64_t{1} << 20);
  h.rope_freq_base_swa = r.float_or("rope.freq_base_swa", h.rope_freq_base, 1e-3f, 1e30f);
  h.rope_freq_scale_swa = h.rope_freq_scale;
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    Layer& l = p.layer(il);
    p.add_layer_bias(il, l.bq, "attn_q", h.n_embd_q());
    p.add_layer_bias(il, l.bk, "attn_k", h.n_embd_kv());
    p.add_layer_bias(il, l.bv, "attn_v", h.n_embd_v_kv());
    p.add_layer_bias(il, l.bo, "attn_output", h.n_embd);
    p.add_layer(il, l.attn_sinks, "attn_sinks", h.n_head);
    p.add_moe_ffn(il, h.n_ff_exp, "post_attention_norm", true);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t il) {
  return rope_params(h, RopeMode::Neox, h.swa_layer(il));
}

Tensor* build(GraphBuild& b) {
  const Model& m = b.model;
  const Hparams& h = m.hparams();
  auto named = GraphBuild::named;
  MoeParams moe;
  moe.softmax_of_selected = true;
  moe.swiglu_oai = true;
  Tensor* x =
      b.stage_input([&] { return named(ops::get_rows(b.ctx, m.token_embd(), b.tokens), "embd", -1); });
  for (int64_t il = b.layers.first; il < b.layers.end; ++il) {
    const Layer& l = m.layers()[static_cast<size_t>(il)];
    AttentionParams ap;
    ap.rope = rope_of_layer(h, il);
    ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
    ap.window = h.window(il);
    Tensor* cur = rms_norm(b, x, l.attn_norm, h.rms_eps, "attn_in", il);
    cur = attention(b, l, il, cur, ap);
    x = named(ops::add(b.ctx, cur, x), "attn_residual", il);
    cur = rms_norm(b, x, l.ffn_norm, h.rms_eps, "ffn_in", il);
    cur = moe_ffn(b, l, il, cur, moe);
    x = named(ops::add(b.ctx, cur, x), "l_out", il);
  }
  if (!b.ends_model()) return x;
  x = b.select_outputs(x);
  x = rms_norm(b, x, m.output_norm(), h.rms_eps, "result_norm", -1);
  if (b.embeddings) return x;
  return named(ops::mul_mat(b.ctx, m.output(), x), "logits", -1);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kGptOssArchitecture{"gpt-oss", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
