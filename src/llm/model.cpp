#include "tessera/llm/model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "arch/architecture.h"
#include "core/check.h"
#include "core/hash.h"
#include "tessera/log.h"
#include "tessera/op_types.h"
#include "tessera/quant.h"

namespace tessera::llm {
namespace {

// Weights are MUL_MAT and GET_ROWS sources: the types core's op table admits there.
bool is_weight_type(DType t) {
  return op_source_types(Op::MulMat, 0).contains(t) && op_source_types(Op::GetRows, 0).contains(t);
}

int64_t get_int_or(const gguf::File& f, const std::string& key, int64_t fallback) {
  return f.find(key) != nullptr ? f.get_int(key) : fallback;
}

float get_float_or(const gguf::File& f, const std::string& key, float fallback) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return fallback;
  if (const float* p = std::get_if<float>(v)) return *p;
  if (const double* p = std::get_if<double>(v)) return static_cast<float>(*p);
  raise(ErrorCode::CorruptFile, "key {} has type {}, expected a float", key,
        gguf::type_name(gguf::value_type(*v)));
}

std::string layer_name(int64_t il, const char* what) { return fmt::format("blk.{}.{}.weight", il, what); }

// Deterministic, fast pseudo-random floats in [-scale, scale) for synthetic weights.
struct SplitMix {
  uint64_t state;
  float next(float scale) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f) * scale;
  }
};

}  // namespace

Hparams read_hparams(const gguf::File& f) {
  Hparams h;
  h.arch = f.get_string("general.architecture");
  architecture(h.arch);  // an Error naming it when there is no graph builder for it
  const std::string a = h.arch + ".";
  h.n_ctx_train = get_int_or(f, a + "context_length", 2048);
  h.n_embd = f.get_int(a + "embedding_length");
  h.n_layer = f.get_int(a + "block_count");
  h.n_ff = f.get_int(a + "feed_forward_length");
  h.n_head = f.get_int(a + "attention.head_count");
  h.n_head_kv = get_int_or(f, a + "attention.head_count_kv", h.n_head);
  if (h.n_embd <= 0 || h.n_layer <= 0 || h.n_ff <= 0 || h.n_head <= 0 || h.n_head_kv <= 0 ||
      h.n_embd % h.n_head != 0 || h.n_head % h.n_head_kv != 0)
    raise(ErrorCode::CorruptFile,
          "inconsistent hyperparameters: n_embd {}, n_layer {}, n_ff {}, n_head {}, n_head_kv {}", h.n_embd,
          h.n_layer, h.n_ff, h.n_head, h.n_head_kv);
  h.n_rot = get_int_or(f, a + "rope.dimension_count", h.n_embd / h.n_head);
  if (h.n_rot <= 0 || h.n_rot > h.head_dim() || h.n_rot % 2 != 0)
    raise(ErrorCode::CorruptFile, "rope dimension count {} does not fit head size {}", h.n_rot, h.head_dim());
  h.rope_freq_base = get_float_or(f, a + "rope.freq_base", 10000.0f);
  h.rms_eps = get_float_or(f, a + "attention.layer_norm_rms_epsilon", 1e-5f);
  h.rope_n_ctx_orig = h.n_ctx_train;
  if (f.find(a + "rope.scaling.type") != nullptr) {
    const std::string type = f.get_string(a + "rope.scaling.type");
    const float factor = get_float_or(f, a + "rope.scaling.factor", 1.0f);
    if (type == "linear" || type == "yarn") {
      if (factor > 0.0f) h.rope_freq_scale = 1.0f / factor;
      if (type == "yarn") h.rope_yarn_ext_factor = 1.0f;
      h.rope_n_ctx_orig = get_int_or(f, a + "rope.scaling.original_context_length", h.n_ctx_train);
    } else if (type != "none") {
      raise(ErrorCode::Unsupported, "rope scaling type '{}' is not supported (none, linear, yarn)", type);
    }
  } else if (f.find(a + "rope.scale_linear") != nullptr) {
    const float factor = get_float_or(f, a + "rope.scale_linear", 1.0f);
    if (factor > 0.0f) h.rope_freq_scale = 1.0f / factor;
  }
  if (f.find(a + "vocab_size") != nullptr) {
    h.n_vocab = f.get_int(a + "vocab_size");
  } else if (f.find("tokenizer.ggml.tokens") != nullptr) {
    h.n_vocab = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  } else if (const auto* t = f.find_tensor("token_embd.weight")) {
    h.n_vocab = t->ne[1];
  }
  return h;
}

