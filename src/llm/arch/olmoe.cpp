// The olmoe architecture (AllenAI OLMoE): the llama decoder with RMS norms of the whole Q and K
// projections (attn_q_norm / attn_k_norm as wide as them, before the split into heads), NEOX rope,
// and a mixture of experts in every layer, feed_forward_length wide, routed by softmax over the
// router's logits with the picked probabilities weighting as they are (not renormalised).
#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class Olmoe final : public DecoderModel {
 public:
  Olmoe(const HparamReader& r, const Hparams& h) : DecoderModel(r, h) {
    require_full_rope(r, h);
    require_experts(r, h);
    // llama.cpp's olmoe normalises Q and K with n_embd-wide weights: both projections are n_embd wide.
    if (h.n_embd_q() != h.n_embd || h.n_embd_kv() != h.n_embd)
      raise(ErrorCode::Unsupported,
            "hyperparameters: olmoe with Q ({}) or K ({}) projections narrower or wider than {} = {} is not "
            "supported",
            h.n_embd_q(), h.n_embd_kv(), r.full("embedding_length"), h.n_embd);
    refuse_other_moe_routing(r, /*renormalized=*/false);
  }

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    p.require_every_tensor_read();
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_qk_norms(il, l.attn, h.n_embd_q(), h.n_embd_kv());
      p.add_moe_ffn(il, l, h.n_ff);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    DecoderParams p = decoder(every_layer(roped(b.model.hparams(), RopeMode::Neox)));
    p.moe.renormalize = false;
    return pre_norm_decoder(b, layers_, p);
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Neox, nullptr);
  }
};

}  // namespace

void register_olmoe(ArchitectureRegistry& r) { r.add<Olmoe>("olmoe"); }

}  // namespace tessera::llm
