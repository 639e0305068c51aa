#include "context.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "options.h"

namespace tnode {

namespace {

constexpr const char* kReleased = "ERR_TESSERA_RELEASED";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Napi::Value rejected(Napi::Env env, const Napi::Error& error) {
  auto d = Napi::Promise::Deferred::New(env);
  d.Reject(error.Value());
  return d.Promise();
}

// Runs a Promise-returning method's body; an Error it throws (a bad argument) rejects the Promise.
template <class Body>
Napi::Value promising(Napi::Env env, Body&& body) {
  try {
    return body();
  } catch (const Napi::Error& e) {
    return rejected(env, e);
  }
}

// Token ids from the C API's "ask the size, then fill" calls. `call(buffer, capacity, &n)`.
template <class Call>
std::vector<int32_t> tokens_of(size_t guess, Call&& call) {
  std::vector<int32_t> out(std::max<size_t>(guess, 16));
  size_t n = 0;
  tessera_status st = call(out.data(), out.size(), &n);
  if (st == TESSERA_BUFFER_TOO_SMALL) {
    out.resize(n);
    st = call(out.data(), out.size(), &n);
  }
  check(st);
  out.resize(n);
  return out;
}

// Text from the same kind of call.
template <class Call>
std::string text_of(size_t guess, Call&& call) {
  std::string out(std::max<size_t>(guess, 64), '\0');
  size_t n = 0;
  tessera_status st = call(out.data(), out.size(), &n);
  if (st == TESSERA_BUFFER_TOO_SMALL) {
    out.assign(n + 1, '\0');
    st = call(out.data(), out.size(), &n);
  }
  check(st);
  out.resize(n);
  return out;
}

std::vector<int32_t> tokenize_text(const tessera_model* model, const std::string& text, bool add_special) {
  return tokens_of(text.size() + 8, [&](int32_t* buf, size_t cap, size_t* n) {
    return tessera_tokenize(model, text.data(), text.size(), add_special ? 1 : 0, /*parse_special=*/1, buf,
                            cap, n);
  });
}

// JSON.stringify of a JS value (messages for the chat template calls).
std::string json_of(Napi::Env env, Napi::Value value, const char* what) {
  Napi::Object json = env.Global().Get("JSON").As<Napi::Object>();
  Napi::Value s = json.Get("stringify").As<Napi::Function>().Call(json, {value});
  if (!s.IsString()) throw type_error(env, std::string(what) + " cannot be written as JSON");
  return s.As<Napi::String>().Utf8Value();
}

std::string messages_json(Napi::Env env, Napi::Value messages, const char* where) {
  if (!messages.IsArray())
    throw type_error(env, std::string(where) + ": 'messages' must be an array of {role, content}");
  return json_of(env, messages, "messages");
}

struct SamplerGuard {
  tessera_sampler* s = nullptr;
  ~SamplerGuard() { tessera_sampler_free(s); }
};

// ---- Jobs ----

class ReleasedJob;

class TokenizeJob : public Job {
 public:
  TokenizeJob(Napi::Env env, const tessera_model* model, std::string text)
      : Job(env), model_(model), text_(std::move(text)) {}
  void run() override { tokens_ = tokenize_text(model_, text_, /*add_special=*/false); }
  Napi::Value result(Napi::Env env) override {
    Napi::Int32Array a = Napi::Int32Array::New(env, tokens_.size());
    std::copy(tokens_.begin(), tokens_.end(), a.Data());
    Napi::Object out = Napi::Object::New(env);
    out.Set("tokens", a);
    return out;
  }

 private:
  const tessera_model* model_;
  std::string text_;
  std::vector<int32_t> tokens_;
};

class DetokenizeJob : public Job {
 public:
  DetokenizeJob(Napi::Env env, const tessera_model* model, std::vector<int32_t> tokens)
      : Job(env), model_(model), tokens_(std::move(tokens)) {}
  void run() override {
    text_ = text_of(tokens_.size() * 8, [&](char* buf, size_t cap, size_t* n) {
      return tessera_detokenize(model_, tokens_.data(), tokens_.size(), buf, cap, n);
    });
  }
  Napi::Value result(Napi::Env env) override { return Napi::String::New(env, text_); }

