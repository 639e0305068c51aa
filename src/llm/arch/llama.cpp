// The llama architecture (Llama 1/2/3, Mistral, SmolLM; see ../shared/OPS.md, "The llama
// architecture"): pre-norm attention and SILU-gated FFN blocks, NORMAL rope with the file's
// freq factors (Llama 3.1 rope scaling) when it has them.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

ops::RopeParams rope_params(const Hparams& h) {
  ops::RopeParams rp;
  rp.n_dims = static_cast<int>(h.n_rot);
  rp.mode = RopeMode::Normal;
  rp.n_ctx_orig = static_cast<int>(h.rope_n_ctx_orig);
  rp.freq_base = h.rope_freq_base;
  rp.freq_scale = h.rope_freq_scale;
  rp.ext_factor = h.rope_yarn_ext_factor;
  return rp;
}

Tensor* build(GraphBuild& b) {
  const Model& m = b.model;
  const Hparams& h = m.hparams();
  AttentionParams ap;
  ap.rope = rope_params(h);
  ap.freq_factors = m.rope_freqs();
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));

  Tensor* x = GraphBuild::named(ops::get_rows(b.ctx, m.token_embd(), b.tokens), "embd");
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const Layer& l = m.layers()[static_cast<size_t>(il)];
    Tensor* cur = rms_norm(b, x, l.attn_norm, h.rms_eps, "attn_in", il);
    cur = attention(b, l, il, cur, ap);
    x = GraphBuild::named(ops::add(b.ctx, x, cur), "attn_residual", il);
    cur = rms_norm(b, x, l.ffn_norm, h.rms_eps, "ffn_in", il);
    cur = gated_ffn(b, l, il, cur, FfnActivation::Silu);
    x = GraphBuild::named(ops::add(b.ctx, x, cur), "l_out", il);
  }
  x = b.select_outputs(x);
  x = rms_norm(b, x, m.output_norm(), h.rms_eps, "result_norm", -1);
  return GraphBuild::named(ops::mul_mat(b.ctx, m.output(), x), "logits");
}

void build_k_shift(GraphBuild& b, Tensor* shifts) {
  // YaRN scales magnitudes as it rotates: rotating twice would scale twice.
  if (b.model.hparams().rope_yarn_ext_factor != 0.0f)
    raise(ErrorCode::Unsupported, "shifting positions is not supported with YaRN rope scaling");
  rope_shift_k(b, shifts, rope_params(b.model.hparams()), b.model.rope_freqs());
}

}  // namespace

const Architecture kLlamaArchitecture{"llama", build, build_k_shift};

}  // namespace tessera::llm
