#include "llm/arch/architecture.h"

#include "core/check.h"

namespace tessera::llm {

const ArchitectureRegistry& ArchitectureRegistry::instance() {
  static const ArchitectureRegistry registry = [] {
    ArchitectureRegistry r;
    register_architectures(r);
    return r;
  }();
  return registry;
}

ArchitectureFactory ArchitectureRegistry::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return e.factory;
  raise(ErrorCode::Unsupported, "model architecture '{}' is not supported (supported: {})", name, names());
}

std::string ArchitectureRegistry::names() const {
  std::string out;
  for (const Entry& e : entries_) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

void DecoderModel::describe(HparamList& out) const {
  describe_rope(rope_, "rope_", out);
  llm::describe(out, "rms_eps", rms_eps_);
  if (swa_.n == 0) return;
  describe_rope(swa_.rope, "rope_swa_", out);
  llm::describe(out, "n_swa", swa_.n);
  llm::describe(out, "swa_pattern", swa_.pattern);
}

AttentionParams DecoderModel::roped(const Hparams& h, RopeMode mode) const {
  AttentionParams ap = roped_attention(h, rope_params(h, rope_, mode));
  ap.qk_norm_eps = rms_eps_;
  return ap;
}

AttentionParams DecoderModel::layer_attention(const Hparams& h, int64_t il, RopeMode mode) const {
  AttentionParams ap = roped(h, mode);
  if (swa_.covers(il)) {
    ap.rope = rope_params(h, swa_.rope, mode);
    ap.window = static_cast<int32_t>(swa_.n);
  }
  return ap;
}

DecoderParams DecoderModel::decoder(std::function<AttentionParams(int64_t)> attention) const {
  DecoderParams p;
  p.rms_eps = rms_eps_;
  p.attention = std::move(attention);
  return p;
}

void DecoderModel::shift_k(GraphBuild& b, Tensor* shifts, RopeMode mode, Tensor* freq_factors,
                           bool (*has_rope)(int64_t il)) const {
  const Hparams& h = b.model.hparams();
  rope_shift_k(
      b, shifts,
      [&](int64_t il) -> std::optional<ops::RopeParams> {
        if (has_rope != nullptr && !has_rope(il)) return std::nullopt;
        return layer_attention(h, il, mode).rope;
      },
      freq_factors);
}

void require_full_rope(const HparamReader& r, const Hparams& h) {
  if (h.n_rot != h.head_dim())
    raise(ErrorCode::Unsupported,
          "hyperparameter {} = {}: rope over part of a head ({}) is not supported here",
          r.full("rope.dimension_count"), h.n_rot, h.head_dim());
  if (h.head_dim_v() != h.head_dim())
    raise(ErrorCode::Unsupported,
          "hyperparameters: value heads of {} with key heads of {} are not supported here", h.head_dim_v(),
          h.head_dim());
}

void refuse_other_moe_routing(const HparamReader& r, bool renormalized) {
  // The graph routes by a softmax over the router's logits, renormalised or not as the architecture
  // has it and unscaled: keys asking for anything else are refused rather than ignored.
  if (r.has("expert_gating_func") && r.int_or("expert_gating_func", 1, 0, 1 << 20) != 1)
    raise(ErrorCode::Unsupported, "hyperparameter {} = {}: only softmax gating (1) is supported here",
          r.full("expert_gating_func"), r.int_or("expert_gating_func", 1, 0, 1 << 20));
  if (r.has("expert_weights_norm") && r.bool_or("expert_weights_norm", renormalized) != renormalized)
    raise(ErrorCode::Unsupported,
          "hyperparameter {} = {} is not supported: this architecture's weights are {}",
          r.full("expert_weights_norm"), !renormalized, renormalized ? "renormalised" : "not renormalised");
  if (const float s = r.float_or("expert_weights_scale", 1.0f, -1e30f, 1e30f); s != 0.0f && s != 1.0f)
    raise(ErrorCode::Unsupported, "hyperparameter {} = {} is not supported (only 1)",
          r.full("expert_weights_scale"), s);
  if (r.int_or("expert_shared_count", 0, 0, 1 << 20) != 0)
    raise(ErrorCode::Unsupported, "hyperparameter {} is not supported here", r.full("expert_shared_count"));
}

void require_experts(const HparamReader& r, const Hparams& h) {
  if (h.n_expert == 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} is required (and must be positive)",
          r.full("expert_count"));
}

}  // namespace tessera::llm
