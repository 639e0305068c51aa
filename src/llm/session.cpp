// A Session turns batches into graphs (through the model architecture's builder), places their
// inputs, runs them on the CPU or through the scheduler, and keeps the KV cache's cells.
#include "tessera/llm/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>

#include "arch/architecture.h"
#include "core/check.h"
#include "tessera/ops.h"

namespace tessera::llm {
namespace {

constexpr size_t kInputAlign = 64;
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

Tensor* new_input(Context& ctx, int64_t n, const char* name) {
  Tensor* t = ctx.new_tensor(DType::I32, n);
  t->name = name;
  t->flags |= kFlagInput;
  return t;
}

Tensor* new_hidden_input(Context& ctx, int64_t n_embd, int64_t n_tokens) {
  Tensor* t = ctx.new_tensor(DType::F32, n_embd, n_tokens);
  t->name = "inp_hidden";
  t->flags |= kFlagInput;
  return t;
}

}  // namespace

struct Session::DeviceStage {
  LayerRange layers;
  std::string name;  // the device's ("CPU" for layers on the CPU)
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::pair<double, double>> busy;  // the last decode's computes, ms from its start
};

Session::Session(const Model& model, const SessionOptions& options)
    : model_(model), arch_(model.architecture()), options_(options) {
  const Hparams& h = model.hparams();
  const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(h.n_ctx_train, 4096);
  if (n_ctx <= 0) raise(ErrorCode::InvalidArgument, "context size must be positive, got {}", n_ctx);
  if (options_.n_batch <= 0)
    raise(ErrorCode::InvalidArgument, "batch size must be positive, got {}", options_.n_batch);
  if (h.encoder && !options_.embeddings)
    raise(ErrorCode::Unsupported,
          "'{}' is an embedding model: it computes no logits, only embeddings (SessionOptions::embeddings, "
          "tessera embed, the server's /v1/embeddings)",
          h.arch);
  if (options_.kv_pad <= 0)
    raise(ErrorCode::InvalidArgument, "KV padding must be positive, got {}", options_.kv_pad);
  cache_ = std::make_unique<KvCache>(model, n_ctx, options_.kv_type);
  cpu_ = std::make_unique<cpu::CpuBackend>(options.n_threads);
  // The scheduler keeps a plan per graph shape (generation steps reuse it), on the CPU too.
  std::vector<Backend*> backends;
  for (Device* d : model.devices()) {  // each device's nodes run on its backend, copies between them
    device_backends_.push_back(d->make_backend());
    backends.push_back(device_backends_.back().get());
  }
  backends.push_back(cpu_.get());
  scheduler_ = std::make_unique<Scheduler>(std::move(backends));
  if (options_.n_ubatch < 0)
    raise(ErrorCode::InvalidArgument, "micro-batch size must be positive or 0 (auto), got {}",
          options_.n_ubatch);
  // Layers on several devices: a stage per device's contiguous layers, for pipelined decodes.
  if (model.devices().size() >= 2) {
    std::vector<std::pair<LayerRange, Device*>> ranges;
    for (int64_t il = model.first_layer(); il < model.end_layer(); ++il) {
      Device* d = model.layer_device(il);
      if (ranges.empty() || ranges.back().second != d)
        ranges.push_back({{il, il + 1}, d});
      else
        ++ranges.back().first.end;
    }
    for (size_t r = 0; ranges.size() >= 2 && r < ranges.size(); ++r) {
      auto st = std::make_unique<DeviceStage>();
      st->layers = ranges[r].first;
      Device* d = ranges[r].second;
      st->name = d != nullptr ? d->name() : "CPU";
      st->cpu = std::make_unique<cpu::CpuBackend>(options.n_threads);
      // Its device's backend, and on the last stage the output layer's device's.
      Device* output = r + 1 == ranges.size() ? model.layer_device(h.n_layer) : nullptr;
      std::vector<Backend*> own;
      for (size_t i = 0; i < model.devices().size(); ++i)
        if (model.devices()[i] == d || model.devices()[i] == output) own.push_back(device_backends_[i].get());
      own.push_back(st->cpu.get());
      st->scheduler = std::make_unique<Scheduler>(std::move(own));
      device_stages_.push_back(std::move(st));
    }
  }
}

Session::~Session() = default;

void Session::validate(const Batch& b) const {
  const size_t n = b.tokens.size();
  if (n == 0) raise(ErrorCode::InvalidArgument, "decode: no tokens given");
  if (b.positions.size() != n || b.seq_ids.size() != n || b.logits.size() != n)
    raise(ErrorCode::InvalidArgument,
          "decode: the batch has {} tokens but {} positions, {} sequence ids and {} logits flags", n,
          b.positions.size(), b.seq_ids.size(), b.logits.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= n_vocab)
      raise(ErrorCode::InvalidArgument, "token id {} at index {} is outside the vocabulary [0, {})",
            b.tokens[i], i, n_vocab);
    if (b.positions[i] < 0)
      raise(ErrorCode::InvalidArgument, "token {} has negative position {}", i, b.positions[i]);
    if (b.seq_ids[i] < 0)
      raise(ErrorCode::InvalidArgument, "token {} has negative sequence id {}", i, b.seq_ids[i]);
  }
  const int64_t free_cells = cache_->size() - cache_->used();
  if (static_cast<int64_t>(n) > free_cells)
    raise(ErrorCode::ContextFull, "{} tokens do not fit in the KV cache: {} of its {} cells are free", n,
          free_cells, cache_->size());
}