 private:
  const tessera_model* model_;
  std::vector<int32_t> tokens_;
  std::string text_;
};

}  // namespace

// A completion: the prompt's tokens (text, or messages through the chat template), a sampler,
// tessera_generate; each settled piece goes to onToken({token}) through the job's stream.
class CompletionJob : public Job {
 public:
  CompletionJob(Napi::Env env, const tessera_model* model, tessera_context* context)
      : Job(env), model_(model), context_(context) {}

  bool use_messages = false;
  std::string prompt;  // the text, or the messages as JSON
  std::optional<std::string> chat_template;
  tessera_sampler_params sampling = tessera_sampler_default_params();
  int32_t n_predict = -1;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  std::optional<std::string> grammar, json_schema;  // at most one
  Napi::FunctionReference on_token;

  // Any thread: stop as soon as possible (before it starts: at once).
  void stop() {
    stop_.store(true);
    if (running_.load()) tessera_context_cancel(context_);
  }

 protected:
  bool streams() const override { return !on_token.IsEmpty(); }

  void run() override {
    running_.store(true);
    const std::vector<int32_t> tokens =
        use_messages ? tokens_of(4096,
                                 [&](int32_t* buf, size_t cap, size_t* n) {
                                   return tessera_chat_tokenize(
                                       model_, chat_template ? chat_template->c_str() : nullptr,
                                       prompt.c_str(), nullptr, 1, buf, cap, n);
                                 })
                     : tokenize_text(model_, prompt, /*add_special=*/true);
    if (tokens.empty()) fail("completion: the prompt is empty", kBadOption);
    n_predict_ = n_predict < 0 ? static_cast<int32_t>(tessera_context_n_ctx(context_)) : n_predict;
    result_.n_prompt = tokens.size();
    if (stop_.load()) {  // stopped before it started
      result_.finish = TESSERA_FINISH_CANCELLED;
      return;
    }
    SamplerGuard sampler;
    check(tessera_sampler_new(&sampling, &sampler.s));
    if (grammar || json_schema)
      check(tessera_sampler_set_grammar(sampler.s, model_, grammar ? grammar->c_str() : nullptr,
                                        json_schema ? json_schema->c_str() : nullptr));
    std::vector<const char*> stop_ptrs;
    for (const std::string& s : stops) stop_ptrs.push_back(s.c_str());
    tessera_generate_params gp = tessera_generate_default_params();
    gp.n_predict = n_predict_;
    gp.stop = stop_ptrs.data();
    gp.n_stop = stop_ptrs.size();
    gp.ignore_eos = ignore_eos ? 1 : 0;
    gp.on_text = &CompletionJob::on_text;
    gp.user_data = this;
    const tessera_status st =
        tessera_generate(context_, sampler.s, tokens.data(), tokens.size(), &gp, &result_);
    running_.store(false);
    check(st);
  }

  Napi::Value result(Napi::Env env) override {
    const tessera_generate_result& r = result_;
    const bool length = r.finish == TESSERA_FINISH_LENGTH;
    const bool context_full = length && r.n_generated < static_cast<size_t>(n_predict_);
    const double prompt_n = static_cast<double>(r.n_prompt - r.n_cached);
    const double predicted_n = static_cast<double>(r.n_generated);
    Napi::Object timings = Napi::Object::New(env);
    timings.Set("cache_n", static_cast<double>(r.n_cached));
    timings.Set("prompt_n", prompt_n);
    timings.Set("prompt_ms", r.prompt_ms);
    timings.Set("prompt_per_token_ms", prompt_n > 0 ? r.prompt_ms / prompt_n : 0.0);
    timings.Set("prompt_per_second", r.prompt_ms > 0 ? 1000.0 * prompt_n / r.prompt_ms : 0.0);
    timings.Set("predicted_n", predicted_n);
    timings.Set("predicted_ms", r.generate_ms);
    timings.Set("predicted_per_token_ms", predicted_n > 0 ? r.generate_ms / predicted_n : 0.0);
    timings.Set("predicted_per_second", r.generate_ms > 0 ? 1000.0 * predicted_n / r.generate_ms : 0.0);
    Napi::Object out = Napi::Object::New(env);
    out.Set("text", Napi::String::New(env, text_));
    out.Set("tokens_predicted", predicted_n);
    out.Set("tokens_evaluated", static_cast<double>(r.n_prompt));
    out.Set("tokens_cached", static_cast<double>(r.n_cached));
    out.Set("truncated", false);
    out.Set("context_full", context_full);
    out.Set("stopped_eos", r.finish == TESSERA_FINISH_EOG);
    out.Set("stopped_word", r.finish == TESSERA_FINISH_STOP);
    out.Set("stopped_limit", length && !context_full);
    out.Set("interrupted", r.finish == TESSERA_FINISH_CANCELLED);
    out.Set("timings", timings);
    return out;
  }

