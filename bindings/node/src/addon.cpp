// The addon's entry: loadModel (on a worker thread, progress streamed to JS), the device list, the
// LlamaContext class (context.cpp).
#include <napi.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "context.h"
#include "job.h"
#include "options.h"
#include "tessera.h"

namespace tnode {
namespace {

struct Addon {
  Napi::FunctionReference context_class;
};

class LoadJob : public Job {
 public:
  LoadJob(Napi::Env env, Napi::Function make_context)
      : Job(env), make_context_(Napi::Persistent(make_context)) {}

  std::string path;
  std::optional<std::string> device;
  tessera_model_params model_params = tessera_model_default_params();
  tessera_context_params context_params = tessera_context_default_params();
  Napi::FunctionReference on_progress;

 protected:
  bool streams() const override { return !on_progress.IsEmpty(); }

  void run() override {
    auto loaded = std::make_unique<Loaded>();
    model_params.device = device ? device->c_str() : nullptr;
    model_params.progress = &LoadJob::progress;
    model_params.progress_user_data = this;
    check(tessera_model_load(path.c_str(), &model_params, &loaded->model));
    check(tessera_context_new(loaded->model, &context_params, &loaded->context));
    loaded->embedding = context_params.embeddings != 0;
    loaded->n_gpu_layers = model_params.n_gpu_layers;
    loaded->n_threads = context_params.n_threads;
    loaded->n_batch = context_params.n_batch;
    loaded_ = std::move(loaded);
  }

  Napi::Value result(Napi::Env env) override {
    // The constructor owns the Loaded from here on (and frees it when collected or released).
    Napi::Object context = make_context_.New({Napi::External<Loaded>::New(env, loaded_.get())});
    loaded_.release();
    return context;
  }

  void on_event(Napi::Env env, const Event& event) override {
    on_progress.Call({Napi::Number::New(env, event.fraction)});
  }

  void on_callback_error() override { cancelled_.store(true); }

 private:
  static int progress(float fraction, void* user_data) {
    auto* self = static_cast<LoadJob*>(user_data);
    if (self->streams()) self->emit(Event{{}, fraction});
    return self->cancelled_.load() ? 0 : 1;
  }

  Napi::FunctionReference make_context_;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<Loaded> loaded_;
};

// loadModel({model, n_ctx, n_gpu_layers, devices, n_threads, embedding, n_batch, use_mmap}, onProgress?)
Napi::Value load_model(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    const Options o(
        env, info[0], "loadModel",
        {"model", "n_ctx", "n_gpu_layers", "devices", "n_threads", "embedding", "n_batch", "use_mmap"});
    if (info.Length() > 1 && !info[1].IsUndefined() && !info[1].IsNull() && !info[1].IsFunction())
      throw type_error(env, "loadModel: onProgress must be a function");
    auto job = std::make_shared<LoadJob>(env, env.GetInstanceData<Addon>()->context_class.Value());
    const auto path = o.string("model");
    if (!path || path->empty())
      throw type_error(env, "loadModel: 'model' (the GGUF file's path) is required");
    job->path = *path;
    constexpr double kIntMax = std::numeric_limits<int32_t>::max();
    if (auto v = o.number("n_ctx", 0, 1e9, true)) job->context_params.n_ctx = static_cast<int64_t>(*v);
    if (auto v = o.number("n_batch", 1, 1e9, true)) job->context_params.n_batch = static_cast<int64_t>(*v);
    if (auto v = o.number("n_threads", 0, 4096, true))
      job->context_params.n_threads = static_cast<int32_t>(*v);
    if (auto v = o.boolean("embedding")) job->context_params.embeddings = *v ? 1 : 0;
    if (auto v = o.number("n_gpu_layers", 0, kIntMax, true))
      job->model_params.n_gpu_layers = static_cast<int32_t>(*v);
    if (auto v = o.boolean("use_mmap")) job->model_params.use_mmap = *v ? 1 : 0;
    if (auto devices = o.strings("devices")) {
      if (devices->size() > 1) {
        std::string list;
        for (const auto& d : *devices) list += (list.empty() ? "" : ", ") + d;
        throw o.refuse("devices", "holds " + std::to_string(devices->size()) + " devices (" + list +
                                      "): only one device is supported now");
      }
      if (!devices->empty()) job->device = devices->front();
    }
    if (info.Length() > 1 && info[1].IsFunction())
      job->on_progress = Napi::Persistent(info[1].As<Napi::Function>());
    Napi::Value promise = job->promise();
    job->start(env, nullptr);
    return promise;
  } catch (const Napi::Error& e) {
    auto d = Napi::Promise::Deferred::New(env);
    d.Reject(e.Value());
    return d.Promise();
  }
}

// [{backend, type, deviceName, maxMemorySize, metadata: {description, freeMemorySize}}], CPU first.
Napi::Value devices_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t n = 0;
  if (tessera_device_count(&n) != TESSERA_OK) throw Napi::Error::New(env, tessera_last_error());
  Napi::Array out = Napi::Array::New(env, n);
  for (size_t i = 0; i < n; ++i) {
    tessera_device_info d;
    if (tessera_device_get(i, &d) != TESSERA_OK) throw Napi::Error::New(env, tessera_last_error());
    std::string backend = d.name;
    while (!backend.empty() && std::isdigit(static_cast<unsigned char>(backend.back()))) backend.pop_back();
    Napi::Object meta = Napi::Object::New(env);
    meta.Set("description", std::string(d.description));
    meta.Set("freeMemorySize", static_cast<double>(d.memory_free));
    Napi::Object o = Napi::Object::New(env);
    o.Set("backend", backend);
    o.Set("type", d.kind == TESSERA_DEVICE_CPU ? "cpu" : d.kind == TESSERA_DEVICE_GPU ? "gpu" : "accel");
    o.Set("deviceName", std::string(d.name));
    o.Set("maxMemorySize", static_cast<double>(d.memory_total));
    o.Set("metadata", meta);
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  auto* addon = new Addon;
  Napi::Function context_class = ContextWrap::define(env);
  context_class.Set("getBackendDevicesInfo", Napi::Function::New(env, devices_info, "getBackendDevicesInfo"));
  addon->context_class = Napi::Persistent(context_class);
  env.SetInstanceData(addon);
  exports.Set("LlamaContext", context_class);
  exports.Set("loadModel", Napi::Function::New(env, load_model, "loadModel"));
  exports.Set("getBackendDevicesInfo", Napi::Function::New(env, devices_info, "getBackendDevicesInfo"));
  exports.Set("version", Napi::String::New(env, tessera_version()));
  return exports;
}

}  // namespace
}  // namespace tnode

static Napi::Object init_tessera(Napi::Env env, Napi::Object exports) { return tnode::init(env, exports); }
NODE_API_MODULE(tessera, init_tessera)
