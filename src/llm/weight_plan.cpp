#include "weight_plan.h"

#include <fmt/format.h>

namespace tessera::llm {

void WeightPlan::add(Tensor*& slot, std::string name, int64_t ne0, int64_t ne1, int64_t where, bool optional,
                     std::string fallback) {
  specs_.push_back({std::move(name), {ne0, ne1, 1}, &slot, where, optional, std::move(fallback)});
}

void WeightPlan::add_layer(int64_t il, Tensor*& slot, const char* what, int64_t ne0, int64_t ne1,
                           bool optional) {
  add(slot, fmt::format("blk.{}.{}.weight", il, what), ne0, ne1, il, optional);
}

void WeightPlan::add_layer_bias(int64_t il, Tensor*& slot, const char* what, int64_t ne0, bool optional) {
  add(slot, fmt::format("blk.{}.{}.bias", il, what), ne0, 1, il, optional);
}

void WeightPlan::add_embeddings_and_output() {
  add(io_.token_embd, "token_embd.weight", h_.n_embd, h_.n_vocab, kPlaceInput);
  add(io_.output_norm, "output_norm.weight", h_.n_embd, 1, kPlaceOutput);
  add(io_.output, "output.weight", h_.n_embd, h_.n_vocab, kPlaceOutput, false, "token_embd.weight");
}

void WeightPlan::add_attention(int64_t il, DecoderLayer& l) {
  add_layer(il, l.attn_norm, "attn_norm", h_.n_embd);
  add_layer(il, l.attn.wq, "attn_q", h_.n_embd, h_.n_embd_q());
  add_layer(il, l.attn.wk, "attn_k", h_.n_embd, h_.n_embd_kv());
  add_layer(il, l.attn.wv, "attn_v", h_.n_embd, h_.n_embd_v_kv());
  add_layer(il, l.attn.wo, "attn_output", h_.head_dim_v() * h_.n_head, h_.n_embd);
}

void WeightPlan::add_attention_biases(int64_t il, AttentionWeights& a, bool optional) {
  add_layer_bias(il, a.bq, "attn_q", h_.n_embd_q(), optional);
  add_layer_bias(il, a.bk, "attn_k", h_.n_embd_kv(), optional);
  add_layer_bias(il, a.bv, "attn_v", h_.n_embd_v_kv(), optional);
}

void WeightPlan::add_qk_norms(int64_t il, AttentionWeights& a, int64_t q_width, int64_t k_width) {
  add_layer(il, a.q_norm, "attn_q_norm", q_width);
  add_layer(il, a.k_norm, "attn_k_norm", k_width);
}

void WeightPlan::add_gated_ffn(int64_t il, DecoderLayer& l, bool biases) {
  add_layer(il, l.ffn_norm, "ffn_norm", h_.n_embd);
  add_layer(il, l.ffn.gate, "ffn_gate", h_.n_embd, h_.n_ff);
  add_layer(il, l.ffn.up, "ffn_up", h_.n_embd, h_.n_ff);
  add_layer(il, l.ffn.down, "ffn_down", h_.n_ff, h_.n_embd);
  if (!biases) return;
  add_layer_bias(il, l.ffn.gate_b, "ffn_gate", h_.n_ff, /*optional=*/true);
  add_layer_bias(il, l.ffn.up_b, "ffn_up", h_.n_ff, /*optional=*/true);
  add_layer_bias(il, l.ffn.down_b, "ffn_down", h_.n_embd, /*optional=*/true);
}

void WeightPlan::add_shared_expert(int64_t il, FfnWeights& w, int64_t n_ff_shexp) {
  add_layer(il, w.gate, "ffn_gate_shexp", h_.n_embd, n_ff_shexp);
  add_layer(il, w.up, "ffn_up_shexp", h_.n_embd, n_ff_shexp);
  add_layer(il, w.down, "ffn_down_shexp", n_ff_shexp, h_.n_embd);
}

void WeightPlan::add_moe_ffn(int64_t il, DecoderLayer& l, int64_t n_ff_exp, const char* norm, bool biases) {
  MoeWeights& m = l.moe;
  add_layer(il, l.ffn_norm, norm, h_.n_embd);
  add_layer(il, m.router, "ffn_gate_inp", h_.n_embd, h_.n_expert);
  const auto experts = [&](Tensor*& slot, const char* what, int64_t ne0, int64_t ne1) {
    specs_.push_back(
        {fmt::format("blk.{}.{}.weight", il, what), {ne0, ne1, h_.n_expert}, &slot, il, false, {}});
  };
  experts(m.gate_exps, "ffn_gate_exps", h_.n_embd, n_ff_exp);
  experts(m.up_exps, "ffn_up_exps", h_.n_embd, n_ff_exp);
  experts(m.down_exps, "ffn_down_exps", n_ff_exp, h_.n_embd);
  if (!biases) return;
  add_layer_bias(il, m.router_b, "ffn_gate_inp", h_.n_expert);
  const auto bias_rows = [&](Tensor*& slot, const char* what, int64_t ne0) {
    add(slot, fmt::format("blk.{}.{}.bias", il, what), ne0, h_.n_expert, il);
  };
  bias_rows(m.gate_exps_b, "ffn_gate_exps", n_ff_exp);
  bias_rows(m.up_exps_b, "ffn_up_exps", n_ff_exp);
  bias_rows(m.down_exps_b, "ffn_down_exps", h_.n_embd);
}

void WeightPlan::add_post_norms(int64_t il, DecoderLayer& l) {
  add_layer(il, l.post_attn_norm, "post_attention_norm", h_.n_embd);
  add_layer(il, l.post_ffn_norm, "post_ffw_norm", h_.n_embd);
}

}  // namespace tessera::llm
