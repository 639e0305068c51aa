// The nomic-bert architecture (nomic-embed-text v1/v1.5): bert's encoder (blocks.h, `encoder`)
// with NEOX rope on Q and K instead of learned positions, Q/K/V usually in one fused projection
// without biases, and a SILU-gated FFN (ffn_gate, ffn_up, ffn_down) without biases, as llama.cpp
// builds it.
#include <cmath>

#include "architecture.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) { read_encoder_hparams(r, h); }

void declare_weights(WeightPlan& p) { declare_encoder_weights(p, /*gated_ffn=*/true); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap;
  ap.rope = rope_params(h, RopeMode::Neox);
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  return encoder(b, ap);
}

}  // namespace

const Architecture kNomicBertArchitecture{"nomic-bert", read_hparams, declare_weights, build, no_k_shift};

}  // namespace tessera::llm
