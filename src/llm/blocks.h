#pragma once
// What an architecture's graph builder works with for one micro-batch (GraphBuild), and the
// blocks that architectures share: norms, attention over the KV cache, gated feed-forward, experts,
// the decoders and the encoder made of them, and the rope hyperparameters most of them read.
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "llm/hparam_reader.h"
#include "llm/layer_weights.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/llm/kv_cache.h"
#include "tessera/llm/model.h"
#include "tessera/ops.h"

namespace tessera::llm {

// Batch tokens [token, token + n) store their K/V in cells [cell, cell + n).
struct KvRun {
  int64_t token = 0, cell = 0, n = 0;
};

// One micro-batch's graph under construction. Input tensors have no memory yet: the Session
// places and fills them once the builder is done.
struct GraphBuild {
  GraphBuild(Context& c, Graph& g, const Model& m, KvCache& kv)
      : ctx(c), graph(g), model(m), cache(kv), layers{m.first_layer(), m.end_layer()} {}

  Context& ctx;
  Graph& graph;
  const Model& model;
  KvCache& cache;
  int64_t n_tokens = 0;
  int64_t n_kv = 0;         // cells attended: [0, n_kv), padded so that shapes repeat between tokens
  bool flash_attn = false;  // attention asks the CPU for its online-softmax kernel (FlashAttnParams)
  bool embeddings = false;  // the decoders return the normed hidden states (result_norm), not logits
  std::vector<KvRun> runs;
  Tensor* tokens = nullptr;                        // I32 [n_tokens]
  Tensor* positions = nullptr;                     // I32 [n_tokens]
  std::vector<int32_t> out_rows;                   // batch rows whose logits are wanted, ascending
  Tensor* out_ids = nullptr;                       // I32 [out_rows] when a GET_ROWS selects them
  std::vector<std::pair<int32_t, Tensor*>> masks;  // (window, F32 [n_kv, n_tokens]); 0: no window
  // Encoders: F32 [n_tokens, n_tokens], 0 where two batch tokens share a sequence, else -inf.
  Tensor* seq_mask = nullptr;
  // A later pipeline stage's input (Model::first_stage() false): F32 [n_embd, n_tokens], the
  // hidden states the previous stage computed.
  Tensor* hidden_in = nullptr;
  // The layers this graph computes: the model's (a pipeline stage's) unless a Session pipelining
  // micro-batches across devices builds one graph per device's range. A range that does not
  // start the model takes hidden_in; one that does not end it returns the hidden states.
  LayerRange layers;
  bool ends_model() const { return layers.end == model.end_layer() && model.last_stage(); }

  // The first layer's input: hidden_in on a later pipeline stage, else what embed() builds.
  template <typename Embed>
  Tensor* stage_input(Embed&& embed) {
    return hidden_in != nullptr ? hidden_in : embed();
  }