const std::vector<float>& Session::decode(const Batch& batch) { return decode(batch, {}); }

const std::vector<float>& Session::decode(const Batch& batch, std::span<const float> hidden) {
  validate(batch);
  const auto n_embd = static_cast<size_t>(model_.hparams().n_embd);
  if (model_.first_stage() != hidden.empty() || (!hidden.empty() && hidden.size() != batch.size() * n_embd))
    raise(ErrorCode::InvalidArgument,
          "decode: a pipeline stage of layers [{}, {}) takes {} hidden states, {} given",
          model_.first_layer(), model_.end_layer(), model_.first_stage() ? 0 : batch.size() * n_embd,
          hidden.size());
  if (model_.hparams().encoder && static_cast<int64_t>(batch.size()) > options_.n_batch)
    raise(ErrorCode::InvalidArgument,
          "{} tokens are more than the batch of {}: an encoder sees each sequence whole, in one batch",
          batch.size(), options_.n_batch);
  if (link_ != nullptr) link_->begin(*cache_);
  if (cache_->needs_k_shift()) apply_k_shift();
  logits_.clear();
  pipeline_timeline_.clear();
  if (const size_t micro = pipeline_micro_batch();
      micro > 0 && hidden.empty() && link_ == nullptr && batch.size() > micro) {
    decode_pipelined(batch, micro);
    return logits_;
  }
  std::vector<float> part;
  const size_t step = static_cast<size_t>(options_.n_batch);
  for (size_t start = 0; start < batch.size(); start += step) {
    const size_t n = std::min(batch.size() - start, step);
    eval(batch, start, n, hidden.empty() ? hidden : hidden.subspan(start * n_embd, n * n_embd), part);
    if (link_ != nullptr)
      link_->forward(batch, start, n, part);
    else
      logits_.insert(logits_.end(), part.begin(), part.end());
  }
  if (link_ != nullptr) link_->finish(logits_);
  return logits_;
}

size_t Session::pipeline_micro_batch() const {
  if (device_stages_.empty() || options_.embeddings || mat_mul_observer_ || model_.hparams().encoder)
    return 0;
  // Auto: four micro-batches per device, but none under 32 tokens (smaller ones cost more in graph
  // overhead than the overlap gains).
  constexpr int64_t kSmallestAuto = 32;
  const int64_t n =
      options_.n_ubatch > 0
          ? options_.n_ubatch
          : std::max(options_.n_batch / (4 * static_cast<int64_t>(device_stages_.size())), kSmallestAuto);
  return static_cast<size_t>(std::clamp<int64_t>(n, 1, options_.n_batch));
}

