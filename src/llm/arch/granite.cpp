// The granite and granitemoe architectures (IBM Granite 3.x; llama.cpp's granite graph serves both):
// the llama decoder with four scales (token embeddings times granite.embedding_scale, each block's
// attention and FFN output times residual_scale before its residual add, KQ scaled by
// attention.scale instead of 1 / sqrt(head_dim), logits divided by logit_scale, which is required),
// NORMAL rope with the file's freq factors when it has them, or no rope at all when
// rope.scaling.finetuned is false; the optional biases of Q/K/V, the attention output and the
// FFN. With expert_count (granitemoe) every layer's FFN is a mixture of experts of
// feed_forward_length, routed by softmax with the picked weights renormalised, plus a shared
// expert of expert_shared_feed_forward_length when the file has one.
#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class Granite final : public DecoderModel {
 public:
  Granite(const HparamReader& r, const Hparams& h) : DecoderModel(r, h) {
    require_full_rope(r, h);
    logit_scale_ = r.required_float("logit_scale", 1e-6f, 1e6f);
    residual_scale_ = r.float_or("residual_scale", 0.0f, 0.0f, 1e6f);
    embedding_scale_ = r.float_or("embedding_scale", 0.0f, 0.0f, 1e6f);
    attention_scale_ = r.float_or("attention.scale", 0.0f, 0.0f, 1e6f);
    use_rope_ =
        r.bool_or("rope.scaling.finetuned", true);  // Granite's switch for rope, as llama.cpp reads it
    if (r.has("deepstack_mapping"))
      raise(ErrorCode::Unsupported, "hyperparameter {} (Granite Vision's deepstack inputs) is not supported",
            r.full("deepstack_mapping"));
    n_ff_shexp_ = r.int_or("expert_shared_feed_forward_length", 0, 0, int64_t{1} << 20);
    if (h.n_expert == 0 && n_ff_shexp_ > 0)
      raise(ErrorCode::CorruptFile, "hyperparameters: {} = {} without {}",
            r.full("expert_shared_feed_forward_length"), n_ff_shexp_, r.full("expert_count"));
    if (h.n_expert > 0) refuse_other_moe_routing(r, /*renormalized=*/true);
  }

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    p.require_every_tensor_read();
    p.add(rope_freqs_, "rope_freqs.weight", h.n_rot / 2, 1, kPlaceEveryLayer, /*optional=*/true);
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_attention_biases(il, l.attn, /*optional=*/true);
      p.add_layer_bias(il, l.attn.bo, "attn_output", h.n_embd, /*optional=*/true);
      if (h.n_expert > 0) {
        p.add_moe_ffn(il, l, h.n_ff);
        if (n_ff_shexp_ > 0) p.add_shared_expert(il, l.moe.shared, n_ff_shexp_);
      } else {
        p.add_gated_ffn(il, l, /*biases=*/true);
      }
    });
  }

  Tensor* build(GraphBuild& b) const override {
    AttentionParams ap = roped(b.model.hparams(), RopeMode::Normal);
    ap.freq_factors = rope_freqs_;
    ap.use_rope = use_rope_;
    if (attention_scale_ != 0.0f) ap.kq_scale = attention_scale_;
    DecoderParams p = decoder(every_layer(ap));
    p.embedding_scale = embedding_scale_;
    p.residual_scale = residual_scale_;
    p.logit_scale = logit_scale_;
    return pre_norm_decoder(b, layers_, p);
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    if (use_rope_) shift_k(b, shifts, RopeMode::Normal, rope_freqs_);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    llm::describe(out, "embedding_scale", embedding_scale_);
    llm::describe(out, "residual_scale", residual_scale_);
    llm::describe(out, "attention_scale", attention_scale_);
    llm::describe(out, "logit_scale", logit_scale_);
    llm::describe(out, "use_rope", use_rope_);
    llm::describe(out, "n_ff_shexp", n_ff_shexp_);
  }

 private:
  float logit_scale_ = 0.0f, residual_scale_ = 0.0f, embedding_scale_ = 0.0f, attention_scale_ = 0.0f;
  bool use_rope_ = true;
  int64_t n_ff_shexp_ = 0;        // the shared expert's width (granitemoe; 0: none)
  Tensor* rope_freqs_ = nullptr;  // F32 [n_rot / 2] rope frequency factors, or none
};

}  // namespace

void register_granite(ArchitectureRegistry& r) {
  r.add<Granite>("granite");
  r.add<Granite>("granitemoe");
}

}  // namespace tessera::llm