  void on_event(Napi::Env env, const Event& event) override {
    Napi::Object token = Napi::Object::New(env);
    token.Set("token", Napi::String::New(env, event.text));
    on_token.Call({token});
  }

  void on_callback_error() override { stop(); }

 private:
  static int on_text(const char* text, size_t length, void* user_data) {
    auto* self = static_cast<CompletionJob*>(user_data);
    self->text_.append(text, length);
    if (self->streams()) self->emit(Event{std::string(text, length)});
    return self->stop_.load() ? 0 : 1;
  }

  const tessera_model* model_;
  tessera_context* context_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  int32_t n_predict_ = 0;
  std::string text_;
  tessera_generate_result result_{};
};

namespace {

class EmbeddingJob : public Job {
 public:
  EmbeddingJob(Napi::Env env, const tessera_model* model, tessera_context* context, std::string text)
      : Job(env), model_(model), context_(context), text_(std::move(text)) {}
  void run() override {
    const std::vector<int32_t> tokens = tokenize_text(model_, text_, /*add_special=*/true);
    if (tokens.empty()) fail("embedding: the text has no tokens", kBadOption);
    tessera_model_info info;
    check(tessera_model_get_info(model_, &info));
    embedding_.resize(static_cast<size_t>(info.n_embd));
    size_t n = 0;
    check(tessera_embed(context_, tokens.data(), tokens.size(), TESSERA_POOLING_MEAN, /*normalize=*/1,
                        embedding_.data(), embedding_.size(), &n));
    embedding_.resize(n);
  }
  Napi::Value result(Napi::Env env) override {
    Napi::Float32Array a = Napi::Float32Array::New(env, embedding_.size());
    std::copy(embedding_.begin(), embedding_.end(), a.Data());
    Napi::Object out = Napi::Object::New(env);
    out.Set("embedding", a);
    return out;
  }