  // The KQ mask for a sliding window (0: none), made on first use.
  Tensor* kq_mask(int32_t window);
  // The encoders' mask over the batch's own tokens (seq_mask), made on first use.
  Tensor* batch_mask();
  // The rows of x ([n, n_tokens]) whose logits are wanted.
  Tensor* select_outputs(Tensor* x);
  // Names a node "what.il" (il < 0: "what") so that placement reports and errors are readable.
  static Tensor* named(Tensor* t, const char* what, int64_t il = -1);
};

// RMS_NORM(x) * weight.
Tensor* rms_norm(GraphBuild& b, Tensor* x, Tensor* weight, float eps, const char* what, int64_t il);
// NORM(x) * weight + bias (bias optional).
Tensor* layer_norm(GraphBuild& b, Tensor* x, Tensor* weight, Tensor* bias, float eps, const char* what,
                   int64_t il);

// The rope of a decoder: <arch>.rope.freq_base and the scaling keys (rope.scaling.type none,
// linear or yarn with its factor and original context; the older rope.scale_linear).
struct RopeHparams {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
  float yarn_ext_factor = 0.0f;
  float attn_factor = 1.0f;  // rope.scaling.attn_factor (Phi-3's long-context rope)
  int64_t n_ctx_orig = 0;
};
// Reads them (an Error naming a bad key; an unknown scaling type is Unsupported).
RopeHparams read_rope_hparams(const HparamReader& r, const Hparams& h);
// <arch>.attention.layer_norm_rms_epsilon (1e-5 when absent).
float read_rms_eps(const HparamReader& r);
// Appends rope's fields to `out` as "<prefix>freq_base" and so on.
void describe_rope(const RopeHparams& rope, const char* prefix, HparamList& out);
// An architecture's own value in Model::hyperparameters() (fmt's text: floats shortest).
template <typename T>
void describe(HparamList& out, const char* name, const T& value) {
  out.emplace_back(name, fmt::format("{}", value));
}

// The ROPE op's parameters for `rope` over n_rot dimensions.
ops::RopeParams rope_params(const Hparams& h, const RopeHparams& rope, RopeMode mode);

struct AttentionParams {
  ops::RopeParams rope;
  Tensor* freq_factors = nullptr;  // F32 [n_rot / 2] or nullptr
  float q_scale = 0.0f;            // Q is scaled by this before KQ (0: not scaled)
  float kq_scale = 1.0f;           // the scale of KQ
  float softcap = 0.0f;            // the scaled KQ s becomes softcap * tanh(s / softcap) (0: none)
  int32_t window = 0;              // sliding window in positions; 0: attend to the whole sequence
  float qk_norm_eps = 1e-5f;       // the epsilon of the Q/K RMS norms, where the layer has them
  // false: no ROPE on Q and K (BERT's learned positions; the layers without rope of SmolLM3 and of
  // Granite's rope.scaling.finetuned = false)
  bool use_rope = true;
};

// The usual decoder attention: `rope` on Q and K, KQ scaled by 1/sqrt(head_dim).
AttentionParams roped_attention(const Hparams& h, const ops::RopeParams& rope);

// Self-attention of layer il over the normed input `cur` ([n_embd, n_tokens]): Q/K/V projections
// (fused wqkv or separate, with the layer's biases when it has them), Q/K RMS norms when the layer
// has them (per head for a weight one head wide, else over the whole projection: OLMoE), ROPE at the
// batch positions (unless !p.use_rope), K/V stored at the batch's cells, softmax over
// the cache cells under the mask (K/V heads shared by groups of n_head / n_head_kv query heads;
// the layer's attention sinks, when it has them, join every softmax denominator), output
// projection (plus its bias where the layer has one). The softmax attention is one FLASH_ATTN_EXT
// node, whatever the backend.
Tensor* attention(GraphBuild& b, const AttentionWeights& w, int64_t il, Tensor* cur,
                  const AttentionParams& p);

// Attention of an encoder (bert, nomic-bert): Q/K/V as in attention() (fused wqkv with its bias
// or separate with theirs), ROPE unless !p.use_rope, then every token attends to every token of its
// own sequence in this batch (GraphBuild::batch_mask), without the KV cache: an encoder evaluates
// each sequence whole, in one batch. Output projection with its bias when the layer has one.
Tensor* encoder_attention(GraphBuild& b, const AttentionWeights& w, int64_t il, Tensor* cur,
                          const AttentionParams& p);

enum class FfnActivation { Silu, Gelu };
// down(act(gate cur + gate_b) * (up cur + up_b)) + down_b (each bias where there is one); with no
// gate matrix, up's 2 * n_ff rows are gate then up. Nodes are named "<what>_gate" and so on.
Tensor* gated_ffn(GraphBuild& b, const FfnWeights& w, const char* what, int64_t il, Tensor* cur,
                  FfnActivation act);

// How a mixture of experts routes and activates (llama.cpp's gating functions and FFN ops).
struct MoeParams {
  // false (Mixtral, Qwen3-MoE): the softmax over every router logit picks, and the picked
  // probabilities renormalised to sum 1 weight. true (gpt-oss, SOFTMAX_WEIGHT): the largest logits
  // pick, and the softmax over just those weights.
  bool softmax_of_selected = false;
  // With softmax_of_selected false: whether the picked probabilities are renormalised to sum 1
  // (Mixtral, Qwen3-MoE, granitemoe) or weight as they are (OLMoE).
  bool renormalize = true;
  // false: SILU(gate) * up; true: gpt-oss's clamped SwiGLU (GLU SWIGLU_OAI, alpha 1.702, limit 7).
  bool swiglu_oai = false;
};

// The mixture-of-experts FFN (llama.cpp's build_moe_ffn): logits = ffn_gate_inp cur (+
// ffn_gate_inp_b); the n_expert_used largest (ARGSORT descending, a VIEW of its first entries) pick
// the experts, weighted as p says; each picked expert computes down(act(gate cur, up cur))
// (MUL_MAT_ID; each product plus its expert's bias row by ADD_ID where the layer has them), scaled
// by its weight; the experts' outputs are summed, plus the shared expert's output where there is one.
Tensor* moe_ffn(GraphBuild& b, const MoeWeights& w, int64_t il, Tensor* cur, const MoeParams& p = {});

// An encoder's weights (bert, nomic-bert): token embeddings plus token type 0's (type_embd) and
// learned positions (pos_embd) where it has them, their LayerNorm, then per layer the attention,
// its output's LayerNorm, the FFN and the layer output's LayerNorm (each with its bias).
struct EncoderLayer {
  AttentionWeights attn;
  Tensor *attn_out_norm = nullptr, *attn_out_norm_b = nullptr;
  FfnWeights ffn;
  Tensor *layer_out_norm = nullptr, *layer_out_norm_b = nullptr;
};
struct EncoderWeights {
  Tensor *type_embd = nullptr, *pos_embd = nullptr, *tok_norm = nullptr, *tok_norm_b = nullptr;
  std::vector<EncoderLayer> layers;
};

// The encoder stack: x = token embeddings (+ token type 0's embedding, + the learned position
// embeddings when the model has them), LayerNorm; per layer x = LN(x + encoder_attention(x)),
// x = LN(x + ffn(x)) with ffn BERT's GELU MLP with biases (gelu_ffn) or, with a gate, the
// SILU-gated one (nomic-bert); returns the wanted rows' hidden states (no final norm, no logits).
Tensor* encoder(GraphBuild& b, const EncoderWeights& w, float norm_eps, const AttentionParams& ap);

// down(GELU(up cur + up_b)) + down_b: BERT's feed-forward (biases optional).
Tensor* gelu_ffn(GraphBuild& b, const FfnWeights& w, int64_t il, Tensor* cur);

// c * tanh(x / c): soft-capping of attention or output logits.
Tensor* soft_cap(GraphBuild& b, Tensor* x, float c, const char* what, int64_t il);

// Every decoder below computes the layers GraphBuild::layers names only; a graph that does not end
// the model (a pipeline stage, a device's share) returns every token's hidden state after its last
// layer ([n_embd, n_tokens]: the next one's input) instead of logits.

// How a pre-norm decoder's layers attend and what it scales.
struct DecoderParams {
  float rms_eps = 1e-5f;
  // Layer il's attention (rope, scales, window).
  std::function<AttentionParams(int64_t il)> attention;
  MoeParams moe;  // for the layers with experts (DecoderLayer::moe.router)
  // Granite's scales (0: none): token embeddings times embedding_scale, each block's output times
  // residual_scale before its residual add, logits divided by logit_scale.
  float embedding_scale = 0.0f;
  float residual_scale = 0.0f;
  float logit_scale = 0.0f;
  float final_softcap = 0.0f;  // logits become c * tanh(logits / c) (Gemma 2; 0: not)
};
// Layer il's attention is p(il) for every layer: the usual case.
std::function<AttentionParams(int64_t)> every_layer(const AttentionParams& p);

// The pre-norm decoder that llama, qwen2, qwen3, qwen3moe, phi3, granite, granitemoe, olmoe,
// smollm3 and gpt-oss share: x = embeddings (times embedding_scale when set); per layer
// x += attention(RMS_NORM(x) * attn_norm), x += ffn(RMS_NORM(x) * ffn_norm) with ffn the SILU-gated
// FFN, or moe_ffn where the layer has a router; each block's output times residual_scale when set;
// logits = output(RMS_NORM(x) * output_norm) for the wanted rows, divided by logit_scale when set.
Tensor* pre_norm_decoder(GraphBuild& b, std::span<const DecoderLayer> layers, const DecoderParams& p);

// The decoder Gemma 2 and 3 share: x = embeddings * sqrt(n_embd); per layer
// x += RMS_NORM(attention(RMS_NORM(x) * attn_norm)) * post_attn_norm,
// x += RMS_NORM(gated_ffn(RMS_NORM(x) * ffn_norm) with GELU) * post_ffn_norm;
// logits = output(RMS_NORM(x) * output_norm), soft-capped by p.final_softcap when set.
Tensor* sandwich_norm_decoder(GraphBuild& b, std::span<const DecoderLayer> layers, const DecoderParams& p);

// Re-ropes every layer's cached K by each cell's recorded shift (KvCache::seq_shift): `shifts` is
// I32 [n_cells]; rope(il) gives layer il's rope, nullopt for a layer without rope (its K carries no
// position). Refuses YaRN scaling (an Unsupported error: its magnitude factor does not compose by
// differences).
void rope_shift_k(GraphBuild& b, Tensor* shifts,
                  const std::function<std::optional<ops::RopeParams>(int64_t il)>& rope,
                  Tensor* freq_factors);

}  // namespace tessera::llm