// The micro-batches go through the device stages as a wavefront: at step w, stage s computes
// micro-batch w - s (each stage on a thread of its own, with its own scheduler and buffers), then
// every stage's hidden states go on to the next. A micro-batch's graphs are all built when it is
// first prepared, so each sees the cache as the unpipelined decode of that micro-batch would: the
// same graphs, split by layers, and the same numbers.
void Session::decode_pipelined(const Batch& batch, size_t micro_batch) {
  struct Piece {
    Context ctx;
    Graph graph;
    Tensor* out = nullptr;
    Tensor* hidden_in = nullptr;
    bool wants = false;
    std::unique_ptr<Buffer> inputs;
    std::vector<float> result;
  };
  const size_t n_stages = device_stages_.size();
  const size_t n_micro = (batch.size() + micro_batch - 1) / micro_batch;
  std::vector<std::vector<std::unique_ptr<Piece>>> pieces(n_micro);
  const auto prepare = [&](size_t k) {
    const size_t start = k * micro_batch, n = std::min(micro_batch, batch.size() - start);
    const std::span<const SeqId> seqs(batch.seq_ids.data() + start, n);
    const std::vector<int64_t> cells = cache_->find_slots(seqs);
    cache_->store(cells, std::span<const Pos>(batch.positions.data() + start, n), seqs);
    for (const auto& stage : device_stages_) {
      auto p = std::make_unique<Piece>();
      GraphBuild b{p->ctx, p->graph, model_, *cache_};
      b.layers = stage->layers;
      p->out = build(b, batch, start, n, cells, p->wants);
      p->graph.expand(p->out);
      p->hidden_in = b.hidden_in;
      place_inputs(graph_inputs(b), p->inputs);
      fill_inputs(b, batch, start, n);
      pieces[k].push_back(std::move(p));
    }
  };
  const auto began = std::chrono::steady_clock::now();
  const auto ms_since = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - began).count();
  };
  for (auto& stage : device_stages_) stage->busy.clear();
  for (size_t w = 0; w + 1 < n_micro + n_stages; ++w) {
    if (w < n_micro) prepare(w);
    for (size_t s = 1; s < n_stages; ++s) {  // the previous step's hidden states, one stage on
      if (w < s || w - s >= n_micro) continue;
      Piece& from = *pieces[w - s][s - 1];
      Piece& to = *pieces[w - s][s];
      std::memcpy(to.hidden_in->data, from.result.data(), from.result.size() * sizeof(float));
      pieces[w - s][s - 1].reset();
    }
    std::vector<std::future<void>> running;
    for (size_t s = 0; s < n_stages; ++s) {
      if (w < s || w - s >= n_micro) continue;
      running.push_back(std::async(std::launch::async, [&, s, k = w - s] {
        DeviceStage& stage = *device_stages_[s];
        Piece& p = *pieces[k][s];
        const double t0 = ms_since(std::chrono::steady_clock::now());
        stage.scheduler->compute(p.graph);
        if (p.wants) {
          p.result.resize(static_cast<size_t>(p.out->nelements()));
          tensor_get(stage.scheduler->result(*p.out), p.result.data(), 0, p.result.size() * sizeof(float));
        }
        stage.busy.emplace_back(t0, ms_since(std::chrono::steady_clock::now()));
      }));
    }
    for (auto& f : running) f.wait();
    for (auto& f : running) f.get();  // the first failure, once every stage has stopped
    if (w + 1 >= n_stages) {          // the last stage finished micro-batch w - (n_stages - 1)
      Piece& last = *pieces[w + 1 - n_stages][n_stages - 1];
      logits_.insert(logits_.end(), last.result.begin(), last.result.end());
      pieces[w + 1 - n_stages].clear();
    }
  }

  // The timeline: each stage's busy time and how long two or more computed at once.
  const double total = ms_since(std::chrono::steady_clock::now());
  std::vector<std::pair<double, int>> edges;
  for (const auto& stage : device_stages_)
    for (const auto& [t0, t1] : stage->busy) edges.push_back({t0, 1}), edges.push_back({t1, -1});
  std::sort(edges.begin(), edges.end());
  double overlap = 0.0, at = 0.0;
  int busy = 0;
  for (const auto& [t, d] : edges) {
    if (busy >= 2) overlap += t - at;
    busy += d;
    at = t;
  }
  std::string stages;
  for (const auto& stage : device_stages_) {
    double sum = 0.0;
    for (const auto& [t0, t1] : stage->busy) sum += t1 - t0;
    stages += fmt::format("{}{} (layers {}-{}) busy {:.1f} ms", stages.empty() ? "" : ", ", stage->name,
                          stage->layers.first, stage->layers.end - 1, sum);
  }
  pipeline_timeline_ = fmt::format(
      "pipeline: {} tokens in {} micro-batches of {} across {} stages: {}; two or more stages at once for "
      "{:.1f} ms of {:.1f} ms ({:.0f}%)\n",
      batch.size(), n_micro, micro_batch, n_stages, stages, overlap, total,
      total > 0 ? 100.0 * overlap / total : 0.0);
}