 private:
  const tessera_model* model_;
  tessera_context* context_;
  std::string text_;
  std::vector<float> embedding_;
};

// bench(pp, tg, pl, nr): pl sequences of pp prompt tokens decoded as one batch, then tg steps of
// one token per sequence; nr repetitions from an empty cache, times averaged (ms).
class BenchJob : public Job {
 public:
  BenchJob(Napi::Env env, const tessera_model* model, tessera_context* context, const Loaded& loaded, int pp,
           int tg, int pl, int nr)
      : Job(env),
        model_(model),
        context_(context),
        n_gpu_layers_(loaded.n_gpu_layers),
        n_threads_(loaded.n_threads),
        n_batch_(loaded.n_batch),
        pp_(pp),
        tg_(tg),
        pl_(pl),
        nr_(nr) {}
  void run() override {
    n_ctx_ = tessera_context_n_ctx(context_);
    const int64_t n_kv = static_cast<int64_t>(pl_) * (pp_ + tg_);
    if (n_kv > n_ctx_)
      fail("bench: pl * (pp + tg) = " + std::to_string(n_kv) + " tokens do not fit the context of " +
               std::to_string(n_ctx_) + " (loadModel's n_ctx)",
           kBadOption);
    tessera_model_info info;
    check(tessera_model_get_info(model_, &info));
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(info.n_vocab - 1));
    for (int r = 0; r < nr_; ++r) {
      check(tessera_context_clear(context_));
      std::vector<int32_t> tokens, positions, seqs;
      std::vector<int8_t> logits;
      for (int s = 0; s < pl_; ++s)
        for (int i = 0; i < pp_; ++i) {
          tokens.push_back(pick(rng));
          positions.push_back(i);
          seqs.push_back(s);
          logits.push_back(i + 1 == pp_ ? 1 : 0);
        }
      auto t0 = std::chrono::steady_clock::now();
      decode(tokens, positions, seqs, logits);
      t_pp_ += ms_since(t0);
      t0 = std::chrono::steady_clock::now();
      for (int step = 0; step < tg_; ++step) {
        tokens.assign(pl_, 0);
        positions.assign(pl_, pp_ + step);
        seqs.clear();
        for (int s = 0; s < pl_; ++s) {
          tokens[s] = pick(rng);
          seqs.push_back(s);
        }
        logits.assign(pl_, 1);
        decode(tokens, positions, seqs, logits);
      }
      t_tg_ += ms_since(t0);
    }
    check(tessera_context_clear(context_));
    t_pp_ /= nr_;
    t_tg_ /= nr_;
  }
  Napi::Value result(Napi::Env env) override {
    const double pp_tokens = static_cast<double>(pl_) * pp_, tg_tokens = static_cast<double>(pl_) * tg_;
    const double t = t_pp_ + t_tg_;
    const int32_t threads =
        n_threads_ > 0 ? n_threads_ : static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    Napi::Object out = Napi::Object::New(env);
    out.Set("nKvMax", static_cast<double>(n_ctx_));
    out.Set("nBatch", static_cast<double>(n_batch_));
    out.Set("nUBatch", static_cast<double>(n_batch_));
    out.Set("flashAttn", 0);
    out.Set("isPpShared", false);
    out.Set("nGpuLayers", n_gpu_layers_);
    out.Set("nThreads", threads);
    out.Set("nThreadsBatch", threads);
    out.Set("pp", pp_);
    out.Set("tg", tg_);
    out.Set("pl", pl_);
    out.Set("nKv", static_cast<double>(pl_) * (pp_ + tg_));
    out.Set("tPp", t_pp_);
    out.Set("speedPp", t_pp_ > 0 ? 1000.0 * pp_tokens / t_pp_ : 0.0);
    out.Set("tTg", t_tg_);
    out.Set("speedTg", t_tg_ > 0 ? 1000.0 * tg_tokens / t_tg_ : 0.0);
    out.Set("t", t);
    out.Set("speed", t > 0 ? 1000.0 * (pp_tokens + tg_tokens) / t : 0.0);
    return out;
  }

 private:
  void decode(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
              const std::vector<int32_t>& seqs, const std::vector<int8_t>& logits) {
    if (tokens.empty()) return;
    tessera_batch b{tokens.size(), tokens.data(), positions.data(), seqs.data(), logits.data()};
    check(tessera_decode(context_, &b));
  }

  const tessera_model* model_;
  tessera_context* context_;
  int32_t n_gpu_layers_, n_threads_;
  int64_t n_batch_, n_ctx_ = 0;
  int pp_, tg_, pl_, nr_;
  double t_pp_ = 0.0, t_tg_ = 0.0;
};

// saveSession/loadSession: sequence 0 as the last completion left it (its prompt and generated
// tokens), through the C API's saved sequences; a loaded one is the next completion's prefix.
class SessionJob : public Job {
 public:
  SessionJob(Napi::Env env, tessera_context* context, std::string path, bool save)
      : Job(env), context_(context), path_(std::move(path)), save_(save) {}
  void run() override {
    if (save_) {
      check(tessera_state_save(context_, 0, nullptr, 0, path_.c_str()));
    } else {
      tokens_of(static_cast<size_t>(tessera_context_n_ctx(context_)),
                [&](int32_t* buf, size_t cap, size_t* n) {
                  return tessera_state_load(context_, 0, path_.c_str(), buf, cap, n);
                });
    }
  }

 private:
  tessera_context* context_;
  std::string path_;
  bool save_;
};

class FreeJob : public Job {
 public:
  FreeJob(Napi::Env env, std::unique_ptr<Loaded> loaded) : Job(env), loaded_(std::move(loaded)) {}
  void run() override { loaded_.reset(); }

