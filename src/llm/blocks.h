#pragma once
// What an architecture's graph builder works with for one micro-batch (GraphBuild), and the
// blocks that architectures share: norms, attention over the KV cache, gated feed-forward.
#include <cstdint>
#include <utility>
#include <vector>

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

// Rope at the file's base and scale, or for a windowed layer (windowed: the architecture has a
// local rope base) at rope_freq_base_swa / rope_freq_scale_swa.
ops::RopeParams rope_params(const Hparams& h, RopeMode mode, bool windowed = false);

struct AttentionParams {
  ops::RopeParams rope;
  Tensor* freq_factors = nullptr;  // F32 [n_rot / 2] or nullptr
  float q_scale = 0.0f;            // Q is scaled by this before KQ (0: not scaled)
  float kq_scale = 1.0f;           // the scale of KQ
  float softcap = 0.0f;            // the scaled KQ s becomes softcap * tanh(s / softcap) (0: none)
  int32_t window = 0;              // sliding window in positions; 0: attend to the whole sequence
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
Tensor* attention(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, const AttentionParams& p);

// Attention of an encoder (bert, nomic-bert): Q/K/V as in attention() (fused wqkv with its bias
// or separate with theirs), ROPE unless !p.use_rope, then every token attends to every token of its
// own sequence in this batch (GraphBuild::batch_mask), without the KV cache: an encoder evaluates
// each sequence whole, in one batch. Output projection with its bias when the layer has one.
Tensor* encoder_attention(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, const AttentionParams& p);

enum class FfnActivation { Silu, Gelu };
// A gated FFN's matrices and optional biases.
struct FfnWeights {
  Tensor *gate, *up, *down;
  Tensor *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
};
// down(act(gate cur + gate_b) * (up cur + up_b)) + down_b (each bias where there is one); with no
// gate matrix, up's 2 * n_ff rows are gate then up. Nodes are named "<what>_gate" and so on.
Tensor* gated_ffn(GraphBuild& b, const FfnWeights& w, const char* what, int64_t il, Tensor* cur,
                  FfnActivation act);
// The layer's ffn_gate/up/down with their biases, named "ffn_*".
Tensor* gated_ffn(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, FfnActivation act);

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
// by its weight; the experts' outputs are summed.
Tensor* moe_ffn(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, const MoeParams& p = {});

// The encoder stack bert and nomic-bert share: x = token embeddings (+ token type 0's embedding,
// + the learned position embeddings when the model has them), LayerNorm; per layer
// x = LN(x + encoder_attention(x)), x = LN(x + ffn(x)) with ffn BERT's GELU MLP with biases
// (gelu_ffn) or, with ffn_gate, the SILU-gated one (nomic-bert); returns the wanted rows' hidden
// states (no final norm, no logits).
Tensor* encoder(GraphBuild& b, const AttentionParams& ap);

// down(GELU(up cur + up_b)) + down_b: BERT's feed-forward (biases optional).
Tensor* gelu_ffn(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur);

// c * tanh(x / c): soft-capping of attention or output logits.
Tensor* soft_cap(GraphBuild& b, Tensor* x, float c, const char* what, int64_t il);

// Every decoder below computes the model's layers (Model::first_layer() to end_layer()) only; a
// pipeline stage that is not the last returns every token's hidden state after its last layer
// ([n_embd, n_tokens]: the next stage's input) instead of logits.

// The pre-norm decoder that llama, qwen2, qwen3, qwen3moe, phi3, granite, granitemoe, olmoe and
// smollm3 share: x = embeddings (times Hparams::embedding_scale when set); per layer
// x += attention(RMS_NORM(x) * attn_norm) (rope on the layers Hparams::rope_layer says),
// x += gated_ffn(RMS_NORM(x) * ffn_norm) with SILU (moe_ffn as `moe` says where the layer has a
// router, plus the shared expert where it has one), each block's output times
// Hparams::residual_scale when set; logits = output(RMS_NORM(x) * output_norm) for the wanted rows,
// divided by Hparams::logit_scale when set.
Tensor* pre_norm_decoder(GraphBuild& b, const AttentionParams& ap, const MoeParams& moe = {});

// The decoder Gemma 2 and 3 share: x = embeddings * sqrt(n_embd); per layer
// x += RMS_NORM(attention(RMS_NORM(x) * attn_norm)) * post_attn_norm,
// x += RMS_NORM(gated_ffn(RMS_NORM(x) * ffn_norm) with GELU) * post_ffn_norm;
// logits = output(RMS_NORM(x) * output_norm), soft-capped by final_softcap when set.
Tensor* sandwich_norm_decoder(GraphBuild& b,
                              AttentionParams (*attention_of_layer)(const GraphBuild& b, int64_t il));

// Re-ropes every layer's cached K (but those of layers without rope, Hparams::rope_layer) by each
// cell's recorded shift (KvCache::seq_shift);
// `shifts` is I32 [n_cells]; rope(il) gives layer il's rope parameters. Refuses YaRN scaling (an
// Unsupported error: its magnitude factor does not compose by differences).
void rope_shift_k(GraphBuild& b, Tensor* shifts, ops::RopeParams (*rope)(const Hparams& h, int64_t il),
                  Tensor* freq_factors);

}  // namespace tessera::llm
