// The gemma2 and gemma3 architectures (Gemma 2, Gemma 3 text): embeddings scaled by sqrt(n_embd);
// each block normed before and after (post_attention_norm, post_ffw_norm) with the norm weights as
// the GGUF stores them (the converter already added Gemma's 1); GELU-gated FFN; Q scaled by
// 1/sqrt(query_pre_attn_scalar); NEOX rope; a sliding window on all but the last layer of each
// group. Gemma 2: groups of 2, attention and final logits soft-capped, one rope for every layer.
// Gemma 3: per-head RMS norms of Q and K before rope, groups of
// attention.sliding_window_pattern (6 by default), no soft-capping, and a separate rope base on the
// windowed layers (rope.freq_base_swa, else llama.cpp's constant 10000, unscaled).
#include <cmath>

#include "architecture.h"

namespace tessera::llm {
namespace {

class Gemma : public DecoderModel {
 public:
  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      if (qk_norms_) p.add_qk_norms(il, l.attn, h.head_dim(), h.head_dim());
      p.add_gated_ffn(il, l);
      p.add_post_norms(il, l);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    const Hparams& h = b.model.hparams();
    DecoderParams p = decoder([&](int64_t il) {
      AttentionParams ap = layer_attention(h, il, RopeMode::Neox);
      ap.q_scale = q_scale_;
      ap.kq_scale = 1.0f;
      ap.softcap = attn_softcap_;
      return ap;
    });
    p.final_softcap = final_softcap_;
    return sandwich_norm_decoder(b, layers_, p);
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Neox, nullptr);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    llm::describe(out, "attn_softcap", attn_softcap_);
    llm::describe(out, "final_softcap", final_softcap_);
    llm::describe(out, "q_scale", q_scale_);
  }

 protected:
  // Q is scaled by 1/sqrt(query_pre_attn_scalar): the head size, but n_embd / n_head for the 27B
  // models (46 layers in Gemma 2, 62 in Gemma 3); the GGUF has no key for it, so it is known by its
  // shape (as llama.cpp does).
  Gemma(const HparamReader& r, const Hparams& h, int64_t layers_of_27b) : DecoderModel(r, h) {
    const int64_t scalar = h.n_layer == layers_of_27b ? h.n_embd / h.n_head : h.head_dim();
    q_scale_ = 1.0f / std::sqrt(static_cast<float>(scalar));
    swa_.rope = rope_;  // Gemma 2: one rope for every layer (Gemma 3 sets the windowed layers' own)
  }

  float attn_softcap_ = 0.0f, final_softcap_ = 0.0f;  // c * tanh(x / c) (0: none)
  float q_scale_ = 1.0f;
  bool qk_norms_ = false;
};

class Gemma2 final : public Gemma {
 public:
  Gemma2(const HparamReader& r, const Hparams& h) : Gemma(r, h, 46) {
    swa_.n = r.int_or("attention.sliding_window", 4096, 1, int64_t{1} << 30);  // Gemma 2's own default
    swa_.pattern = 2;
    attn_softcap_ = r.float_or("attn_logit_softcapping", 50.0f, 0.0f, 1e6f);
    final_softcap_ = r.float_or("final_logit_softcapping", 30.0f, 0.0f, 1e6f);
  }
};

class Gemma3 final : public Gemma {
 public:
  Gemma3(const HparamReader& r, const Hparams& h) : Gemma(r, h, 62) {
    swa_.n = r.int_or("attention.sliding_window", 0, 0, int64_t{1} << 30);
    swa_.pattern = swa_.n > 0 ? r.int_or("attention.sliding_window_pattern", 6, 1, h.n_layer + 1) : 1;
    swa_.rope.freq_base = r.float_or("rope.freq_base_swa", 10000.0f, 1e-3f, 1e30f);
    swa_.rope.freq_scale = 1.0f;
    qk_norms_ = true;
  }
};

}  // namespace

void register_gemma(ArchitectureRegistry& r) {
  r.add<Gemma2>("gemma2");
  r.add<Gemma3>("gemma3");
}

}  // namespace tessera::llm