 private:
  std::unique_ptr<Loaded> loaded_;
};

}  // namespace

// ---- ContextWrap ----

Napi::Function ContextWrap::define(Napi::Env env) {
  return DefineClass(env, "LlamaContext",
                     {
                         InstanceMethod<&ContextWrap::completion>("completion"),
                         InstanceMethod<&ContextWrap::stop_completion>("stopCompletion"),
                         InstanceMethod<&ContextWrap::tokenize>("tokenize"),
                         InstanceMethod<&ContextWrap::detokenize>("detokenize"),
                         InstanceMethod<&ContextWrap::formatted_chat>("getFormattedChat"),
                         InstanceMethod<&ContextWrap::embedding>("embedding"),
                         InstanceMethod<&ContextWrap::save_session>("saveSession"),
                         InstanceMethod<&ContextWrap::load_session>("loadSession"),
                         InstanceMethod<&ContextWrap::bench>("bench"),
                         InstanceMethod<&ContextWrap::release>("release"),
                         InstanceMethod<&ContextWrap::model_info>("getModelInfo"),
                     });
}

ContextWrap::ContextWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ContextWrap>(info) {
  if (info.Length() != 1 || !info[0].IsExternal())
    throw type_error(info.Env(), "LlamaContext is made by loadModel(options), not by new");
  loaded_.reset(info[0].As<Napi::External<Loaded>>().Data());
  // Tell V8 about the memory behind this small object (the weights, an upper bound of the F16 KV
  // cache), so that contexts dropped without release() are collected before they pile up.
  tessera_model_info m;
  if (tessera_model_get_info(loaded_->model, &m) == TESSERA_OK)
    external_bytes_ = static_cast<int64_t>(m.weight_bytes) +
                      4 * tessera_context_n_ctx(loaded_->context) * m.n_layer * m.n_embd;
  Napi::MemoryManagement::AdjustExternalMemory(info.Env(), external_bytes_);
}

// Garbage collected: nothing runs (every job holds a reference), so freeing here is safe.
ContextWrap::~ContextWrap() {
  if (external_bytes_ > 0) Napi::MemoryManagement::AdjustExternalMemory(Env(), -external_bytes_);
}

void ContextWrap::require_live(Napi::Env env, const char* what) const {
  if (released_) {
    Napi::Error e = Napi::Error::New(env, std::string(what) + ": the context was released");
    e.Set("code", Napi::String::New(env, kReleased));
    throw e;
  }
}

Napi::Value ContextWrap::submit(Napi::Env env, std::shared_ptr<Job> job, Uses uses) {
  Ref();
  if (uses == Uses::Model) {
    ++model_jobs_;
    job->start(env, [this, env] {
      --model_jobs_;
      maybe_free(env);
      Unref();
    });
  } else {
    queue_.push_back(job);
    pump(env);
  }
  return job->promise();
}

void ContextWrap::pump(Napi::Env env) {
  if (running_ || queue_.empty()) return;
  running_ = std::move(queue_.front());
  queue_.pop_front();
  running_->start(env, [this, env] {
    running_.reset();
    std::erase_if(completions_, [](const auto& w) { return w.expired(); });
    pump(env);
    maybe_free(env);
    Unref();
  });
}

void ContextWrap::maybe_free(Napi::Env env) {
  if (!free_job_ || free_started_ || running_ || model_jobs_ > 0) return;
  free_started_ = true;
  Ref();
  free_job_->start(env, [this] {
    free_job_.reset();
    Unref();
  });
}