void Session::set_stage_link(StageLink* link) {
  if (link != nullptr && (!model_.first_stage() || model_.last_stage()))
    raise(ErrorCode::InvalidArgument, "a stage link belongs to the first stage of a pipeline of several");
  link_ = link;
}

std::vector<Tensor*> Session::graph_inputs(const GraphBuild& b) const {
  std::vector<Tensor*> inputs{b.tokens, b.positions};
  if (b.hidden_in != nullptr) inputs.push_back(b.hidden_in);
  if (b.out_ids != nullptr) inputs.push_back(b.out_ids);
  for (const auto& [window, mask] : b.masks) inputs.push_back(mask);
  if (b.seq_mask != nullptr) inputs.push_back(b.seq_mask);
  return inputs;
}

const std::vector<float>& Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) raise(ErrorCode::InvalidArgument, "decode: no tokens given");
  const int64_t past = n_past();
  if (past + static_cast<int64_t>(tokens.size()) > n_ctx())
    raise(ErrorCode::ContextFull, "{} tokens at position {} do not fit in the context of {} tokens",
          tokens.size(), past, n_ctx());
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], static_cast<Pos>(past + static_cast<int64_t>(i)), 0,
          all_logits || i + 1 == tokens.size());
  return decode(b);
}

Tensor* Session::build(GraphBuild& b, const Batch& batch, size_t start, size_t n,
                       std::span<const int64_t> cells, bool& wants_logits) const {
  b.n_tokens = static_cast<int64_t>(n);
  const int64_t pad = options_.kv_pad;
  b.n_kv = std::min(cache_->size(), (cache_->used_end() + pad - 1) / pad * pad);
  b.flash_attn = options_.flash_attn;
  b.embeddings = options_.embeddings;
  for (size_t t = 0; t < n; ++t) {
    const int64_t tt = static_cast<int64_t>(t);
    if (!b.runs.empty() && b.runs.back().token + b.runs.back().n == tt &&
        b.runs.back().cell + b.runs.back().n == cells[t])
      ++b.runs.back().n;
    else
      b.runs.push_back({tt, cells[t], 1});
    if (batch.logits[start + t]) b.out_rows.push_back(static_cast<int32_t>(t));
  }
  // A batch that wants no logits still runs (to fill the cache); its last row is computed unread.
  // A graph that does not end the model gives every row to the next.
  wants_logits = !b.out_rows.empty() || !b.ends_model();
  if (b.out_rows.empty()) b.out_rows.push_back(static_cast<int32_t>(n - 1));
  b.tokens = new_input(b.ctx, b.n_tokens, "inp_tokens");
  b.positions = new_input(b.ctx, b.n_tokens, "inp_pos");
  if (b.layers.first > 0) b.hidden_in = new_hidden_input(b.ctx, model_.hparams().n_embd, b.n_tokens);
  return arch_.build(b);
}

