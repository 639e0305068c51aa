// The phi3 architecture (Phi-3, Phi-3.5 and Phi-4 mini): the llama decoder with Q, K and V in one
// fused projection (attn_qkv), gate and up in one fused ffn_up of 2 * n_ff rows, NEOX rope with the
// file's long/short rope factors when it has them, Q scaled before KQ, and usually a tied output.
// Its attention.sliding_window key is ignored, as llama.cpp does (the converters fill it
// inconsistently).
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class Phi3 final : public DecoderModel {
 public:
  Phi3(const HparamReader& r, const Hparams& h) : DecoderModel(r, h) {
    // Long-context files (LongRoPE) state the context their short factors serve and the scale that
    // the rope applies to magnitudes with the long ones.
    rope_.n_ctx_orig =
        r.int_or("rope.scaling.original_context_length", rope_.n_ctx_orig, 1, int64_t{1} << 30);
    rope_.attn_factor = r.float_or("rope.scaling.attn_factor", 1.0f, 1e-3f, 1e3f);
  }

  void declare_weights(WeightPlan& p) override {
    const Hparams& h = p.hparams();
    p.add_embeddings_and_output();
    p.add(factors_long_, "rope_factors_long.weight", h.n_rot / 2, 1, kPlaceEveryLayer, true);
    p.add(factors_short_, "rope_factors_short.weight", h.n_rot / 2, 1, kPlaceEveryLayer, true);
    for (int64_t il = 0; il < h.n_layer; ++il) {
      DecoderLayer& l = layers_[static_cast<size_t>(il)];
      p.add_layer(il, l.attn_norm, "attn_norm", h.n_embd);
      p.add_layer(il, l.attn.wqkv, "attn_qkv", h.n_embd, h.n_embd_q() + h.n_embd_kv() + h.n_embd_v_kv());
      p.add_layer(il, l.attn.wo, "attn_output", h.head_dim_v() * h.n_head, h.n_embd);
      p.add_layer(il, l.ffn_norm, "ffn_norm", h.n_embd);
      p.add_layer(il, l.ffn.up, "ffn_up", h.n_embd, 2 * h.n_ff);
      p.add_layer(il, l.ffn.down, "ffn_down", h.n_ff, h.n_embd);
    }
  }

  Tensor* build(GraphBuild& b) const override {
    const Hparams& h = b.model.hparams();
    AttentionParams ap = roped(h, RopeMode::Neox);
    ap.freq_factors = rope_factors(b);
    ap.q_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
    ap.kq_scale = 1.0f;
    return pre_norm_decoder(b, layers_, decoder(every_layer(ap)));
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    if (rope_.yarn_ext_factor != 0.0f || rope_.attn_factor != 1.0f)
      raise(ErrorCode::Unsupported, "shifting positions is not supported with a rope that scales magnitudes");
    shift_k(b, shifts, RopeMode::Neox, rope_factors(b));
  }

 private:
  // The long factors when the cache holds more positions than the original context, else the short.
  Tensor* rope_factors(const GraphBuild& b) const {
    const bool long_context = b.cache.size() > rope_.n_ctx_orig;
    Tensor* f = long_context ? factors_long_ : factors_short_;
    return f != nullptr ? f : (long_context ? factors_short_ : factors_long_);
  }

  Tensor* factors_long_ = nullptr;   // rope factors past the original context
  Tensor* factors_short_ = nullptr;  // ... and within it
};

}  // namespace

void register_phi3(ArchitectureRegistry& r) { r.add<Phi3>("phi3"); }

}  // namespace tessera::llm
