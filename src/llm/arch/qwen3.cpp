// The qwen3 architecture (Qwen3 dense): the llama decoder with per-head RMS norms of Q and K
// before rope, head sizes from attention.key_length / value_length, and NEOX rope. And qwen3moe
// (Qwen3-MoE, e.g. Qwen3-30B-A3B): the same attention with a mixture-of-experts FFN in every layer
// (moe_ffn: softmax over the router's logits, the top expert_used_count renormalised), each expert
// expert_feed_forward_length wide (absent: feed_forward_length / expert_used_count, as llama.cpp).
#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class Qwen3 : public DecoderModel {
 public:
  using DecoderModel::DecoderModel;

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_qk_norms(il, l.attn, h.head_dim(), h.head_dim());
      if (n_ff_exp_ > 0)
        p.add_moe_ffn(il, l, n_ff_exp_);
      else
        p.add_gated_ffn(il, l);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    return pre_norm_decoder(b, layers_, decoder(every_layer(roped(b.model.hparams(), RopeMode::Neox))));
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Neox, nullptr);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    if (n_ff_exp_ > 0) llm::describe(out, "n_ff_exp", n_ff_exp_);
  }

 protected:
  int64_t n_ff_exp_ = 0;  // each expert's width (qwen3moe); 0: a dense FFN
};

class Qwen3Moe final : public Qwen3 {
 public:
  Qwen3Moe(const HparamReader& r, const Hparams& h) : Qwen3(r, h) {
    require_experts(r, h);
    n_ff_exp_ = r.int_or("expert_feed_forward_length", h.n_ff / h.n_expert_used, 1, int64_t{1} << 20);
    if (n_ff_exp_ < 1)
      raise(ErrorCode::CorruptFile, "hyperparameters: {} is 0", r.full("expert_feed_forward_length"));
  }
};

}  // namespace

void register_qwen3(ArchitectureRegistry& r) {
  r.add<Qwen3>("qwen3");
  r.add<Qwen3Moe>("qwen3moe");
}

}  // namespace tessera::llm
