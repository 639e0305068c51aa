#include "tessera/llm/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "arch/architecture.h"
#include "core/check.h"
#include "core/hash.h"
#include "cpu/interleave.h"
#include "hparam_reader.h"
#include "tessera/cpu.h"
#include "tessera/log.h"
#include "tessera/op_types.h"
#include "tessera/quant.h"
#include "weight_plan.h"

namespace tessera::llm {
namespace {

// Weights are MUL_MAT and GET_ROWS sources: the types core's op table admits there.
bool is_weight_type(DType t) {
  return op_source_types(Op::MulMat, 0).contains(t) && op_source_types(Op::GetRows, 0).contains(t);
}

// Bounds that no real model comes near: they keep sizes and their products far from overflow.
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // n_embd, n_ff, head sizes
constexpr int64_t kMaxHeads = int64_t{1} << 14;
constexpr int64_t kMaxLayers = int64_t{1} << 12;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxContext = int64_t{1} << 30;

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

namespace {

// A file's hyperparameters and its architecture's object (which read the architecture's own keys).
struct ReadArchitecture {
  Hparams h;
  std::unique_ptr<ArchitectureModel> arch;
};

ReadArchitecture read_architecture(const gguf::File& f) {
  ReadArchitecture out;
  Hparams& h = out.h;
  h.arch = f.get_string("general.architecture");
  // An Error naming it when no architecture has that name.
  const ArchitectureFactory factory = ArchitectureRegistry::instance().find(h.arch);
  const HparamReader r(f, h.arch);
  h.n_ctx_train = r.int_or("context_length", 2048, 1, kMaxContext);
  h.n_embd = r.required_int("embedding_length", 1, kMaxWidth);
  h.n_layer = r.required_int("block_count", 1, kMaxLayers);
  h.n_ff = r.required_int("feed_forward_length", 1, kMaxWidth);
  h.n_head = r.required_int("attention.head_count", 1, kMaxHeads);
  h.n_head_kv = r.int_or("attention.head_count_kv", h.n_head, 1, kMaxHeads);
  if (h.n_head % h.n_head_kv != 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} = {} is not a multiple of {} = {}",
          r.full("attention.head_count"), h.n_head, r.full("attention.head_count_kv"), h.n_head_kv);
  // Head sizes: explicit (Qwen3, Gemma), else n_embd split evenly over the heads.
  h.n_embd_head_k = r.int_or("attention.key_length", 0, 1, kMaxWidth);
  h.n_embd_head_v = r.int_or("attention.value_length", 0, 1, kMaxWidth);
  if ((h.n_embd_head_k == 0 || h.n_embd_head_v == 0) && h.n_embd % h.n_head != 0)
    raise(ErrorCode::CorruptFile, "hyperparameters: {} = {} is not a multiple of {} = {}",
          r.full("embedding_length"), h.n_embd, r.full("attention.head_count"), h.n_head);
  if (h.n_embd_head_k == 0) h.n_embd_head_k = h.n_embd / h.n_head;
  if (h.n_embd_head_v == 0) h.n_embd_head_v = h.n_embd / h.n_head;
  h.n_rot = r.int_or("rope.dimension_count", h.head_dim(), 2, h.head_dim());
  if (h.n_rot % 2 != 0)
    raise(ErrorCode::CorruptFile, "hyperparameter {} = {} must be even", r.full("rope.dimension_count"),
          h.n_rot);
  // Mixture of experts (llama's Mixtral, qwen3moe): the experts' width is the architecture's to read.
  h.n_expert = r.int_or("expert_count", 0, 0, kMaxHeads);
  h.n_expert_used = r.int_or("expert_used_count", h.n_expert > 0 ? 1 : 0, 0, kMaxHeads);
  if (h.n_expert > 0 && (h.n_expert_used < 1 || h.n_expert_used > h.n_expert))
    raise(ErrorCode::CorruptFile, "hyperparameters: {} = {} must be in [1, {} = {}]",
          r.full("expert_used_count"), h.n_expert_used, r.full("expert_count"), h.n_expert);
  if (h.n_expert == 0) h.n_expert_used = 0;
  if (r.has("vocab_size")) {
    h.n_vocab = r.required_int("vocab_size", 1, kMaxVocab);
  } else if (f.find("tokenizer.ggml.tokens") != nullptr) {
    h.n_vocab = static_cast<int64_t>(f.get_string_array("tokenizer.ggml.tokens").size());
  } else if (const auto* t = f.find_tensor("token_embd.weight")) {
    h.n_vocab = t->ne[1];
  }
  if (h.n_vocab <= 0 || h.n_vocab > kMaxVocab)
    raise(ErrorCode::CorruptFile, "vocabulary size {} is outside [1, {}] ({}, tokenizer.ggml.tokens)",
          h.n_vocab, kMaxVocab, r.full("vocab_size"));
  h.pooling_type = static_cast<int32_t>(r.int_or("pooling_type", -1, 0, 4));
  out.arch = factory(r, h);
  return out;
}

}  // namespace

Hparams read_hparams(const gguf::File& f) { return read_architecture(f).h; }

Model::~Model() = default;

std::vector<size_t> split_by_shares(std::span<const double> sizes, std::span<const double> shares,
                                    std::string_view what) {
  double sum = 0.0;
  for (double x : shares) {
    if (!(x >= 0.0) || !std::isfinite(x))
      raise(ErrorCode::InvalidArgument, "{}: share {} is not a finite number >= 0", what, x);
    sum += x;
  }
  if (!(sum > 0.0)) raise(ErrorCode::InvalidArgument, "{}: the shares sum to 0", what);
  double total = 0.0;
  for (double x : sizes) total += x;
  std::vector<size_t> part(sizes.size());
  double before = 0.0;  // the sizes of the items before r
  for (size_t r = 0; r < sizes.size(); ++r) {
    const double middle = total > 0.0 ? (before + sizes[r] / 2) / total : (r + 0.5) / sizes.size();
    before += sizes[r];
    double cumulative = 0.0;
    size_t p = 0;
    for (; p + 1 < shares.size(); ++p) {
      cumulative += shares[p];
      if (middle * sum < cumulative) break;
    }
    part[r] = p;
  }
  return part;
}

std::vector<size_t> split_by_shares(int64_t n, std::span<const double> shares, std::string_view what) {
  const std::vector<double> ones(static_cast<size_t>(std::max<int64_t>(n, 0)), 1.0);
  return split_by_shares(ones, shares, what);
}

std::vector<double> stage_layer_bytes(const gguf::File& file, bool embeddings_mapped) {
  ReadArchitecture read = read_architecture(file);
  const Hparams& h = read.h;
  EmbeddingWeights io;
  WeightPlan plan(io, h);
  read.arch->declare_weights(plan);
  std::vector<double> bytes(static_cast<size_t>(std::max<int64_t>(h.n_layer, 0)), 0.0);
  if (bytes.empty()) return bytes;
  for (const WeightSpec& spec : plan.specs()) {
    const gguf::TensorInfo* info = file.find_tensor(spec.name);
    if (info == nullptr && !spec.fallback.empty()) info = file.find_tensor(spec.fallback);
    if (info == nullptr) continue;
    const auto b = static_cast<double>(info->nbytes);
    if (spec.where >= 0 && spec.where < h.n_layer)
      bytes[static_cast<size_t>(spec.where)] += b;
    else if (spec.where == kPlaceOutput)
      bytes.back() += b;
    else if (spec.where == kPlaceInput && !embeddings_mapped)
      bytes.front() += b;
    // kPlaceEveryLayer: every stage holds it alike.
  }
  return bytes;
}

void Model::resolve_devices(const LoadOptions& options) {
  n_gpu_layers_ = std::max(0, options.n_gpu_layers);
  if (n_gpu_layers_ == 0 && options.device.empty()) return;
  auto& reg = Registry::instance();
  std::vector<Device*> named;
  for (size_t b = 0; b <= options.device.size();) {  // a comma-separated list
    const size_t e = std::min(options.device.find(',', b), options.device.size());
    const std::string name = options.device.substr(b, e - b);
    if (name.empty() && !options.device.empty())
      raise(ErrorCode::InvalidArgument, "--device '{}': an empty device name", options.device);
    if (!name.empty()) {
      Device* d = &reg.get(name);
      if (std::find(named.begin(), named.end(), d) != named.end())
        raise(ErrorCode::InvalidArgument, "--device '{}' names {} twice", options.device, name);
      if (d->kind() != DeviceKind::Cpu) named.push_back(d);  // "CPU" means no offload
    }
    b = e + 1;
  }
  if (options.device.empty()) {
    Device* pick = nullptr;
    for (Device* d : reg.devices())
      if (d->kind() == DeviceKind::Gpu || d->kind() == DeviceKind::Accelerator) {
        pick = d;
        break;
      }
    if (pick == nullptr)
      for (Device* d : reg.devices())
        if (d->kind() != DeviceKind::Cpu) {
          pick = d;
          break;
        }
    if (pick == nullptr)
      log(LogLevel::Warn,
          fmt::format("-ngl {}: no device found, running every layer on the CPU", n_gpu_layers_));
    else
      named.push_back(pick);
  }
  if (options.split_mode == SplitMode::None && named.size() > 1) named.erase(named.begin() + 1, named.end());
  if (!options.tensor_split.empty() && options.tensor_split.size() != named.size())
    raise(ErrorCode::InvalidArgument, "--tensor-split gives {} shares for {} devices",
          options.tensor_split.size(), named.size());
  if (named.empty() || n_gpu_layers_ == 0) {
    n_gpu_layers_ = 0;
    return;
  }
  // Shares of the offloaded layers: as given, else by the devices' total memory (equal when unknown).
  std::vector<double> share(named.size(), 1.0);
  for (size_t i = 0; i < named.size(); ++i) {
    if (!options.tensor_split.empty())
      share[i] = options.tensor_split[i];
    else if (const size_t total = named[i]->memory().total; total > 0)
      share[i] = static_cast<double>(total);
  }
  // The output layer goes with the last offloaded layer.
  const int64_t n_layer = hparams_.n_layer;
  const int64_t n_off = std::min<int64_t>(n_gpu_layers_, n_layer);
  const int64_t first = n_layer - n_off;
  const std::vector<size_t> part = split_by_shares(n_off, share, "--tensor-split");
  layer_device_.assign(static_cast<size_t>(n_layer + 1), nullptr);
  for (int64_t r = 0; r < n_off; ++r)
    layer_device_[static_cast<size_t>(first + r)] = named[part[static_cast<size_t>(r)]];
  if (n_gpu_layers_ > n_layer)
    layer_device_[static_cast<size_t>(n_layer)] =
        n_off > 0 ? layer_device_[static_cast<size_t>(n_layer - 1)] : named.back();
  for (Device* d : layer_device_)  // the devices that hold something, in layer order
    if (d != nullptr && std::find(devices_.begin(), devices_.end(), d) == devices_.end())
      devices_.push_back(d);
}

HparamList Model::hyperparameters() const {
  const Hparams& h = hparams_;
  HparamList out;
  const auto add = [&](const char* name, const auto& value) { describe(out, name, value); };
  add("arch", h.arch);
  add("n_ctx_train", h.n_ctx_train);
  add("n_embd", h.n_embd);
  add("n_layer", h.n_layer);
  add("n_ff", h.n_ff);
  add("n_head", h.n_head);
  add("n_head_kv", h.n_head_kv);
  add("n_embd_head_k", h.n_embd_head_k);
  add("n_embd_head_v", h.n_embd_head_v);
  add("n_rot", h.n_rot);
  add("n_vocab", h.n_vocab);
  add("n_expert", h.n_expert);
  add("n_expert_used", h.n_expert_used);
  add("encoder", h.encoder);
  add("pooling_type", h.pooling_type);
  arch_->describe(out);
  return out;
}

Tensor* Model::weight(std::string_view name) const noexcept {
  for (const auto& [t, where] : placed_)
    if (t->name == name) return t;
  return nullptr;
}

std::vector<const Tensor*> Model::weight_tensors() const {
  std::vector<const Tensor*> out;
  out.reserve(placed_.size());
  for (const auto& [t, where] : placed_) out.push_back(t);
  return out;
}

size_t Model::weight_bytes() const noexcept {
  size_t total = 0;
  for (const auto& [t, where] : placed_) total += t->nbytes();
  return total;
}

bool Model::in_stage(int64_t where) const noexcept {
  if (where >= 0) return where >= stage_.first && where < stage_.end;
  if (where == kPlaceInput) return first_stage();
  if (where == kPlaceOutput) return last_stage();
  return true;  // every layer's (rope factors)
}

Device* Model::weight_device(int64_t where) const noexcept {
  if (where >= 0) return layer_device(where);
  if (where == kPlaceOutput) return layer_device(hparams_.n_layer);
  if (where == kPlaceEveryLayer) {  // every layer reads it: on their device when they share one
    Device* d = layer_device(0);
    for (int64_t il = 1; il < hparams_.n_layer; ++il)
      if (layer_device(il) != d) return nullptr;
    return d;
  }
  return nullptr;  // token embeddings: GET_ROWS on the host
}

void Model::place_weights(const std::function<const void*(const Tensor&)>& host_data,
                          const std::function<void(const Tensor&, void*)>& fill, const ReadRange& read_range,
                          const gguf::ProgressCallback& progress) {
  // Which weights go to the device: the last n_gpu_layers layers, and the output layer when
  // n_gpu_layers exceeds the layer count. The token embeddings stay on the CPU (GET_ROWS).
  std::vector<Tensor*> on_host, interleaved;
  std::vector<std::vector<Tensor*>> on_device(devices_.size());  // per device of devices_
  for (const auto& [t, where] : placed_) {
    // A model on the CPU alone keeps its Q4_0 / Q8_0 / F16 / BF16 matrices in the CPU's
    // interleaved layout, which only MUL_MAT reads (not the token embeddings: GET_ROWS; a tied
    // output matrix is a tensor of its own).
    Device* d = weight_device(where);
    if (interleave_ && devices_.empty() && where != kPlaceInput && cpu::interleaved_rows(*t) > 0)
      interleaved.push_back(t);
    else if (d == nullptr)
      on_host.push_back(t);
    else
      on_device[static_cast<size_t>(std::find(devices_.begin(), devices_.end(), d) - devices_.begin())]
          .push_back(t);
  }

  size_t total = 0, done = 0;
  for (const auto& list : on_device)
    for (const Tensor* t : list) total += t->nbytes();
  for (const Tensor* t : interleaved) total += t->nbytes();
  // Copies a weight into its (not host-addressable) buffer from the caller's bytes where there are
  // some, else through staging that `fill` writes. With `drop`, bytes of a mapped file go in slices
  // whose pages are dropped once copied (they are not read again): the file's pages never hold
  // more than a slice of the weight beside its copy (peak memory: a whole 35 MB output matrix
  // before).
  std::vector<char> staging;
  const auto upload = [&](Tensor& t, bool drop) {
    constexpr size_t kSliceBytes = size_t{1} << 20;
    const size_t block = traits(t.type).block_bytes;
    const size_t slice = std::max<size_t>(1, kSliceBytes / block) * block;  // whole blocks
    const void* p = host_data(t);
    if (p != nullptr) {
      const bool dropping = drop && file_ != nullptr;
      const size_t step = dropping ? slice : t.nbytes();
      for (size_t o = 0; o < t.nbytes(); o += step) {
        const size_t n = std::min(step, t.nbytes() - o);
        tensor_set(t, static_cast<const char*>(p) + o, o, n);
        if (dropping) file_->release_pages(static_cast<const std::byte*>(p), o + n);
      }
    } else if (read_range) {  // in slices, so that staging never holds a whole large weight
      staging.resize(std::min(slice, t.nbytes()));
      for (size_t o = 0; o < t.nbytes(); o += slice) {
        const size_t n = std::min(slice, t.nbytes() - o);
        read_range(t, o, n, staging.data());
        tensor_set(t, staging.data(), o, n);
      }
    } else {
      staging.resize(t.nbytes());
      fill(t, staging.data());
      tensor_set(t, staging.data(), 0, staging.size());
    }
    done += t.nbytes();
    if (progress) progress(done, total);
  };
  if (!interleaved.empty()) {
    size_t bytes = 0;
    for (const Tensor* t : interleaved) bytes += (t->nbytes() + 63) / 64 * 64;
    buffers_.push_back(cpu::interleaved_buffer_type().allocate(bytes));
    size_t offset = 0;
    for (Tensor* t : interleaved) {
      buffers_.back()->place(*t, offset);
      offset += (t->nbytes() + 63) / 64 * 64;
      upload(*t, true);
    }
  }

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
  for (size_t i = 0; i < devices_.size(); ++i) {  // one buffer per device
    if (on_device[i].empty()) continue;
    BufferType& type = devices_[i]->buffer_type();
    const size_t align = type.alignment();
    size_t device_bytes = 0;
    for (const Tensor* t : on_device[i]) device_bytes += (type.alloc_size(*t) + align - 1) / align * align;
    buffers_.push_back(type.allocate(device_bytes));
    Buffer& buffer = *buffers_.back();
    size_t offset = 0;
    for (Tensor* t : on_device[i]) {
      buffer.place(*t, offset);
      offset += (type.alloc_size(*t) + align - 1) / align * align;
      upload(*t, false);
    }
  }
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  const bool stage = options.stage.has_value();
  m->file_ = std::make_unique<gguf::File>(
      gguf::File::open(path, {.mmap = options.use_mmap, .metadata_only = stage}));
  m->interleave_ = options.use_mmap || stage;  // a stage's weights are read, never held twice
  const gguf::File& f = *m->file_;
  ReadArchitecture read = read_architecture(f);
  m->hparams_ = std::move(read.h);
  m->arch_ = std::move(read.arch);
  m->stage_ = {0, m->hparams_.n_layer};
  if (stage) {
    const LayerRange r = *options.stage;
    if (r.first < 0 || r.first >= r.end || r.end > m->hparams_.n_layer)
      raise(ErrorCode::InvalidArgument, "pipeline stage of layers [{}, {}): the model has layers [0, {})",
            r.first, r.end, m->hparams_.n_layer);
    if (m->hparams_.encoder)
      raise(ErrorCode::Unsupported, "'{}' is an encoder: it does not run as a pipeline", m->hparams_.arch);
    m->stage_ = r;
  }
  WeightPlan plan(m->io_, m->hparams_);
  m->arch_->declare_weights(plan);

  // Every tensor the graph needs must exist with exactly the declared shape and a supported
  // type, all checked before any memory is given.
  struct Found {
    const WeightSpec* spec;
    const gguf::TensorInfo* info;
  };
  std::vector<Found> found;
  for (const WeightSpec& spec : plan.specs()) {
    const gguf::TensorInfo* info = f.find_tensor(spec.name);
    if (info == nullptr && !spec.fallback.empty()) info = f.find_tensor(spec.fallback);
    if (info == nullptr) {
      if (spec.optional) continue;
      raise(ErrorCode::CorruptFile, "{}: tensor {} is missing", path, spec.name);
    }
    const std::array<int64_t, 4> want{spec.ne[0], spec.ne[1], spec.ne[2], 1};
    if (info->ne != want)
      raise(ErrorCode::CorruptFile, "{}: tensor {} has shape [{}, {}, {}, {}], expected [{}, {}{}]", path,
            info->name, info->ne[0], info->ne[1], info->ne[2], info->ne[3], spec.ne[0], spec.ne[1],
            spec.ne[2] == 1 ? std::string() : fmt::format(", {}", spec.ne[2]));
    if (!info->type)
      raise(ErrorCode::Unsupported,
            "{}: tensor {} has type {} (ggml id {}), which Tessera cannot compute with", path, info->name,
            info->type_name(), info->type_id);
    const DType t = *info->type;
    if (spec.ne[1] == 1 && spec.ne[2] == 1 &&
        t != DType::F32)  // norms, biases and factors are read as F32 operands
      raise(ErrorCode::Unsupported, "{}: tensor {} has type {} where F32 was expected", path, info->name,
            tessera::name(t));
    if (!is_weight_type(t))
      raise(ErrorCode::Unsupported, "{}: tensor {} has type {}, which is not supported for weights", path,
            info->name, tessera::name(t));
    found.push_back({&spec, info});
  }
  if (plan.every_tensor_read()) {
    std::unordered_set<std::string_view> read;
    for (const Found& x : found) read.insert(x.info->name);
    for (const gguf::TensorInfo& t : f.tensors())
      if (!read.contains(t.name))
        raise(ErrorCode::Unsupported,
              "{}: tensor {} is not supported: the {} graph has no place for it, and the model computed "
              "without it would not be this file's",
              path, t.name, m->hparams_.arch);
  }
  m->resolve_devices(options);

  std::unordered_map<const Tensor*, const gguf::TensorInfo*> source;
  std::unordered_set<const Tensor*> mapped;  // a stage's weights it maps instead of reading
  for (const Found& x : found) {
    if (!m->in_stage(x.spec->where)) continue;  // another stage's
    Tensor* t = m->ctx_.new_tensor(*x.info->type, x.spec->ne[0], x.spec->ne[1], x.spec->ne[2]);
    t->name = x.spec->name;
    t->flags |= kFlagWeight;
    if (x.info->name != x.spec->name) {
      t->name = fmt::format("{} (tied to {})", x.spec->name, x.info->name);
      if (x.spec->slot == &m->io_.output) m->tied_output_ = true;
    }
    *x.spec->slot = t;
    m->placed_.emplace_back(t, x.spec->where);
    source.emplace(t, x.info);
    // The first stage's token embeddings, of which a prompt reads a few rows (GET_ROWS): mapped,
    // they cost only the pages read (65 MB read whole on a 32000 x 1024 F16 vocabulary).
    if (stage && options.use_mmap && x.spec->where == kPlaceInput) mapped.insert(t);
  }
  m->place_weights(
      [&](const Tensor& t) -> const void* {
        const gguf::TensorInfo& info = *source.at(&t);
        return mapped.contains(&t) ? f.map_tensor(info) : f.tensor_data(info);
      },
      [&](const Tensor& t, void* dst) { f.read_tensor(*source.at(&t), dst); },
      [&](const Tensor& t, size_t offset, size_t n, void* dst) {
        f.read_tensor(*source.at(&t), dst, offset, n);
      },
      options.progress);
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
  if (options.stage) raise(ErrorCode::Unsupported, "a synthetic model does not run as a pipeline stage");
  m->stage_ = {0, h.n_layer};
  m->resolve_devices(options);
  h.n_embd_head_k = h.n_embd_head_v = h.n_rot;
  // A Llama with the defaults of every key it reads (a reader of no file).
  m->arch_ = ArchitectureRegistry::instance().find(h.arch)(HparamReader(h.arch), h);
  WeightPlan plan(m->io_, h);
  m->arch_->declare_weights(plan);
  for (const WeightSpec& ws : plan.specs()) {
    if (ws.optional) continue;  // a synthetic Llama has no rope factors
    const DType type = ws.ne[1] == 1 ? DType::F32 : spec.type;
    if (is_grid_iquant(type))
      raise(ErrorCode::Unsupported, "synthetic model: {} weights are not written here", tessera::name(type));
    if (ws.ne[0] % traits(type).block_size != 0)
      raise(ErrorCode::InvalidArgument, "synthetic model: tensor {} of type {} needs ne0 divisible by {}",
            ws.name, tessera::name(type), traits(type).block_size);
    Tensor* t = m->ctx_.new_tensor(type, ws.ne[0], ws.ne[1]);
    t->name = ws.name;
    t->flags |= kFlagWeight;
    *ws.slot = t;
    m->placed_.emplace_back(t, ws.where);
  }
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
  m->place_weights([](const Tensor&) -> const void* { return nullptr; }, fill, {}, options.progress);
  return m;
}

}  // namespace tessera::llm
