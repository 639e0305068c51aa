#pragma once
// An inference session over a Model: KV cache, per-batch graphs, CPU or scheduled execution.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/allocator.h"
#include "tessera/backend.h"
#include "tessera/cpu.h"
#include "tessera/llm/model.h"
#include "tessera/scheduler.h"

namespace tessera::llm {

struct SessionOptions {
  int64_t n_ctx = 0;  // 0: the model's training context, capped at 4096
  int64_t n_batch = 512;
  int n_threads = 0;  // 0: all cores
  DType kv_type = DType::F16;
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& options = {});
  ~Session();

  // Evaluates tokens at the next positions (in batches of n_batch). Returns the logits of the
  // last token ([n_vocab]), or of every token ([n_tokens][n_vocab]) when all_logits is set.
  // Throws Error when the tokens do not fit in the context or an id is out of range.
  const std::vector<float>& decode(std::span<const int32_t> tokens, bool all_logits = false);

  int64_t n_past() const noexcept { return n_past_; }
  int64_t n_ctx() const noexcept { return n_ctx_; }
  void reset() noexcept { n_past_ = 0; }
  // Placement of the last graph (splits, copies, CPU fallbacks); empty without a device.
  std::string report() const;
  // Bytes of activation memory planned for the largest graph so far.
  size_t activation_bytes() const noexcept;

 private:
  void eval_batch(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& out);

  const Model& model_;
  SessionOptions options_;
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  std::unique_ptr<cpu::CpuBackend> cpu_;
  std::unique_ptr<Backend> device_backend_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<GraphAllocator> allocator_;
  Context cache_ctx_;
  std::vector<Tensor*> k_cache_, v_cache_;
  std::vector<std::unique_ptr<Buffer>> cache_buffers_;
  std::unique_ptr<Buffer> input_buffer_;
  std::vector<float> logits_;
  std::vector<float> mask_;
};

}  // namespace tessera::llm
