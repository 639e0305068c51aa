// The smollm3 architecture (Hugging Face SmolLM3): the llama decoder without rope on every 4th
// layer (layers 3, 7, 11, ...: a fixed step, as llama.cpp has it; no key carries it), NORMAL rope on
// the others, optional Q/K/V biases.
#include <cmath>

#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

void read_hparams(const HparamReader& r, Hparams& h) {
  require_full_rope(r, h);
  h.no_rope_layer_step = 4;
  if (r.has("attention.scale"))  // llama.cpp's smollm3 reads no attention scale
    raise(ErrorCode::Unsupported, "hyperparameter {} is not supported for smollm3",
          r.full("attention.scale"));
}

void declare_weights(WeightPlan& p) {
  const Hparams& h = p.hparams();
  p.require_every_tensor_read();
  p.add_embeddings_and_output();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    p.add_attention(il);
    p.add_attention_biases(il);
    p.add_gated_ffn(il);
  }
}

ops::RopeParams rope_of_layer(const Hparams& h, int64_t) { return rope_params(h, RopeMode::Normal); }

Tensor* build(GraphBuild& b) {
  const Hparams& h = b.model.hparams();
  AttentionParams ap = roped_attention(h, rope_of_layer(h, 0));
  return pre_norm_decoder(b, ap);
}

void build_k_shift(GraphBuild& b, Tensor* shifts) { rope_shift_k(b, shifts, rope_of_layer, nullptr); }

}  // namespace

const Architecture kSmolLm3Architecture{"smollm3", read_hparams, declare_weights, build, build_k_shift};

}  // namespace tessera::llm
