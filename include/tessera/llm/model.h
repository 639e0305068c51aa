#pragma once
// A Llama-family model: hyperparameters and weights, from a GGUF file or synthetic.
#include <cstdint>
#include <memory>
#include <string>
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
  int64_t n_rot = 0;  // rope dimension count
  int64_t n_vocab = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  float rope_yarn_ext_factor = 0.0f;
  int64_t rope_n_ctx_orig = 0;
  float rms_eps = 1e-5f;

  int64_t head_dim() const { return n_embd / n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }
};

// One layer's weights. Architectures that need more (biases, Q/K norms, post norms) add optional
// fields here (nullptr when the file has none) rather than a layer type of their own.
struct Layer {
  Tensor* attn_norm = nullptr;
  Tensor* wq = nullptr;
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* wo = nullptr;
  Tensor* ffn_norm = nullptr;
  Tensor* ffn_gate = nullptr;
  Tensor* ffn_up = nullptr;
  Tensor* ffn_down = nullptr;
};

struct LoadOptions {
  int n_gpu_layers = 0;  // the last N layers (and the output layer when N > n_layer) go to `device`
  std::string device;    // device name; empty = the first GPU/accelerator, else the first non-CPU device
  gguf::ProgressCallback progress;
  bool use_mmap = true;  // false: read the file into memory (gguf::OpenOptions says when that pays)
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
  // Loads a GGUF file; unsupported architectures or tensor types are an Error naming them.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  static std::unique_ptr<Model> synthetic(const SyntheticSpec& spec, const LoadOptions& options = {});
  ~Model();

  const Hparams& hparams() const noexcept { return hparams_; }
  const std::vector<Layer>& layers() const noexcept { return layers_; }
  Tensor* token_embd() const noexcept { return token_embd_; }
  Tensor* output_norm() const noexcept { return output_norm_; }
  Tensor* output() const noexcept { return output_; }
  // Rope frequency factors (F32 [n_rot / 2], Llama 3.1 scaling); nullptr when the file has none.
  Tensor* rope_freqs() const noexcept { return rope_freqs_; }
  // The device holding offloaded layers (nullptr when everything is on the CPU).
  Device* device() const noexcept { return device_; }
  int n_gpu_layers() const noexcept { return n_gpu_layers_; }
  bool layer_on_device(int64_t il) const noexcept {
    return device_ != nullptr && il >= hparams_.n_layer - n_gpu_layers_;
  }
  bool output_on_device() const noexcept { return device_ != nullptr && n_gpu_layers_ > hparams_.n_layer; }
  // The GGUF file (nullptr for synthetic models).
  const gguf::File* file() const noexcept { return file_.get(); }
  size_t weight_bytes() const noexcept;

 private:
  Model() = default;
  void resolve_device(const LoadOptions& options);
  // Creates the descriptors of every weight (shapes from the hyperparameters).
  // rope_freqs.weight is created when has_rope_freqs is set.
  void create_tensors(const std::function<DType(const std::string&)>& type_of, bool has_rope_freqs);
  // Gives every weight memory: CPU weights via host_data (nullptr = allocate host memory),
  // device weights in one device buffer; fill(t, dst) writes a weight's ggml bytes to dst.
  void place_weights(const std::function<const void*(const Tensor&)>& host_data,
                     const std::function<void(const Tensor&, void*)>& fill,
                     const gguf::ProgressCallback& progress);
  std::vector<Tensor*> weights() const;

  Hparams hparams_;
  std::vector<Layer> layers_;
  Tensor* token_embd_ = nullptr;
  Tensor* output_norm_ = nullptr;
  Tensor* output_ = nullptr;
  Tensor* rope_freqs_ = nullptr;
  Device* device_ = nullptr;
  int n_gpu_layers_ = 0;
  std::unique_ptr<gguf::File> file_;
  Context ctx_;  // weight descriptors
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

// Hyperparameters from a file's <architecture>.* keys; an unknown architecture is an Error naming it.
Hparams read_hparams(const gguf::File& file);

}  // namespace tessera::llm
