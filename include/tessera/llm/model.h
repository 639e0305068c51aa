#pragma once
// A decoder-only transformer: hyperparameters and weights of one of the architectures in llm/arch/,
// from a GGUF file, or a synthetic Llama.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/device.h"
#include "tessera/gguf.h"
#include "tessera/gguf_loader.h"

namespace tessera::llm {

struct Hparams {
  std::string arch = "llama";
  int64_t n_ctx_train = 2048;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_embd_head_k = 0;  // query/key head size (attention.key_length; 0: n_embd / n_head)
  int64_t n_embd_head_v = 0;  // value head size (attention.value_length; 0: n_embd / n_head)
  int64_t n_rot = 0;          // rope dimension count
  int64_t n_vocab = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  float rope_yarn_ext_factor = 0.0f;
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor (Phi-3's long-context rope)
  int64_t rope_n_ctx_orig = 0;
  float rms_eps = 1e-5f;
  // Sliding-window attention: a windowed layer sees the last n_swa positions (0: no window).
  int64_t n_swa = 0;
  // Which layers are windowed: in each group of swa_pattern layers all but the last
  // (0: every layer, 1: none).
  int64_t swa_pattern = 0;
  float rope_freq_base_swa = 10000.0f;  // rope on windowed layers
  float rope_freq_scale_swa = 1.0f;
  float attn_softcap = 0.0f;   // attention logits become c * tanh(x / c) (0: none)
  float final_softcap = 0.0f;  // likewise the output logits
  float q_scale = 0.0f;        // Q's scale before KQ (0: 1 / sqrt(head_dim()))
  // Mixture of experts (Mixtral, Qwen3-MoE): n_expert experts per layer, n_expert_used of them per
  // token, each n_ff_exp wide (0: no experts, a dense FFN).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;  // the shared expert's width (granitemoe; 0: none)
  // Granite's scales (0: none): token embeddings times embedding_scale; each block's attention and
  // FFN output times residual_scale before the residual add; KQ scaled by attention_scale instead of
  // 1 / sqrt(head_dim()); logits divided by logit_scale.
  float embedding_scale = 0.0f;
  float residual_scale = 0.0f;
  float attention_scale = 0.0f;
  float logit_scale = 0.0f;
  // Which layers rope Q and K: none when !use_rope (granite's rope.scaling.finetuned = false), else
  // every layer but those with (il + 1) % no_rope_layer_step == 0 (SmolLM3: every 4th; 0: all).
  bool use_rope = true;
  int64_t no_rope_layer_step = 0;
  // Encoders (bert, nomic-bert): every token attends to every token of its sequence, and the model
  // has no output projection, so it computes embeddings only (SessionOptions::embeddings).
  bool encoder = false;
  float norm_eps = 1e-12f;  // LayerNorm epsilon (attention.layer_norm_epsilon; encoders)
  // <arch>.pooling_type as llama.cpp numbers it (0 none, 1 mean, 2 cls, 3 last, 4 rank); -1: absent.
  int32_t pooling_type = -1;
  int64_t n_token_types = 0;  // tokenizer.ggml.token_type_count (BERT's segment embeddings)
  bool fused_qkv = false;     // encoders: the file has blk.N.attn_qkv rather than attn_q/k/v

  int64_t head_dim() const { return n_embd_head_k > 0 ? n_embd_head_k : n_embd / n_head; }
  int64_t head_dim_v() const { return n_embd_head_v > 0 ? n_embd_head_v : n_embd / n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }  // K row of one token (all KV heads)
  int64_t n_embd_v_kv() const { return head_dim_v() * n_head_kv; }
  int64_t n_embd_q() const { return head_dim() * n_head; }
  bool swa_layer(int64_t il) const {
    return n_swa > 0 && (swa_pattern == 0 || il % swa_pattern < swa_pattern - 1);
  }
  // The KV window of layer il (0: none).
  int32_t window(int64_t il) const { return swa_layer(il) ? static_cast<int32_t>(n_swa) : 0; }
  bool rope_layer(int64_t il) const {
    return use_rope && (no_rope_layer_step <= 0 || (il + 1) % no_rope_layer_step != 0);
  }
};

// One layer's weights. Architectures that need more (biases, Q/K norms, post norms) use the
// optional fields (nullptr when the architecture or the file has none) rather than a layer type of
// their own.
struct Layer {
  Tensor* attn_norm = nullptr;
  Tensor* wq = nullptr;
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* wqkv = nullptr;  // Q, K and V rows in one matrix (Phi-3), instead of wq/wk/wv
  Tensor* bq = nullptr;    // Q/K/V biases (Qwen2, Granite, SmolLM3)
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* q_norm = nullptr;  // RMS norms of Q and K per head (Qwen3, Gemma 3) or whole (OLMoE)
  Tensor* k_norm = nullptr;
  Tensor* wo = nullptr;
  Tensor* post_attn_norm = nullptr;  // norm of the attention output before the residual (Gemma)
  Tensor* ffn_norm = nullptr;
  Tensor* ffn_gate = nullptr;  // nullptr with a fused gate+up ffn_up of 2 * n_ff rows (Phi-3)
  Tensor* ffn_up = nullptr;
  Tensor* ffn_down = nullptr;
  Tensor* ffn_gate_b = nullptr;     // the gated FFN's biases (Granite; ffn_up_b and ffn_down_b below)
  Tensor* post_ffn_norm = nullptr;  // norm of the FFN output before the residual (Gemma)
  // Mixture of experts instead of ffn_gate/up/down: the router [n_embd, n_expert] and the experts'
  // matrices, one per expert along dim 2 ([n_embd, n_ff_exp, n_expert] gate and up, [n_ff_exp,
  // n_embd, n_expert] down).
  Tensor* ffn_gate_inp = nullptr;
  Tensor* ffn_gate_exps = nullptr;
  Tensor* ffn_up_exps = nullptr;
  Tensor* ffn_down_exps = nullptr;
  // gpt-oss: the router's bias [n_expert] and the experts' biases, one row per expert ([n_ff_exp,
  // n_expert] gate and up, [n_embd, n_expert] down).
  Tensor* ffn_gate_inp_b = nullptr;
  Tensor* ffn_gate_exps_b = nullptr;
  Tensor* ffn_up_exps_b = nullptr;
  Tensor* ffn_down_exps_b = nullptr;
  // A shared expert beside the routed ones (granitemoe): a SILU-gated FFN of n_ff_shexp that every
  // token runs, its output added to the experts' ([n_embd, n_ff_shexp] gate and up, [n_ff_shexp,
  // n_embd] down).
  Tensor* ffn_gate_shexp = nullptr;
  Tensor* ffn_up_shexp = nullptr;
  Tensor* ffn_down_shexp = nullptr;
  // Attention sinks (gpt-oss): one learned logit per query head [n_head] that joins every softmax
  // denominator and attends to nothing.
  Tensor* attn_sinks = nullptr;
  // Encoders (bert, nomic-bert): biases, and LayerNorms after each residual (bo, ffn_up_b and
  // ffn_down_b also Granite's, gpt-oss's bo).
  Tensor* bqkv = nullptr;  // fused wqkv's bias
  Tensor* bo = nullptr;    // attn_output's bias
  Tensor* attn_out_norm = nullptr;
  Tensor* attn_out_norm_b = nullptr;
  Tensor* ffn_up_b = nullptr;
  Tensor* ffn_down_b = nullptr;
  Tensor* layer_out_norm = nullptr;
  Tensor* layer_out_norm_b = nullptr;
};

// Every weight of a model; which exist is the architecture's choice (llm/arch/).
struct ModelWeights {
  Tensor* token_embd = nullptr;
  Tensor* output_norm = nullptr;
  Tensor* output = nullptr;              // token_embd's data when the file has no output.weight (tied)
  Tensor* rope_freqs = nullptr;          // F32 [n_rot / 2] rope frequency factors (Llama 3.1)
  Tensor* rope_factors_long = nullptr;   // Phi-3's factors past the original context
  Tensor* rope_factors_short = nullptr;  // ... and within it
  Tensor* pos_embd = nullptr;            // BERT's learned absolute positions [n_embd, n_ctx_train]
  Tensor* type_embd = nullptr;           // token type (segment) embeddings [n_embd, n_token_types]
  Tensor* tok_norm = nullptr;            // LayerNorm of the embeddings (encoders), and its bias
  Tensor* tok_norm_b = nullptr;
  std::vector<Layer> layers;
};

// How offloaded layers spread over several devices (llama.cpp's --split-mode): none keeps them on
// the first device named; layer gives each device a contiguous range of them.
enum class SplitMode { None, Layer };

// Layers [first, end) of a model: a pipeline stage's share.
struct LayerRange {
  int64_t first = 0, end = 0;
  bool operator==(const LayerRange&) const = default;
};

// Which of shares.size() parts each of n items (layers) goes to: item r to the first part whose
// cumulative share passes (r + 0.5) / n of the sum, so each part takes a contiguous run as close to
// its share as whole items allow. Error(InvalidArgument), naming `what` (the option that gave the
// shares), when a share is negative or not finite or they sum to 0.
std::vector<size_t> split_by_shares(int64_t n, std::span<const double> shares, std::string_view what);
// The same for items of unequal sizes: item r goes to the first part whose cumulative share
// passes the middle of item r among the cumulative sizes.
std::vector<size_t> split_by_shares(std::span<const double> sizes, std::span<const double> shares,
                                    std::string_view what);

// The weight bytes each layer brings to the pipeline stage that holds it, the output layer's
// counted with the last layer and the token embeddings' with the first (unless
// `embeddings_mapped`: a stage maps them and holds only the rows it reads): what the ranks of a
// pipeline share. Error as Model::load on a file whose architecture or keys it cannot read.
std::vector<double> stage_layer_bytes(const gguf::File& file, bool embeddings_mapped);

struct LoadOptions {
  // The last N layers (and the output layer when N > n_layer) go to the devices.
  int n_gpu_layers = 0;
  // Device name, or several separated by commas (OpenCL0,OpenCL1: with SplitMode::Layer each takes
  // a contiguous range of the offloaded layers, in that order); empty = the first GPU/accelerator,
  // else the first non-CPU device.
  std::string device;
  SplitMode split_mode = SplitMode::Layer;
  // Each device's share of the offloaded layers (llama.cpp's --tensor-split 3,1), one per device
  // named; empty: shares by the devices' total memory.
  std::vector<float> tensor_split;
  gguf::ProgressCallback progress;
  bool use_mmap = true;  // false: read the file into memory (gguf::OpenOptions says when that pays)
  // A pipeline stage (mpi/pipeline.h): only these layers' weights, with the token embeddings when
  // it starts at layer 0 and the output layer when it ends at the last, are read from the file
  // (which is neither mapped nor read whole: gguf::OpenOptions::metadata_only) and given memory,
  // and its graphs compute these layers only (Session::decode). Unset: the whole model.
  std::optional<LayerRange> stage;
};

// Shape of a synthetic model (deterministic random weights) for benchmarks on a fresh machine.
struct SyntheticSpec {
  int64_t n_embd = 1024, n_layer = 16, n_head = 16, n_head_kv = 4, n_ff = 2816, n_vocab = 32000;
  int64_t n_ctx_train = 4096;
  DType type = DType::Q4_0;
  uint32_t seed = 1234;
};

class Model {
 public:
  // Loads a GGUF file. An unknown architecture, inconsistent hyperparameters, a missing tensor, a
  // tensor of the wrong shape or an unsupported type is an Error naming it, raised before any
  // memory is allocated.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  static std::unique_ptr<Model> synthetic(const SyntheticSpec& spec, const LoadOptions& options = {});
  ~Model();