Model::~Model() = default;

void Model::resolve_device(const LoadOptions& options) {
  n_gpu_layers_ = std::max(0, options.n_gpu_layers);
  if (n_gpu_layers_ == 0 && options.device.empty()) return;
  auto& reg = Registry::instance();
  if (!options.device.empty()) {
    device_ = &reg.get(options.device);
    if (device_->kind() == DeviceKind::Cpu) device_ = nullptr;  // "CPU" means no offload
  } else {
    for (Device* d : reg.devices())
      if (d->kind() == DeviceKind::Gpu || d->kind() == DeviceKind::Accelerator) {
        device_ = d;
        break;
      }
    if (device_ == nullptr)
      for (Device* d : reg.devices())
        if (d->kind() != DeviceKind::Cpu) {
          device_ = d;
          break;
        }
    if (device_ == nullptr)
      log(LogLevel::Warn,
          fmt::format("-ngl {}: no device found, running every layer on the CPU", n_gpu_layers_));
  }
  if (device_ == nullptr || n_gpu_layers_ == 0) {
    device_ = nullptr;
    n_gpu_layers_ = 0;
  }
}

void Model::create_tensors(const std::function<DType(const std::string&)>& type_of, bool has_rope_freqs) {
  const Hparams& h = hparams_;
  auto make = [&](const std::string& name, int64_t ne0, int64_t ne1) {
    const DType type = ne1 == 1 ? DType::F32 : type_of(name);
    if (ne0 % traits(type).block_size != 0)
      raise(ErrorCode::Unsupported, "tensor {}: type {} needs ne0 divisible by {}", name, tessera::name(type),
            traits(type).block_size);
    Tensor* t = ctx_.new_tensor(type, ne0, ne1);
    t->name = name;
    t->flags |= kFlagWeight;
    return t;
  };
  token_embd_ = make("token_embd.weight", h.n_embd, h.n_vocab);
  output_norm_ = make("output_norm.weight", h.n_embd, 1);
  layers_.resize(static_cast<size_t>(h.n_layer));
  for (int64_t il = 0; il < h.n_layer; ++il) {
    Layer& l = layers_[static_cast<size_t>(il)];
    l.attn_norm = make(layer_name(il, "attn_norm"), h.n_embd, 1);
    l.wq = make(layer_name(il, "attn_q"), h.n_embd, h.n_embd);
    l.wk = make(layer_name(il, "attn_k"), h.n_embd, h.n_embd_kv());
    l.wv = make(layer_name(il, "attn_v"), h.n_embd, h.n_embd_kv());
    l.wo = make(layer_name(il, "attn_output"), h.n_embd, h.n_embd);
    l.ffn_norm = make(layer_name(il, "ffn_norm"), h.n_embd, 1);
    l.ffn_gate = make(layer_name(il, "ffn_gate"), h.n_embd, h.n_ff);
    l.ffn_up = make(layer_name(il, "ffn_up"), h.n_embd, h.n_ff);
    l.ffn_down = make(layer_name(il, "ffn_down"), h.n_ff, h.n_embd);
  }
  output_ = make("output.weight", h.n_embd, h.n_vocab);
  if (has_rope_freqs) rope_freqs_ = make("rope_freqs.weight", h.n_rot / 2, 1);
}

