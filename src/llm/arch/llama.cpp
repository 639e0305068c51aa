// The llama architecture (Llama 1/2/3, Mistral, SmolLM; see ../shared/OPS.md, "The llama
// architecture"): pre-norm attention and SILU-gated FFN blocks, NORMAL rope with the file's
// freq factors (Llama 3.1 rope scaling) when it has them. With llama.expert_count (Mixtral) every
// layer's FFN is a mixture of experts (moe_ffn), each expert feed_forward_length wide.
#include "architecture.h"

namespace tessera::llm {
namespace {

class Llama final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    p.add(rope_freqs_, "rope_freqs.weight", h.n_rot / 2, 1, kPlaceEveryLayer, /*optional=*/true);
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      if (h.n_expert > 0)
        p.add_moe_ffn(il, l, h.n_ff);
      else
        p.add_gated_ffn(il, l);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    AttentionParams ap = roped(b.model.hparams(), RopeMode::Normal);
    ap.freq_factors = rope_freqs_;
    return pre_norm_decoder(b, layers_, decoder(every_layer(ap)));
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    // YaRN scales magnitudes as it rotates: rotating twice would scale twice (rope_shift_k refuses).
    shift_k(b, shifts, RopeMode::Normal, rope_freqs_);
  }

 private:
  Tensor* rope_freqs_ = nullptr;  // F32 [n_rot / 2] rope frequency factors (Llama 3.1), or none
};

}  // namespace

void register_llama(ArchitectureRegistry& r) { r.add<Llama>("llama"); }

}  // namespace tessera::llm