Napi::Value ContextWrap::completion(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "completion");
    const Options o(env, info[0], "completion",
                    {"prompt", "messages", "chat_template", "jinja", "n_predict", "temperature", "top_k",
                     "top_p", "min_p", "penalty_repeat", "penalty_last_n", "penalty_present", "penalty_freq",
                     "seed", "stop", "ignore_eos", "grammar", "json_schema", "response_format"});
    if (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsNull() && !info[1].IsFunction())
      throw type_error(env, "completion: onToken must be a function");
    auto job = std::make_shared<CompletionJob>(env, loaded_->model, loaded_->context);
    if (loaded_->embedding)
      throw type_error(env,
                       "completion: the context was loaded with embedding: true (it computes no logits)");
    if (o.has("prompt") == o.has("messages"))
      throw type_error(env, "completion: give either 'prompt' (a string) or 'messages' (an array)");
    if (o.has("prompt")) {
      job->prompt = *o.string("prompt");
    } else {
      job->use_messages = true;
      job->prompt = messages_json(env, o.raw("messages"), "completion");
    }
    job->chat_template = o.string("chat_template");
    if (job->chat_template && !job->use_messages)
      throw o.refuse("chat_template", "applies to 'messages' only");
    if (auto jinja = o.boolean("jinja"); jinja && !*jinja)
      throw o.refuse("jinja", "cannot be false: chat templates are always Jinja");
    constexpr double kIntMax = std::numeric_limits<int32_t>::max();
    if (auto v = o.number("n_predict", -1, kIntMax, true)) job->n_predict = static_cast<int32_t>(*v);
    tessera_sampler_params& s = job->sampling;
    if (auto v = o.number("temperature", -1e9, 1e9, false)) s.temperature = static_cast<float>(*v);
    if (auto v = o.number("top_k", -1, kIntMax, true)) s.top_k = static_cast<int32_t>(*v);
    if (auto v = o.number("top_p", 0, 1e9, false)) s.top_p = static_cast<float>(*v);
    if (auto v = o.number("min_p", 0, 1, false)) s.min_p = static_cast<float>(*v);
    if (auto v = o.number("penalty_repeat", 0, 1e9, false)) s.repeat_penalty = static_cast<float>(*v);
    if (auto v = o.number("penalty_last_n", -1, kIntMax, true))
      s.repeat_last_n =
          *v < 0 ? static_cast<int32_t>(tessera_context_n_ctx(loaded_->context)) : static_cast<int32_t>(*v);
    if (auto v = o.number("penalty_present", -2, 2, false)) s.presence_penalty = static_cast<float>(*v);
    if (auto v = o.number("penalty_freq", -2, 2, false)) s.frequency_penalty = static_cast<float>(*v);
    // seed: -1 (llama.node's default) or absent is a random seed; 0..2^53-1 as given.
    const auto seed = o.number("seed", -1, 9007199254740991.0, true);
    s.seed = seed && *seed >= 0
                 ? static_cast<uint64_t>(*seed)
                 : (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
    if (auto v = o.strings("stop")) {
      for (const std::string& st : *v)
        if (st.empty()) throw o.refuse("stop", "cannot hold an empty string");
      job->stops = std::move(*v);
    }
    if (auto v = o.boolean("ignore_eos")) job->ignore_eos = *v;
    // Constrained output (tessera_sampler_set_grammar): a GBNF grammar, a JSON schema (an object or
    // its text), or OpenAI's response_format {type: "json_object" | "json_schema", json_schema: {schema}}.
    const auto json_text = [&](const Napi::Value& v) {
      if (v.IsString()) return v.As<Napi::String>().Utf8Value();
      const Napi::Object json = env.Global().Get("JSON").As<Napi::Object>();
      return json.Get("stringify").As<Napi::Function>().Call(json, {v}).As<Napi::String>().Utf8Value();
    };
    int constraints = 0;
    if (auto g = o.string("grammar")) job->grammar = *g, ++constraints;
    if (o.has("json_schema")) job->json_schema = json_text(o.raw("json_schema")), ++constraints;
    if (o.has("response_format")) {
      const Napi::Value rf = o.raw("response_format");
      const Napi::Value type = rf.IsObject() ? rf.As<Napi::Object>().Get("type") : env.Undefined();
      const std::string kind = type.IsString() ? type.As<Napi::String>().Utf8Value() : "";
      if (kind == "json_object") {
        job->json_schema = "{\"type\": \"object\"}", ++constraints;
      } else if (kind == "json_schema") {
        const Napi::Value js = rf.As<Napi::Object>().Get("json_schema");
        const Napi::Value schema = js.IsObject() ? js.As<Napi::Object>().Get("schema") : env.Undefined();
        job->json_schema = schema.IsUndefined() ? "{}" : json_text(schema), ++constraints;
      } else if (kind != "text") {
        throw o.refuse("response_format", "must be {type: \"text\" | \"json_object\" | \"json_schema\"}");
      }
    }
    if (constraints > 1)
      throw o.refuse("grammar", "give at most one of grammar, json_schema and response_format");
    if (info.Length() > 1 && info[1].IsFunction())
      job->on_token = Napi::Persistent(info[1].As<Napi::Function>());
    completions_.push_back(job);
    return submit(env, job, Uses::Context);
  });
}