std::vector<Tensor*> Model::weights() const {
  std::vector<Tensor*> all{token_embd_, output_norm_, output_};
  if (rope_freqs_ != nullptr) all.push_back(rope_freqs_);
  for (const Layer& l : layers_)
    for (Tensor* t : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down})
      all.push_back(t);
  return all;
}

size_t Model::weight_bytes() const noexcept {
  size_t total = 0;
  for (const Tensor* t : weights()) total += t->nbytes();
  return total;
}

void Model::place_weights(const std::function<const void*(const Tensor&)>& host_data,
                          const std::function<void(const Tensor&, void*)>& fill,
                          const gguf::ProgressCallback& progress) {
  // Which weights go to the device: the last n_gpu_layers layers, and the output layer when
  // n_gpu_layers exceeds the layer count. The token embeddings stay on the CPU (GET_ROWS).
  std::vector<Tensor*> on_device, on_host;
  for (int64_t il = 0; il < hparams_.n_layer; ++il) {
    const Layer& l = layers_[static_cast<size_t>(il)];
    for (Tensor* t : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down})
      (layer_on_device(il) ? on_device : on_host).push_back(t);
  }
  for (Tensor* t : {output_norm_, output_}) (output_on_device() ? on_device : on_host).push_back(t);
  on_host.push_back(token_embd_);
  // Every layer reads the rope factors: on the device only when every layer is there.
  if (rope_freqs_ != nullptr) (layer_on_device(0) ? on_device : on_host).push_back(rope_freqs_);

  size_t total = 0, done = 0;
  for (const Tensor* t : on_device) total += t->nbytes();

  // Host weights: zero copy where the caller has the bytes (a mapped file), else host memory.
  size_t host_bytes = 0;
  std::vector<Tensor*> host_alloc;
  for (Tensor* t : on_host) {
    if (const void* p = host_data(*t)) {
      t->data = const_cast<void*>(p);
    } else {
      host_alloc.push_back(t);
      host_bytes += (t->nbytes() + 63) / 64 * 64;
      total += t->nbytes();
    }
  }
  if (!host_alloc.empty()) {
    buffers_.push_back(host_buffer_type().allocate(host_bytes));
    size_t offset = 0;
    for (Tensor* t : host_alloc) {
      buffers_.back()->place(*t, offset);
      offset += (t->nbytes() + 63) / 64 * 64;
      fill(*t, t->data);
      done += t->nbytes();
      if (progress) progress(done, total);
    }
  }
  if (on_device.empty()) return;

  BufferType& type = device_->buffer_type();
  const size_t align = type.alignment();
  size_t device_bytes = 0;
  for (const Tensor* t : on_device) device_bytes += (type.alloc_size(*t) + align - 1) / align * align;
  buffers_.push_back(type.allocate(device_bytes));
  Buffer& buffer = *buffers_.back();
  size_t offset = 0;
  std::vector<char> staging;
  for (Tensor* t : on_device) {
    buffer.place(*t, offset);
    offset += (type.alloc_size(*t) + align - 1) / align * align;
    if (const void* p = host_data(*t)) {
      tensor_set(*t, p, 0, t->nbytes());
    } else {
      staging.resize(t->nbytes());
      fill(*t, staging.data());
      tensor_set(*t, staging.data(), 0, staging.size());
    }
    done += t->nbytes();
    if (progress) progress(done, total);
  }
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::make_unique<gguf::File>(gguf::File::open(path, {.mmap = options.use_mmap}));
  const gguf::File& f = *m->file_;
  m->hparams_ = read_hparams(f);
  m->resolve_device(options);

  // Every tensor the graph needs must exist with the expected shape and a supported type.
  auto info_of = [&](const std::string& name) -> const gguf::TensorInfo* { return f.find_tensor(name); };
  const bool tied_output = info_of("output.weight") == nullptr;
  auto type_of = [&](const std::string& name) -> DType {
    const gguf::TensorInfo* info =
        info_of(name == "output.weight" && tied_output ? "token_embd.weight" : name);
    if (info == nullptr) raise(ErrorCode::CorruptFile, "{}: tensor {} is missing", path, name);
    if (!info->type)
      raise(ErrorCode::Unsupported,
            "{}: tensor {} has type {} (ggml id {}), which Tessera cannot compute with", path, info->name,
            info->type_name(), info->type_id);
    const DType t = *info->type;
    if (!is_weight_type(t))
      raise(ErrorCode::Unsupported, "{}: tensor {} has type {}, which is not supported for weights", path,
            name, tessera::name(t));
    return t;
  };
  m->create_tensors(type_of, info_of("rope_freqs.weight") != nullptr);
  for (Tensor* t : m->weights()) {
    const std::string name = t == m->output_ && tied_output ? "token_embd.weight" : t->name;
    const gguf::TensorInfo* info = info_of(name);
    if (info == nullptr) raise(ErrorCode::CorruptFile, "{}: tensor {} is missing", path, name);
    if (info->ne != t->ne)
      raise(ErrorCode::CorruptFile, "{}: tensor {} has shape [{}, {}, {}, {}], expected {}", path, name,
            info->ne[0], info->ne[1], info->ne[2], info->ne[3], t->shape_string());
    if (info->type != t->type)
      raise(ErrorCode::Unsupported, "{}: tensor {} has type {} where {} was expected", path, name,
            info->type_name(), tessera::name(t->type));
  }
  if (tied_output) m->output_->name = "output.weight (tied to token_embd.weight)";
  auto host_data = [&](const Tensor& t) -> const void* {
    const std::string name = &t == m->output_ && tied_output ? "token_embd.weight" : t.name;
    return f.tensor_data(*info_of(name));
  };
  m->place_weights(
      host_data, [](const Tensor&, void*) {}, options.progress);
  return m;
}

