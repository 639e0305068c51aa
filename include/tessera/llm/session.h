#pragma once
// An inference session over a Model: its KV cache, and the evaluation of batches through the
// model architecture's graph builder, scheduled over the CPU and, when the model offloads, a device.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/backend.h"
#include "tessera/cpu.h"
#include "tessera/llm/batch.h"
#include "tessera/llm/kv_cache.h"
#include "tessera/llm/model.h"
#include "tessera/scheduler.h"

namespace tessera::llm {

struct GraphBuild;

struct SessionOptions {
  int64_t n_ctx = 0;  // KV cache cells; 0: the model's training context, capped at 4096
  int64_t n_batch = 512;
  int n_threads = 0;  // 0: all cores
  DType kv_type = DType::F16;
  // Graphs attend to a multiple of kv_pad cells (the rest masked), so that generation steps keep
  // one graph shape for kv_pad tokens and the scheduler can reuse its plan. 32 costs little
  // attention work on small models (256 made tg on stories260K 14% slower on the CPU).
  int64_t kv_pad = 32;
  // Every layer attends through one FLASH_ATTN_EXT node, which each backend computes its own way
  // (the CPU: the composed ops' kernels per group of query tokens; a device without the op: the
  // scheduler's MUL_MAT, SOFT_MAX, MUL_MAT). flash_attn asks the CPU for its online-softmax kernel
  // instead (no KQ matrix at all). Off by default: on the machine measured the composed kernels
  // are 1.3-2x faster, prompts and generation alike, but for one token over a few dozen cells
  // (bench/attention_bench).
  bool flash_attn = false;
  // decode returns each wanted token's hidden state after the final norm ([n_embd] per token: what
  // embeddings are pooled from) instead of its logits; the output projection is not computed.
  // Encoder models (Hparams::encoder: bert, nomic-bert) have no logits and need it.
  bool embeddings = false;
  // A model whose layers are split across devices (LoadOptions::device "A,B", SplitMode::Layer)
  // decodes a batch longer than this in micro-batches of this many tokens, pipelined: each
  // device's layers run as a graph of their own, device s working on micro-batch k while device
  // s + 1 works on micro-batch k - 1. 0: n_batch / (4 x the number of devices), at least 32 (at
  // most n_batch).
  int64_t n_ubatch = 0;
};

// Where the first stage of a pipeline (Model::first_stage() but not last_stage()) sends its
// results: the later stages, in other processes (mpi/pipeline.h). Session::decode calls begin,
// then forward for each micro-batch as soon as it is computed (so the next stage starts on it while
// this one computes the next), then finish.
class StageLink {
 public:
  virtual ~StageLink() = default;
  // A decode starts; `cache` holds the cells as they are before it (the later stages mirror them).
  virtual void begin(KvCache& cache) = 0;
  // Tokens [start, start + n) of `batch` and this stage's hidden states for them ([n][n_embd]).
  virtual void forward(const Batch& batch, size_t start, size_t n, std::span<const float> hidden) = 0;
  // The wanted tokens' logits in batch order, as the last stage computed them; the Error of a stage
  // that failed.
  virtual void finish(std::vector<float>& logits) = 0;
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& options = {});
  ~Session();

  // Evaluates a batch that may mix sequences (in micro-batches of n_batch tokens, in order) and
  // stores its K/V in the cache. Returns the logits of the tokens whose logits flag is set, in
  // batch order ([n_outputs][n_vocab]; [n_outputs][n_embd] hidden states with
  // SessionOptions::embeddings). Throws Error on a malformed batch, an id outside the
  // vocabulary, or, Error(ContextFull), when the cache has no free cells for it (the cache is then
  // unchanged).
  const std::vector<float>& decode(const Batch& batch);
  // A later pipeline stage's decode (Model::first_stage() false): `hidden` is the previous stage's
  // hidden states for every token of the batch ([size][n_embd]), the batch's tokens are checked
  // but not read. A stage that is not the last returns every token's hidden state ([size][n_embd])
  // instead of logits. Error(InvalidArgument) when hidden is not what the model's stage needs.
  const std::vector<float>& decode(const Batch& batch, std::span<const float> hidden);
  // Sequence 0 at its next positions: the logits of the last token ([n_vocab]), or of every
  // token ([n_tokens][n_vocab]) when all_logits is set.
  const std::vector<float>& decode(std::span<const int32_t> tokens, bool all_logits = false);

