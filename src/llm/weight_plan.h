#pragma once
// What an architecture needs from a file: each weight's name, exact shape, whether it may be
// absent, and where it is placed. Model::load checks every spec against the file (presence,
// shape, type) before it allocates anything, then creates the tensors into the plan's slots.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "llm/layer_weights.h"
#include "tessera/llm/model.h"

namespace tessera::llm {

// Where a weight lives, besides a layer index (>= 0): with the token embeddings (always the
// host: GET_ROWS), with the output layer, or wherever every layer can read it.
enum WeightPlacement : int64_t { kPlaceInput = -1, kPlaceOutput = -2, kPlaceEveryLayer = -3 };

struct WeightSpec {
  std::string name;
  std::array<int64_t, 3> ne{1, 1, 1};  // ne1 == ne2 == 1: a 1-D weight (norms, biases, factors), F32
  Tensor** slot = nullptr;
  int64_t where = kPlaceInput;  // a layer index or a WeightPlacement
  bool optional = false;        // absent from the file: the slot stays nullptr
  std::string fallback;         // absent: read this tensor instead (tied output)
};

class WeightPlan {
 public:
  WeightPlan(EmbeddingWeights& io, const Hparams& h) : io_(io), h_(h) {}

  const Hparams& hparams() const noexcept { return h_; }
  EmbeddingWeights& io() noexcept { return io_; }
  const std::vector<WeightSpec>& specs() const noexcept { return specs_; }

  // A model-wide weight.
  void add(Tensor*& slot, std::string name, int64_t ne0, int64_t ne1, int64_t where, bool optional = false,
           std::string fallback = {});
  // blk.<il>.<what>.weight (bias: .bias) of layer il.
  void add_layer(int64_t il, Tensor*& slot, const char* what, int64_t ne0, int64_t ne1 = 1,
                 bool optional = false);
  void add_layer_bias(int64_t il, Tensor*& slot, const char* what, int64_t ne0, bool optional = false);

  // What most architectures share: token_embd, output_norm and output (tied to token_embd when
  // the file has none).
  void add_embeddings_and_output();
  // attn_norm, attn_q/k/v, attn_output: the llama layer's attention.
  void add_attention(int64_t il, DecoderLayer& l);
  // The biases of attn_q/k/v (optional: Granite, SmolLM3, whose converters write them when the
  // checkpoint has them; required: Qwen2, gpt-oss).
  void add_attention_biases(int64_t il, AttentionWeights& a, bool optional);
  // attn_q_norm and attn_k_norm, `width` wide (one head, or the whole projection).
  void add_qk_norms(int64_t il, AttentionWeights& a, int64_t q_width, int64_t k_width);
  // ffn_norm, ffn_gate/up/down of n_ff; with biases, their optional biases too (Granite).
  void add_gated_ffn(int64_t il, DecoderLayer& l, bool biases = false);
  // The shared expert ffn_gate/up/down_shexp, n_ff_shexp wide (granitemoe).
  void add_shared_expert(int64_t il, FfnWeights& w, int64_t n_ff_shexp);
  // The FFN's input norm (blk.N.<norm>.weight into ffn_norm), the router ffn_gate_inp and the
  // experts ffn_gate/up/down_exps, each n_ff_exp wide; with biases, the router's and the experts'
  // biases too (gpt-oss).
  void add_moe_ffn(int64_t il, DecoderLayer& l, int64_t n_ff_exp, const char* norm = "ffn_norm",
                   bool biases = false);
  // post_attention_norm and post_ffw_norm (Gemma).
  void add_post_norms(int64_t il, DecoderLayer& l);

  // Every tensor of the file must be one the plan declares (or a fallback one reads): a tensor the
  // graph would not read (a bias, a fused projection, a variant's extra weights) is an Error naming
  // it, rather than a model computed without it.
  void require_every_tensor_read() noexcept { every_tensor_read_ = true; }
  bool every_tensor_read() const noexcept { return every_tensor_read_; }

 private:
  EmbeddingWeights& io_;
  const Hparams& h_;
  std::vector<WeightSpec> specs_;
  bool every_tensor_read_ = false;
};

}  // namespace tessera::llm
