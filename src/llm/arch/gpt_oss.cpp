// The gpt-oss architecture (OpenAI gpt-oss; llama.cpp's openai-moe graph): Q/K/V and output
// projections with biases; a learned sink logit per head in every softmax; a sliding window on
// the even layers (all but the last of each attention.sliding_window_pattern, default 2), full
// attention on the others; NEOX rope with the file's YaRN scaling on every layer; post_attention_norm
// as the FFN's input norm; a mixture of experts in every layer with the router's bias, the
// largest expert_used_count logits picked and a softmax over just those, the experts' biases and
// the clamped SwiGLU (alpha 1.702, limit 7).
#include "architecture.h"

namespace tessera::llm {
namespace {

class GptOss final : public DecoderModel {
 public:
  GptOss(const HparamReader& r, const Hparams& h) : DecoderModel(r, h) {
    require_experts(r, h);
    n_ff_exp_ = r.required_int("expert_feed_forward_length", 1, int64_t{1} << 20);
    swa_.n = r.required_int("attention.sliding_window", 1, int64_t{1} << 30);
    swa_.pattern = r.int_or("attention.sliding_window_pattern", 2, 1, int64_t{1} << 20);
    swa_.rope = rope_;
    swa_.rope.freq_base = r.float_or("rope.freq_base_swa", rope_.freq_base, 1e-3f, 1e30f);
  }

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_attention_biases(il, l.attn, /*optional=*/false);
      p.add_layer_bias(il, l.attn.bo, "attn_output", h.n_embd);
      p.add_layer(il, l.attn.sinks, "attn_sinks", h.n_head);
      p.add_moe_ffn(il, l, n_ff_exp_, "post_attention_norm", /*biases=*/true);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    const Hparams& h = b.model.hparams();
    DecoderParams p = decoder([&](int64_t il) { return layer_attention(h, il, RopeMode::Neox); });
    p.moe.softmax_of_selected = true;
    p.moe.swiglu_oai = true;
    return pre_norm_decoder(b, layers_, p);
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Neox, nullptr);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    llm::describe(out, "n_ff_exp", n_ff_exp_);
  }

 private:
  int64_t n_ff_exp_ = 0;
};

}  // namespace

void register_gpt_oss(ArchitectureRegistry& r) { r.add<GptOss>("gpt-oss"); }

}  // namespace tessera::llm
