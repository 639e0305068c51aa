// The smollm3 architecture (Hugging Face SmolLM3): the llama decoder without rope on every 4th
// layer (layers 3, 7, 11, ...: a fixed step, as llama.cpp has it; no key carries it), NORMAL rope on
// the others, optional Q/K/V biases.
#include "architecture.h"
#include "core/check.h"

namespace tessera::llm {
namespace {

class SmolLm3 final : public DecoderModel {
 public:
  SmolLm3(const HparamReader& r, const Hparams& h) : DecoderModel(r, h) {
    require_full_rope(r, h);
    if (r.has("attention.scale"))  // llama.cpp's smollm3 reads no attention scale
      raise(ErrorCode::Unsupported, "hyperparameter {} is not supported for smollm3",
            r.full("attention.scale"));
  }

  void declare_weights(WeightPlan& p) override {
    p.require_every_tensor_read();
    declare_decoder(p, [&](int64_t il, DecoderLayer& l) {
      p.add_attention_biases(il, l.attn, /*optional=*/true);
      p.add_gated_ffn(il, l);
    });
  }

  Tensor* build(GraphBuild& b) const override {
    const AttentionParams roped_layer = roped(b.model.hparams(), RopeMode::Normal);
    return pre_norm_decoder(b, layers_, decoder([roped_layer](int64_t il) {
                              AttentionParams ap = roped_layer;
                              ap.use_rope = has_rope(il);
                              return ap;
                            }));
  }

  void build_k_shift(GraphBuild& b, Tensor* shifts) const override {
    shift_k(b, shifts, RopeMode::Normal, nullptr, has_rope);
  }

  void describe(HparamList& out) const override {
    DecoderModel::describe(out);
    llm::describe(out, "no_rope_layer_step", kNoRopeLayerStep);
  }

 private:
  static constexpr int64_t kNoRopeLayerStep = 4;
  static bool has_rope(int64_t il) { return (il + 1) % kNoRopeLayerStep != 0; }
};

}  // namespace

void register_smollm3(ArchitectureRegistry& r) { r.add<SmolLm3>("smollm3"); }

}  // namespace tessera::llm
