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
    n_swa_ = r.required_int("attention.sliding_window", 1, int64_t{1} << 30);
    swa_pattern_ = r.int_or("attention.sliding_window_pattern", 2, 1, int64_t{1} << 20);
    rope_swa_ = rope_;
    rope_swa_.freq_base = r.float_or("rope.freq_base_swa", rope_.freq_base, 1e-3f, 1e30f);
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
    const AttentionParams every = roped(h, RopeMode::Neox);
    DecoderParams p = decoder([&](int64_t il) {
      AttentionParams ap = every;
      ap.rope = rope_of_layer(h, il);
      ap.window = windowed(il) ? static_cast<int32_t>(n_swa_) : 0;
      return ap;
    });
    p.moe.softmax_of_selected = true;
    p.moe.swiglu_oai = true;
    return pre_norm_decoder(b, layers_, p);
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    const Hparams& h = b.model.hparams();
    rope_shift_k(
        b, shifts, [&](int64_t il) { return std::optional(rope_of_layer(h, il)); }, nullptr);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    describe_rope(rope_swa_, "rope_swa_", out);
    llm::describe(out, "n_ff_exp", n_ff_exp_);
    llm::describe(out, "n_swa", n_swa_);
    llm::describe(out, "swa_pattern", swa_pattern_);
  }

 private:
  bool windowed(int64_t il) const { return il % swa_pattern_ < swa_pattern_ - 1; }
  ops::RopeParams rope_of_layer(const Hparams& h, int64_t il) const {
    return rope_params(h, windowed(il) ? rope_swa_ : rope_, RopeMode::Neox);
  }

  RopeHparams rope_swa_;  // the windowed layers' rope (rope.freq_base_swa)
  int64_t n_ff_exp_ = 0, n_swa_ = 0, swa_pattern_ = 2;
};

}  // namespace

void register_gpt_oss(ArchitectureRegistry& r) { r.add<GptOss>("gpt-oss"); }

}  // namespace tessera::llm