  const Hparams& hparams() const noexcept { return hparams_; }
  const std::vector<Layer>& layers() const noexcept { return w_.layers; }
  const ModelWeights& weights() const noexcept { return w_; }
  Tensor* token_embd() const noexcept { return w_.token_embd; }
  Tensor* output_norm() const noexcept { return w_.output_norm; }
  Tensor* output() const noexcept { return w_.output; }
  // Rope frequency factors (F32 [n_rot / 2], Llama 3.1 scaling); nullptr when the file has none.
  Tensor* rope_freqs() const noexcept { return w_.rope_freqs; }
  // True when output.weight is absent and the output projection reads token_embd.weight.
  bool tied_output() const noexcept { return tied_output_; }
  // The devices holding offloaded layers, in layer order (empty when everything is on the CPU),
  // and the first of them (nullptr then).
  const std::vector<Device*>& devices() const noexcept { return devices_; }
  Device* device() const noexcept { return devices_.empty() ? nullptr : devices_.front(); }
  int n_gpu_layers() const noexcept { return n_gpu_layers_; }
  // The device holding layer il's weights and KV cells (il == n_layer: the output layer), or
  // nullptr for the CPU.
  Device* layer_device(int64_t il) const noexcept {
    return il >= 0 && static_cast<size_t>(il) < layer_device_.size() ? layer_device_[static_cast<size_t>(il)]
                                                                     : nullptr;
  }
  bool layer_on_device(int64_t il) const noexcept { return layer_device(il) != nullptr; }
  bool output_on_device() const noexcept { return layer_device(hparams_.n_layer) != nullptr; }
  // The layers this model computes: all of them, or a pipeline stage's (LoadOptions::stage).
  int64_t first_layer() const noexcept { return stage_.first; }
  int64_t end_layer() const noexcept { return stage_.end; }
  bool first_stage() const noexcept { return stage_.first == 0; }
  bool last_stage() const noexcept { return stage_.end == hparams_.n_layer; }
  // The GGUF file (nullptr for synthetic models).
  const gguf::File* file() const noexcept { return file_.get(); }
  size_t weight_bytes() const noexcept;

