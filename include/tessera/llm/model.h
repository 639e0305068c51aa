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

// What every model has, whatever its architecture: the shapes the cache, the sessions and the
// samplers need. An architecture's own hyperparameters (rope scaling, norms' epsilon, windows,
// soft-caps, scales) are private to its file in src/llm/arch/; Model::hyperparameters() lists them.
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
  // Mixture of experts: n_expert experts per layer, n_expert_used of them per token (0: dense).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  // Encoders (bert, nomic-bert): every token attends to every token of its sequence, and the model
  // has no output projection, so it computes embeddings only (SessionOptions::embeddings).
  bool encoder = false;
  // <arch>.pooling_type as llama.cpp numbers it (0 none, 1 mean, 2 cls, 3 last, 4 rank); -1: absent.
  int32_t pooling_type = -1;

  int64_t head_dim() const { return n_embd_head_k > 0 ? n_embd_head_k : n_embd / n_head; }
  int64_t head_dim_v() const { return n_embd_head_v > 0 ? n_embd_head_v : n_embd / n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }  // K row of one token (all KV heads)
  int64_t n_embd_v_kv() const { return head_dim_v() * n_head_kv; }
  int64_t n_embd_q() const { return head_dim() * n_head; }
};

// The weights every language model has: the token embeddings it reads, and the output norm and
// projection it ends with (nullptr in an encoder). The layers' weights are the architecture's.
struct EmbeddingWeights {
  Tensor* token_embd = nullptr;
  Tensor* output_norm = nullptr;
  Tensor* output = nullptr;  // token_embd's data when the file has no output.weight (tied)
};

// A hyperparameter's name and its value as text.
using HparamList = std::vector<std::pair<std::string, std::string>>;

// One model's architecture: its own hyperparameters and weights, and how it builds its graphs
// (internal: src/llm/arch/architecture.h).
class ArchitectureModel;

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
  // Every hyperparameter: Hparams' fields, then the architecture's own (rope, norms, windows, ...).
  HparamList hyperparameters() const;
  // The weight called `name` (as the file names it: "blk.0.attn_q.weight"), nullptr when the model
  // has none (or another pipeline stage holds it).
  Tensor* weight(std::string_view name) const noexcept;
  // Every weight this model holds, in the order they were declared.
  std::vector<const Tensor*> weight_tensors() const;
  Tensor* token_embd() const noexcept { return io_.token_embd; }
  Tensor* output_norm() const noexcept { return io_.output_norm; }
  Tensor* output() const noexcept { return io_.output; }
  // The architecture that builds this model's graphs (internal).
  const ArchitectureModel& architecture() const noexcept { return *arch_; }
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
  std::unique_ptr<ArchitectureModel> arch_;
  LayerRange stage_;
  EmbeddingWeights io_;
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
// that divide, the architecture's own keys too); an unknown architecture or a bad value is an Error
// naming the key.
Hparams read_hparams(const gguf::File& file);

}  // namespace tessera::llm
