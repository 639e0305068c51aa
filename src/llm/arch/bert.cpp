// The bert architecture (BERT, MiniLM, BGE, E5 and other sentence encoders): token embeddings plus
// token type 0's and learned absolute position embeddings, LayerNorm; per layer self-attention over
// the whole sequence (no causal mask, no rope) with biases, residual and LayerNorm, a GELU MLP with
// biases, residual and LayerNorm (llama.cpp's graph; blocks.h, `encoder`). No output projection:
// the model gives hidden states, pooled as the file's bert.pooling_type says.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {

void read_encoder_hparams(const HparamReader& r, Hparams& h) {
  h.encoder = true;
  if (!r.has("attention.layer_norm_epsilon"))
    raise(ErrorCode::CorruptFile, "hyperparameter {} is missing", r.full("attention.layer_norm_epsilon"));
  h.norm_eps = r.float_or("attention.layer_norm_epsilon", 1e-12f, 0.0f, 1.0f);
  const gguf::File& f = r.file();
  if (f.find("tokenizer.ggml.token_type_count") != nullptr) {
    const int64_t n = f.get_int("tokenizer.ggml.token_type_count");
    if (n < 0 || n > 1024)
      raise(ErrorCode::CorruptFile, "tokenizer.ggml.token_type_count = {} is outside [0, 1024]", n);
    h.n_token_types = n;
  }
  h.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
}

void declare_encoder_weights(WeightPlan& p, bool gated_ffn) {
  const Hparams& h = p.hparams();
  ModelWeights& w = p.weights();
  p.add(w.token_embd, "token_embd.weight", h.n_embd, h.n_vocab, kPlaceInput);
  if (h.n_token_types > 0)
    p.add(w.type_embd, "token_types.weight", h.n_embd, h.n_token_types, kPlaceInput, /*optional=*/true);
  p.add(w.tok_norm, "token_embd_norm.weight", h.n_embd, 1, kPlaceInput);
  p.add(w.tok_norm_b, "token_embd_norm.bias", h.n_embd, 1, kPlaceInput);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    Layer& l = p.layer(il);
    const int64_t n_qkv = h.n_embd_q() + h.n_embd_kv() + h.n_embd_v_kv();
    if (h.fused_qkv) {
      p.add_layer(il, l.wqkv, "attn_qkv", h.n_embd, n_qkv);
      p.add_layer_bias(il, l.bqkv, "attn_qkv", n_qkv, true);
    } else {
      p.add_layer(il, l.wq, "attn_q", h.n_embd, h.n_embd_q());
      p.add_layer(il, l.wk, "attn_k", h.n_embd, h.n_embd_kv());
      p.add_layer(il, l.wv, "attn_v", h.n_embd, h.n_embd_v_kv());
      p.add_layer_bias(il, l.bq, "attn_q", h.n_embd_q(), true);
      p.add_layer_bias(il, l.bk, "attn_k", h.n_embd_kv(), true);
      p.add_layer_bias(il, l.bv, "attn_v", h.n_embd_v_kv(), true);
    }
    p.add_layer(il, l.wo, "attn_output", h.head_dim_v() * h.n_head, h.n_embd);
    p.add_layer_bias(il, l.bo, "attn_output", h.n_embd, true);
    p.add_layer(il, l.attn_out_norm, "attn_output_norm", h.n_embd);
    p.add_layer_bias(il, l.attn_out_norm_b, "attn_output_norm", h.n_embd);
    p.add_layer(il, l.ffn_up, "ffn_up", h.n_embd, h.n_ff);
    p.add_layer_bias(il, l.ffn_up_b, "ffn_up", h.n_ff, true);
    if (gated_ffn) p.add_layer(il, l.ffn_gate, "ffn_gate", h.n_embd, h.n_ff);
    p.add_layer(il, l.ffn_down, "ffn_down", h.n_ff, h.n_embd);
    p.add_layer_bias(il, l.ffn_down_b, "ffn_down", h.n_embd, true);
    p.add_layer(il, l.layer_out_norm, "layer_output_norm", h.n_embd);
    p.add_layer_bias(il, l.layer_out_norm_b, "layer_output_norm", h.n_embd);
  }
}

void no_k_shift(GraphBuild&, Tensor*) { raise(ErrorCode::Unsupported, "an encoder keeps no K/V to shift"); }

namespace {

void read_hparams(const HparamReader& r, Hparams& h) { read_encoder_hparams(r, h); }

void declare_weights(WeightPlan& p) {
  declare_encoder_weights(p, /*gated_ffn=*/false);
  const Hparams& h = p.hparams();
  p.add(p.weights().pos_embd, "position_embd.weight", h.n_embd, h.n_ctx_train, kPlaceInput);
}

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap;
  ap.use_rope = false;
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  return encoder(b, ap);
}

}  // namespace

const Architecture kBertArchitecture{"bert", read_hparams, declare_weights, build, no_k_shift};

}  // namespace tessera::llm