Napi::Value ContextWrap::stop_completion(const Napi::CallbackInfo& info) {
  require_live(info.Env(), "stopCompletion");
  for (const auto& w : completions_)
    if (auto job = w.lock()) job->stop();
  return info.Env().Undefined();
}

Napi::Value ContextWrap::tokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "tokenize");
    if (info.Length() < 1 || !info[0].IsString())
      throw type_error(env, "tokenize: the text must be a string");
    if (info.Length() > 1 && !info[1].IsUndefined())
      throw type_error(env, "tokenize: 'media_paths' is not supported by Tessera's Node binding",
                       kUnsupported);
    return submit(env,
                  std::make_shared<TokenizeJob>(env, loaded_->model, info[0].As<Napi::String>().Utf8Value()),
                  Uses::Model);
  });
}

Napi::Value ContextWrap::detokenize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "detokenize");
    std::vector<int32_t> tokens;
    if (info.Length() >= 1 && info[0].IsTypedArray() &&
        info[0].As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
      const Napi::Int32Array a = info[0].As<Napi::Int32Array>();
      tokens.assign(a.Data(), a.Data() + a.ElementLength());
    } else if (info.Length() >= 1 && info[0].IsArray()) {
      const Napi::Array a = info[0].As<Napi::Array>();
      for (uint32_t i = 0; i < a.Length(); ++i) {
        const Napi::Value v = a.Get(i);
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : std::nan("");
        if (!(d >= std::numeric_limits<int32_t>::min() && d <= std::numeric_limits<int32_t>::max()) ||
            d != std::floor(d))
          throw type_error(env, "detokenize: token " + std::to_string(i) + " is not an integer token id");
        tokens.push_back(static_cast<int32_t>(d));
      }
    } else {
      throw type_error(env, "detokenize: the tokens must be an array of numbers or an Int32Array");
    }
    return submit(env, std::make_shared<DetokenizeJob>(env, loaded_->model, std::move(tokens)), Uses::Model);
  });
}

Napi::Value ContextWrap::formatted_chat(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_live(env, "getFormattedChat");
  const std::string messages = messages_json(env, info[0], "getFormattedChat");
  std::optional<std::string> tmpl;
  if (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsNull()) {
    if (!info[1].IsString()) throw type_error(env, "getFormattedChat: the template must be a string");
    tmpl = info[1].As<Napi::String>().Utf8Value();
  }
  const Options o(env, info.Length() > 2 ? info[2] : env.Undefined(), "getFormattedChat",
                  {"add_generation_prompt", "jinja"});
  if (auto jinja = o.boolean("jinja"); jinja && !*jinja)
    throw o.refuse("jinja", "cannot be false: chat templates are always Jinja");
  const bool add_generation_prompt = o.boolean("add_generation_prompt").value_or(true);
  try {
    return Napi::String::New(env, text_of(messages.size() + 256, [&](char* buf, size_t cap, size_t* n) {
                               return tessera_chat_apply_template_json(
                                   loaded_->model, tmpl ? tmpl->c_str() : nullptr, messages.c_str(), nullptr,
                                   add_generation_prompt ? 1 : 0, buf, cap, n);
                             }));
  } catch (const Failure& f) {
    throw to_js(env, f);
  }
}

