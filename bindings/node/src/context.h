#pragma once
// LlamaContext: one model and one tessera_context. Calls that use the tessera_context (completion,
// embedding, bench, sessions) run one at a time, in call order, each on a libuv worker thread: a
// FIFO per context, the next started when the last has returned. Calls that read only the model
// (tokenize, detokenize: a loaded model is immutable and thread-safe) start at once. Different
// contexts run at the same time. release() cancels the running completion, fails the calls still
// queued, waits for what runs, then frees on a worker thread; any later call fails.
#include <napi.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "job.h"
#include "tessera.h"

namespace tnode {

class CompletionJob;

// What loadModel hands the constructor (through a Napi::External).
struct Loaded {
  tessera_model* model = nullptr;
  tessera_context* context = nullptr;
  bool embedding = false;
  int32_t n_gpu_layers = 0;
  int32_t n_threads = 0;
  int64_t n_batch = 0;
  ~Loaded() {
    tessera_context_free(context);
    tessera_model_free(model);
  }
};

class ContextWrap : public Napi::ObjectWrap<ContextWrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit ContextWrap(const Napi::CallbackInfo& info);
  ~ContextWrap() override;

 private:
  enum class Uses { Model, Context };

  Napi::Value completion(const Napi::CallbackInfo& info);
  Napi::Value stop_completion(const Napi::CallbackInfo& info);
  Napi::Value tokenize(const Napi::CallbackInfo& info);
  Napi::Value detokenize(const Napi::CallbackInfo& info);
  Napi::Value formatted_chat(const Napi::CallbackInfo& info);
  Napi::Value embedding(const Napi::CallbackInfo& info);
  Napi::Value save_session(const Napi::CallbackInfo& info);
  Napi::Value load_session(const Napi::CallbackInfo& info);
  Napi::Value bench(const Napi::CallbackInfo& info);
  Napi::Value release(const Napi::CallbackInfo& info);
  Napi::Value model_info(const Napi::CallbackInfo& info);

  void require_live(Napi::Env env, const char* what) const;
  Napi::Value submit(Napi::Env env, std::shared_ptr<Job> job, Uses uses);
  void pump(Napi::Env env);
  void maybe_free(Napi::Env env);

  std::unique_ptr<Loaded> loaded_;  // null once released
  int64_t external_bytes_ = 0;      // reported to V8 while loaded_ is held
  std::deque<std::shared_ptr<Job>> queue_;
  std::shared_ptr<Job> running_;
  int model_jobs_ = 0;
  // The completions queued or running (stopCompletion stops them all).
  std::vector<std::weak_ptr<CompletionJob>> completions_;
  bool released_ = false;
  std::shared_ptr<Job> free_job_;  // release(): frees once nothing runs
  bool free_started_ = false;
};

}  // namespace tnode