  // Plans (without running it) the largest graph a decode can build: n_batch tokens (at most the
  // cache) attending to every cell, `n_outputs` of them giving logits. The memory for intermediates
  // and inputs is allocated and touched up front, and later decodes (whatever their mix) need no
  // more, so a long-running server's memory stays flat. The cache must be empty; it stays empty.
  void reserve(int64_t n_outputs);

  const Model& model() const noexcept { return model_; }
  const SessionOptions& options() const noexcept { return options_; }
  KvCache& cache() noexcept { return *cache_; }
  const KvCache& cache() const noexcept { return *cache_; }
  int64_t n_past() const { return cache_->seq_pos_max(0) + 1; }  // sequence 0's next position
  int64_t n_ctx() const noexcept { return cache_->size(); }
  void reset() { cache_->clear(); }
  // Placement of the last graph (splits, copies, CPU fallbacks, plans built and reused).
  std::string report() const;
  // Bytes of memory the scheduler holds for intermediates and input copies.
  size_t activation_bytes() const noexcept;
  // Graph plans made, and computes that reused one (generation steps of one shape reuse).
  uint64_t plans_built() const noexcept { return scheduler_->plans_built(); }
  uint64_t plans_reused() const noexcept { return scheduler_->plans_reused(); }
  // Every node of the last graph as "OP[ne0,ne1,ne2,ne3]": equal strings mean equal shapes.
  std::string last_graph_shapes() const;

  // The input of one matrix multiplication by a model weight (MUL_MAT, or MUL_MAT_ID with the
  // expert of each slot): x is b's values, contiguous f32 of shape ne; for MUL_MAT_ID ids holds
  // the experts, contiguous int32 of shape ids_ne (null for MUL_MAT). Valid during the call only.
  struct MatMulInput {
    const Tensor* weight = nullptr;
    const float* x = nullptr;
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    const int32_t* ids = nullptr;
    std::array<int64_t, 2> ids_ne{1, 1};
  };
  using MatMulObserver = std::function<void(const MatMulInput&)>;
  // While set, every decode also reads back the input of each product by a weight (they become
  // graph outputs) and passes it to `observer` after the graph ran, in graph order (what
  // llama-imatrix collects; llm/imatrix.h). An empty function turns it off.
  void set_mat_mul_observer(MatMulObserver observer) { mat_mul_observer_ = std::move(observer); }
  // The first stage of a pipeline sends each micro-batch's hidden states through `link` (which must
  // outlive the session; nullptr: none) and returns the logits it collects. Error(InvalidArgument)
  // unless the model is a first stage that is not also the last.
  void set_stage_link(StageLink* link);

 private:
  void validate(const Batch& batch) const;
  void eval(const Batch& batch, size_t start, size_t n, std::span<const float> hidden,
            std::vector<float>& out);
  // The graph inputs every decode graph has (besides the K shift's).
  std::vector<Tensor*> graph_inputs(const GraphBuild& b) const;
  void apply_k_shift();
  void compute(Graph& graph);
  // Places the graph's input tensors in the persistent input buffer (grown when too small).
  void place_inputs(const std::vector<Tensor*>& inputs);
  void place_inputs(const std::vector<Tensor*>& inputs, std::unique_ptr<Buffer>& buffer);
  // Sets b up for tokens [start, start + n) of `batch` stored in `cells` and builds the graph of
  // b.layers; wants_logits: whether its output is read.
  Tensor* build(GraphBuild& b, const Batch& batch, size_t start, size_t n, std::span<const int64_t> cells,
                bool& wants_logits) const;
  // Writes the placed inputs b built (all but hidden_in's values).
  void fill_inputs(const GraphBuild& b, const Batch& batch, size_t start, size_t n) const;
  // The micro-batch of a pipelined decode, 0 when decodes are not pipelined.
  size_t pipeline_micro_batch() const;
  void decode_pipelined(const Batch& batch, size_t micro_batch);

  const Model& model_;
  const ArchitectureModel& arch_;
  SessionOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::vector<std::unique_ptr<Backend>> device_backends_;  // one per device of the model
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Buffer> input_buffer_;
  std::vector<float> logits_;
  std::vector<std::pair<Op, std::array<int64_t, 4>>> last_shapes_;
  MatMulObserver mat_mul_observer_;
  StageLink* link_ = nullptr;
  // With layers on several devices: one per device's contiguous layers (the output layer with the
  // last), each with its own scheduler and CPU backend, so that they can run at once.
  struct DeviceStage;
  std::vector<std::unique_ptr<DeviceStage>> device_stages_;
  std::string pipeline_timeline_;  // the last decode's, when it was pipelined
};

}  // namespace tessera::llm