 private:
  Model() = default;
  // The devices and which layers each holds, from -ngl, --device, --split-mode and --tensor-split.
  void resolve_devices(const LoadOptions& options);
  // read_range(t, offset, n, dst): bytes [offset, offset + n) of a weight's ggml image.
  using ReadRange = std::function<void(const Tensor&, size_t, size_t, void*)>;
  // Gives every weight memory: CPU weights via host_data (nullptr = allocate host memory),
  // device weights in one device buffer; fill(t, dst) writes a weight's ggml bytes to dst, or,
  // where the weight is copied into a buffer of its own layout, read_range (when given) in slices.
  void place_weights(const std::function<const void*(const Tensor&)>& host_data,
                     const std::function<void(const Tensor&, void*)>& fill, const ReadRange& read_range,
                     const gguf::ProgressCallback& progress);
  // The device a weight placed by `where` (a layer index or a WeightSpec placement) goes to, or
  // nullptr for the CPU.
  Device* weight_device(int64_t where) const noexcept;
  // Whether a weight placed by `where` belongs to this model's stage.
  bool in_stage(int64_t where) const noexcept;

  Hparams hparams_;
  LayerRange stage_;
  ModelWeights w_;
  std::vector<std::pair<Tensor*, int64_t>> placed_;  // every weight and where it belongs
  bool tied_output_ = false;
  // Q4_0 / Q8_0 matrices to the CPU's interleaved layout: a copy, so only when the file is mapped
  // (its pages are dropped after the copy; a file read into memory would be held twice).
  bool interleave_ = true;
  std::vector<Device*> devices_;
  std::vector<Device*> layer_device_;  // per layer, then the output layer; nullptr: the CPU
  int n_gpu_layers_ = 0;
  std::unique_ptr<gguf::File> file_;
  Context ctx_;  // weight descriptors
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

// Hyperparameters from a file's <architecture>.* keys, validated (sizes positive and bounded, heads
// that divide); an unknown architecture or a bad value is an Error naming the key.
Hparams read_hparams(const gguf::File& file);

}  // namespace tessera::llm