void Session::fill_inputs(const GraphBuild& b, const Batch& batch, size_t start, size_t n) const {
  const std::span<const SeqId> seqs(batch.seq_ids.data() + start, n);
  const std::span<const Pos> pos(batch.positions.data() + start, n);
  std::memcpy(b.tokens->data, batch.tokens.data() + start, n * sizeof(int32_t));
  if (b.seq_mask != nullptr) {  // an encoder's tokens see their own sequence's, in this batch
    auto* m = static_cast<float*>(b.seq_mask->data);
    for (size_t q = 0; q < n; ++q)
      for (size_t k = 0; k < n; ++k) m[q * n + k] = seqs[q] == seqs[k] ? 0.0f : -INFINITY;
  }
  std::memcpy(b.positions->data, pos.data(), n * sizeof(int32_t));
  if (b.out_ids != nullptr)
    std::memcpy(b.out_ids->data, b.out_rows.data(), b.out_rows.size() * sizeof(int32_t));
  for (const auto& [window, mask] : b.masks)
    cache_->fill_mask(pos, seqs, b.n_kv, window, static_cast<float*>(mask->data));
}

void Session::eval(const Batch& batch, size_t start, size_t n, std::span<const float> hidden,
                   std::vector<float>& out) {
  const std::span<const SeqId> seqs(batch.seq_ids.data() + start, n);
  const std::vector<int64_t> cells = cache_->find_slots(seqs);  // room checked by validate
  const std::span<const Pos> pos(batch.positions.data() + start, n);
  cache_->store(cells, pos, seqs);

  Context ctx;
  Graph graph;
  GraphBuild b{ctx, graph, model_, *cache_};
  bool wants_logits = false;
  Tensor* logits = build(b, batch, start, n, cells, wants_logits);
  graph.expand(logits);
  // With an observer, each weight product's f32 input (made contiguous) and expert ids are outputs too.
  struct Observed {
    const Tensor* product;
    Tensor* x;
    Tensor* ids;
  };
  std::vector<Observed> observed;
  if (mat_mul_observer_) {
    const std::vector<Tensor*> nodes = graph.nodes();
    for (Tensor* t : nodes) {
      if ((t->op != Op::MulMat && t->op != Op::MulMatId) || (t->src[0]->flags & kFlagWeight) == 0) continue;
      Tensor* x = t->src[1];
      if (x->type != DType::F32) continue;  // (llama-imatrix, too, reads only f32 inputs)
      if (!x->is_contiguous()) x = ops::cont(ctx, x);
      Tensor* ids = t->op == Op::MulMatId ? t->src[2] : nullptr;
      if (ids != nullptr && !ids->is_contiguous()) ids = ops::cont(ctx, ids);
      graph.expand(x);
      if (ids != nullptr) graph.expand(ids);
      observed.push_back({t, x, ids});
    }
  }

  place_inputs(graph_inputs(b));
  fill_inputs(b, batch, start, n);
  if (b.hidden_in != nullptr) std::memcpy(b.hidden_in->data, hidden.data(), hidden.size_bytes());

  compute(graph);
  last_shapes_.clear();
  for (const Tensor* t : graph.nodes()) last_shapes_.emplace_back(t->op, t->ne);
  std::vector<float> xs;
  std::vector<int32_t> ids;
  for (const Observed& o : observed) {
    MatMulInput in;
    in.weight = o.product->src[0];
    in.ne = o.x->ne;
    xs.resize(static_cast<size_t>(o.x->nelements()));
    tensor_get(scheduler_->result(*o.x), xs.data(), 0, xs.size() * sizeof(float));
    in.x = xs.data();
    if (o.ids != nullptr) {
      ids.resize(static_cast<size_t>(o.ids->nelements()));
      tensor_get(scheduler_->result(*o.ids), ids.data(), 0, ids.size() * sizeof(int32_t));
      in.ids = ids.data();
      in.ids_ne = {o.ids->ne[0], o.ids->ne[1]};
    }
    mat_mul_observer_(in);
  }
  out.clear();
  if (!wants_logits) return;
  out.resize(static_cast<size_t>(logits->nelements()));
  tensor_get(scheduler_->result(*logits), out.data(), 0, out.size() * sizeof(float));
}

