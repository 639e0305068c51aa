// The qwen2 architecture (Qwen2, Qwen2.5): the llama decoder with biases on the Q, K and V
// projections and NEOX rope.
#include "architecture.h"

namespace tessera::llm {
namespace {

class Qwen2 final : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void declare_weights(WeightPlan& p) override {
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_attention_biases(il, l.attn, /*optional=*/false);
      p.add_gated_ffn(il, l);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    return pre_norm_decoder(b, layers_, decoder(every_layer(roped(b.model.hparams(), RopeMode::Neox))));
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Neox, nullptr);
  }
};

}  // namespace

void register_qwen2(ArchitectureRegistry& r) { r.add<Qwen2>("qwen2"); }

}  // namespace tessera::llm
