// The encoders bert (BERT, MiniLM, BGE, E5 and other sentence encoders) and nomic-bert
// (nomic-embed-text v1/v1.5), as llama.cpp builds them (blocks.h, `encoder`): token embeddings plus
// token type 0's, LayerNorm; per layer self-attention over the whole sequence (no causal mask) with
// biases, residual and LayerNorm, an MLP, residual and LayerNorm. No output projection: the model
// gives hidden states, pooled as the file's <arch>.pooling_type says.
// bert: learned absolute position embeddings, no rope, a GELU MLP with biases.
// nomic-bert: NEOX rope on Q and K instead of learned positions, Q/K/V usually in one fused
// projection without biases, and a SILU-gated FFN (ffn_gate, ffn_up, ffn_down) without biases.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class Encoder : public ArchitectureModel {
 public:
  Encoder(const HparamReader& r, Hparams& h, bool nomic) : nomic_(nomic) {
    h.encoder = true;
    if (!r.has("attention.layer_norm_epsilon"))
      raise(ErrorCode::CorruptFile, "hyperparameter {} is missing", r.full("attention.layer_norm_epsilon"));
    norm_eps_ = r.float_or("attention.layer_norm_epsilon", 1e-12f, 0.0f, 1.0f);
    if (const gguf::File* f = r.file()) {
      if (f->find("tokenizer.ggml.token_type_count") != nullptr) {
        const int64_t n = f->get_int("tokenizer.ggml.token_type_count");
        if (n < 0 || n > 1024)
          raise(ErrorCode::CorruptFile, "tokenizer.ggml.token_type_count = {} is outside [0, 1024]", n);
        n_token_types_ = n;
      }
      fused_qkv_ = f->find_tensor("blk.0.attn_qkv.weight") != nullptr;
    }
    if (nomic_) rope_ = read_rope_hparams(r, h);
    w_.layers.resize(static_cast<size_t>(h.n_layer));
  }

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    p.add(p.io().token_embd, "token_embd.weight", h.n_embd, h.n_vocab, kPlaceInput);
    if (n_token_types_ > 0)
      p.add(w_.type_embd, "token_types.weight", h.n_embd, n_token_types_, kPlaceInput, /*optional=*/true);
    if (!nomic_) p.add(w_.pos_embd, "position_embd.weight", h.n_embd, h.n_ctx_train, kPlaceInput);
    p.add(w_.tok_norm, "token_embd_norm.weight", h.n_embd, 1, kPlaceInput);
    p.add(w_.tok_norm_b, "token_embd_norm.bias", h.n_embd, 1, kPlaceInput);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      EncoderLayer& l = w_.layers[static_cast<size_t>(il)];
      const int64_t n_qkv = h.n_embd_q() + h.n_embd_kv() + h.n_embd_v_kv();
      if (fused_qkv_) {
        p.add_layer(il, l.attn.wqkv, "attn_qkv", h.n_embd, n_qkv);
        p.add_layer_bias(il, l.attn.bqkv, "attn_qkv", n_qkv, true);
      } else {
        p.add_layer(il, l.attn.wq, "attn_q", h.n_embd, h.n_embd_q());
        p.add_layer(il, l.attn.wk, "attn_k", h.n_embd, h.n_embd_kv());
        p.add_layer(il, l.attn.wv, "attn_v", h.n_embd, h.n_embd_v_kv());
        p.add_attention_biases(il, l.attn, /*optional=*/true);
      }
      p.add_layer(il, l.attn.wo, "attn_output", h.head_dim_v() * h.n_head, h.n_embd);
      p.add_layer_bias(il, l.attn.bo, "attn_output", h.n_embd, true);
      p.add_layer(il, l.attn_out_norm, "attn_output_norm", h.n_embd);
      p.add_layer_bias(il, l.attn_out_norm_b, "attn_output_norm", h.n_embd);
      p.add_layer(il, l.ffn.up, "ffn_up", h.n_embd, h.n_ff);
      p.add_layer_bias(il, l.ffn.up_b, "ffn_up", h.n_ff, true);
      if (nomic_) p.add_layer(il, l.ffn.gate, "ffn_gate", h.n_embd, h.n_ff);
      p.add_layer(il, l.ffn.down, "ffn_down", h.n_ff, h.n_embd);
      p.add_layer_bias(il, l.ffn.down_b, "ffn_down", h.n_embd, true);
      p.add_layer(il, l.layer_out_norm, "layer_output_norm", h.n_embd);
      p.add_layer_bias(il, l.layer_out_norm_b, "layer_output_norm", h.n_embd);
    }
  }

  Tensor* build(GraphBuild& b) const override {
    const Hparams& h = b.model.hparams();
    AttentionParams ap;
    ap.use_rope = nomic_;
    if (nomic_) ap.rope = rope_params(h, rope_, RopeMode::Neox);
    ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
    return encoder(b, w_, norm_eps_, ap);
  }

  void build_k_shift(GraphBuild&, Tensor*) const override {
    raise(ErrorCode::Unsupported, "an encoder keeps no K/V to shift");
  }

  void describe(HparamList& out) const override {
    if (nomic_) describe_rope(rope_, "rope_", out);
    llm::describe(out, "norm_eps", norm_eps_);
    llm::describe(out, "n_token_types", n_token_types_);
    llm::describe(out, "fused_qkv", fused_qkv_);
  }

 private:
  bool nomic_;
  RopeHparams rope_;
  float norm_eps_ = 1e-12f;    // the LayerNorms' epsilon (attention.layer_norm_epsilon)
  int64_t n_token_types_ = 0;  // tokenizer.ggml.token_type_count (BERT's segment embeddings)
  bool fused_qkv_ = false;     // the file has blk.N.attn_qkv rather than attn_q/k/v
  EncoderWeights w_;
};

class Bert final : public Encoder {
 public:
  Bert(const HparamReader& r, Hparams& h) : Encoder(r, h, /*nomic=*/false) {}
};

class NomicBert final : public Encoder {
 public:
  NomicBert(const HparamReader& r, Hparams& h) : Encoder(r, h, /*nomic=*/true) {}
};

}  // namespace

void register_bert(ArchitectureRegistry& r) {
  r.add<Bert>("bert");
  r.add<NomicBert>("nomic-bert");
}

}  // namespace tessera::llm
