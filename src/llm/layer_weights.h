#pragma once
// The weights of the blocks that architectures share (blocks.h): attention, gated FFN, mixture of
// experts, and the decoder layer made of them. An architecture keeps its layers in these (or in a
// struct of its own around them); a weight the file lacks stays nullptr.
#include "tessera/tensor.h"

namespace tessera::llm {

// Self-attention: Q/K/V as three projections or one fused (wqkv: Q, K then V rows), each with an
// optional bias; optional RMS norms of Q and K (per head, or over the whole projection); the output
// projection and its optional bias; optional sinks (one learned logit per query head that joins
// every softmax denominator and attends to nothing: gpt-oss).
struct AttentionWeights {
  Tensor *wq = nullptr, *wk = nullptr, *wv = nullptr, *wqkv = nullptr;
  Tensor *bq = nullptr, *bk = nullptr, *bv = nullptr, *bqkv = nullptr;
  Tensor *q_norm = nullptr, *k_norm = nullptr;
  Tensor *wo = nullptr, *bo = nullptr;
  Tensor* sinks = nullptr;
};

// A gated FFN: down(act(gate x + gate_b) * (up x + up_b)) + down_b, biases optional; with no gate
// matrix, up's 2 * n_ff rows are gate then up (Phi-3). Without gate and with a plain activation it
// is BERT's MLP (blocks.h, gelu_ffn).
struct FfnWeights {
  Tensor *gate = nullptr, *up = nullptr, *down = nullptr;
  Tensor *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;
};

// A mixture of experts: the router [n_embd, n_expert] (and its bias), the experts' matrices one per
// expert along dim 2 ([n_embd, n_ff_exp, n_expert] gate and up, [n_ff_exp, n_embd, n_expert] down)
// with optional bias rows per expert, and an optional shared expert every token runs (granitemoe).
struct MoeWeights {
  Tensor *router = nullptr, *router_b = nullptr;
  Tensor *gate_exps = nullptr, *up_exps = nullptr, *down_exps = nullptr;
  Tensor *gate_exps_b = nullptr, *up_exps_b = nullptr, *down_exps_b = nullptr;
  FfnWeights shared;  // shared.up == nullptr: none
};

// One layer of a pre-norm decoder: attention and its input norm, then the FFN (dense, or the
// experts when moe.router is set) and its input norm; Gemma's norms of each block's output.
struct DecoderLayer {
  Tensor* attn_norm = nullptr;
  AttentionWeights attn;
  Tensor* post_attn_norm = nullptr;
  Tensor* ffn_norm = nullptr;
  FfnWeights ffn;
  MoeWeights moe;
  Tensor* post_ffn_norm = nullptr;
};

}  // namespace tessera::llm