std::unique_ptr<Model> Model::synthetic(const SyntheticSpec& spec, const LoadOptions& options) {
  if (!is_weight_type(spec.type))
    raise(ErrorCode::InvalidArgument, "synthetic model: weight type {} is not supported",
          tessera::name(spec.type));
  if (spec.n_embd <= 0 || spec.n_layer <= 0 || spec.n_head <= 0 || spec.n_head_kv <= 0 || spec.n_ff <= 0 ||
      spec.n_vocab <= 0 || spec.n_embd % spec.n_head != 0 || spec.n_head % spec.n_head_kv != 0)
    raise(ErrorCode::InvalidArgument, "synthetic model: inconsistent shape");
  std::unique_ptr<Model> m(new Model());
  Hparams& h = m->hparams_;
  h.n_ctx_train = spec.n_ctx_train;
  h.n_embd = spec.n_embd;
  h.n_layer = spec.n_layer;
  h.n_ff = spec.n_ff;
  h.n_head = spec.n_head;
  h.n_head_kv = spec.n_head_kv;
  h.n_rot = spec.n_embd / spec.n_head;
  h.n_vocab = spec.n_vocab;
  h.rope_n_ctx_orig = spec.n_ctx_train;
  m->resolve_device(options);
  m->create_tensors([&](const std::string&) { return spec.type; }, false);
  const float scale = 1.0f / std::sqrt(static_cast<float>(spec.n_embd));
  auto fill = [&](const Tensor& t, void* dst) {
    // Seeded per tensor so weights do not depend on placement order.
    SplitMix rng{spec.seed ^ stable_hash(t.name)};
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    for (int64_t r = 0; r < t.nrows(); ++r) {
      for (auto& v : row) v = t.ne[1] == 1 ? 1.0f + rng.next(0.1f) : rng.next(scale);
      from_f32_row(t.type, row.data(), static_cast<char*>(dst) + r * t.nb[1], t.ne[0]);
    }
  };
  m->place_weights([](const Tensor&) -> const void* { return nullptr; }, fill, options.progress);
  return m;
}

}  // namespace tessera::llm