Napi::Value ContextWrap::embedding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "embedding");
    if (info.Length() < 1 || !info[0].IsString())
      throw type_error(env, "embedding: the text must be a string");
    const Options o(env, info.Length() > 1 ? info[1] : env.Undefined(), "embedding", {"embd_normalize"});
    if (auto v = o.number("embd_normalize", -1e9, 1e9, true); v && *v != 2)
      throw o.refuse("embd_normalize", "must be 2 (Euclidean): the only normalization Tessera implements");
    if (!loaded_->embedding)
      throw type_error(env, "embedding: the context was not loaded with embedding: true");
    return submit(env,
                  std::make_shared<EmbeddingJob>(env, loaded_->model, loaded_->context,
                                                 info[0].As<Napi::String>().Utf8Value()),
                  Uses::Context);
  });
}

Napi::Value ContextWrap::save_session(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "saveSession");
    if (info.Length() < 1 || !info[0].IsString())
      throw type_error(env, "saveSession: the path must be a string");
    return submit(
        env,
        std::make_shared<SessionJob>(env, loaded_->context, info[0].As<Napi::String>().Utf8Value(), true),
        Uses::Context);
  });
}

Napi::Value ContextWrap::load_session(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "loadSession");
    if (info.Length() < 1 || !info[0].IsString())
      throw type_error(env, "loadSession: the path must be a string");
    return submit(
        env,
        std::make_shared<SessionJob>(env, loaded_->context, info[0].As<Napi::String>().Utf8Value(), false),
        Uses::Context);
  });
}

Napi::Value ContextWrap::bench(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "bench");
    const char* names[] = {"pp", "tg", "pl", "nr"};
    const double mins[] = {1, 0, 1, 1};
    int v[4];
    for (int i = 0; i < 4; ++i) {
      const Napi::Value a = info.Length() > static_cast<size_t>(i) ? info[i] : env.Undefined();
      const double d = a.IsNumber() ? a.As<Napi::Number>().DoubleValue() : std::nan("");
      if (!(d >= mins[i] && d <= 1e6) || d != std::floor(d))
        throw type_error(env, std::string("bench: '") + names[i] + "' must be an integer from " +
                                  std::to_string(static_cast<int>(mins[i])) + " to 1000000");
      v[i] = static_cast<int>(d);
    }
    return submit(
        env,
        std::make_shared<BenchJob>(env, loaded_->model, loaded_->context, *loaded_, v[0], v[1], v[2], v[3]),
        Uses::Context);
  });
}

Napi::Value ContextWrap::model_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  require_live(env, "getModelInfo");
  tessera_model_info m;
  if (tessera_model_get_info(loaded_->model, &m) != TESSERA_OK)
    throw to_js(env, Failure{tessera_last_error(), "ERR_TESSERA_INTERNAL"});
  Napi::Object out = Napi::Object::New(env);
  out.Set("desc", std::string(m.architecture));
  out.Set("architecture", std::string(m.architecture));
  out.Set("nVocab", static_cast<double>(m.n_vocab));
  out.Set("nEmbd", static_cast<double>(m.n_embd));
  out.Set("nLayer", static_cast<double>(m.n_layer));
  out.Set("nCtxTrain", static_cast<double>(m.n_ctx_train));
  out.Set("nCtx", static_cast<double>(tessera_context_n_ctx(loaded_->context)));
  out.Set("size", static_cast<double>(m.weight_bytes));
  out.Set("hasChatTemplate", m.has_chat_template != 0);
  return out;
}

Napi::Value ContextWrap::release(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return promising(env, [&]() -> Napi::Value {
    require_live(env, "release");
    released_ = true;
    // The running completion stops after its current token; calls still queued fail.
    for (const auto& w : completions_)
      if (auto job = w.lock()) job->stop();
    const Failure failure{"the context was released before this call ran", kReleased};
    while (!queue_.empty()) {
      std::shared_ptr<Job> job = std::move(queue_.front());
      queue_.pop_front();
      job->reject_unstarted(env, failure);
      Unref();
    }
    free_job_ = std::make_shared<FreeJob>(env, std::move(loaded_));
    Napi::MemoryManagement::AdjustExternalMemory(env, -external_bytes_);
    external_bytes_ = 0;
    Napi::Value promise = free_job_->promise();
    maybe_free(env);
    return promise;
  });
}

}  // namespace tnode