void Session::reserve(int64_t n_outputs) {
  if (cache_->used() != 0) raise(ErrorCode::InvalidArgument, "reserve: the KV cache is in use");
  Context ctx;
  Graph graph;
  GraphBuild b{ctx, graph, model_, *cache_};
  b.n_tokens = std::min(options_.n_batch, cache_->size());
  b.n_kv = cache_->size();
  b.runs.push_back({0, 0, b.n_tokens});  // nothing runs: the cache is not written
  b.embeddings = options_.embeddings;
  n_outputs = std::clamp<int64_t>(n_outputs, 1, b.n_tokens);
  for (int64_t t = b.n_tokens - n_outputs; t < b.n_tokens; ++t) b.out_rows.push_back(static_cast<int32_t>(t));
  b.tokens = new_input(ctx, b.n_tokens, "inp_tokens");
  b.positions = new_input(ctx, b.n_tokens, "inp_pos");
  if (!model_.first_stage()) b.hidden_in = new_hidden_input(ctx, model_.hparams().n_embd, b.n_tokens);
  graph.expand(arch_.build(b));
  place_inputs(graph_inputs(b));
  input_buffer_->clear(0);  // resident now, like the scheduler's buffers
  scheduler_->reserve(graph);
}

void Session::apply_k_shift() {
  Context ctx;
  Graph graph;
  GraphBuild b{ctx, graph, model_, *cache_};
  b.n_kv = cache_->size();
  Tensor* shifts = new_input(ctx, cache_->size(), "k_shifts");
  arch_.build_k_shift(b, shifts);
  place_inputs({shifts});
  auto* s = static_cast<int32_t*>(shifts->data);
  for (int64_t i = 0; i < cache_->size(); ++i) s[i] = cache_->cell(i).shift;
  compute(graph);
  cache_->k_shift_done();
}

void Session::compute(Graph& graph) { scheduler_->compute(graph); }

void Session::place_inputs(const std::vector<Tensor*>& inputs) { place_inputs(inputs, input_buffer_); }

void Session::place_inputs(const std::vector<Tensor*>& inputs, std::unique_ptr<Buffer>& buffer) {
  size_t total = 0;
  for (const Tensor* t : inputs) total += align_up(t->nbytes(), kInputAlign);
  if (!buffer || buffer->size() < total) buffer = host_buffer_type().allocate(std::max<size_t>(total, 1));
  size_t offset = 0;
  for (Tensor* t : inputs) {
    buffer->place(*t, offset);
    offset += align_up(t->nbytes(), kInputAlign);
  }
}

std::string Session::last_graph_shapes() const {
  std::string out;
  for (const auto& [op, ne] : last_shapes_)
    out += fmt::format("{}[{},{},{},{}] ", op_name(op), ne[0], ne[1], ne[2], ne[3]);
  return out;
}

std::string Session::report() const {
  if (pipeline_timeline_.empty()) return scheduler_->report();
  std::string out;
  for (const auto& stage : device_stages_)
    out += fmt::format("stage {} (layers {}-{}):\n{}", stage->name, stage->layers.first,
                       stage->layers.end - 1, stage->scheduler->report());
  return out + pipeline_timeline_;
}

size_t Session::activation_bytes() const noexcept { return scheduler_->buffer_bytes(); }

}  // namespace tessera::llm
