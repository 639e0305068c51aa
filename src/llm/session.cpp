// A Session turns batches into graphs (through the model architecture's builder), places their
// inputs, runs them on the CPU or through the scheduler, and keeps the KV cache's cells.
#include "tessera/llm/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

Session::Session(const Model& model, const SessionOptions& options)
    : model_(model), arch_(architecture(model.hparams().arch)), options_(options) {
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

void Session::eval(const Batch& batch, size_t start, size_t n, std::span<const float> hidden,
                   std::vector<float>& out) {
  const std::span<const SeqId> seqs(batch.seq_ids.data() + start, n);
  const std::vector<int64_t> cells = cache_->find_slots(seqs);  // room checked by validate
  const std::span<const Pos> pos(batch.positions.data() + start, n);
  cache_->store(cells, pos, seqs);

  Context ctx;
  Graph graph;
  GraphBuild b{ctx, graph, model_, *cache_};
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
  // A stage before the last gives every row to the next.
  const bool wants_logits = !b.out_rows.empty() || !model_.last_stage();
  if (b.out_rows.empty()) b.out_rows.push_back(static_cast<int32_t>(n - 1));
  b.tokens = new_input(ctx, b.n_tokens, "inp_tokens");
  b.positions = new_input(ctx, b.n_tokens, "inp_pos");
  if (!model_.first_stage()) b.hidden_in = new_hidden_input(ctx, model_.hparams().n_embd, b.n_tokens);

  Tensor* logits = arch_.build(b);
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
  std::memcpy(b.tokens->data, batch.tokens.data() + start, n * sizeof(int32_t));
  if (b.hidden_in != nullptr) std::memcpy(b.hidden_in->data, hidden.data(), hidden.size_bytes());
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

void Session::place_inputs(const std::vector<Tensor*>& inputs) {
  size_t total = 0;
  for (const Tensor* t : inputs) total += align_up(t->nbytes(), kInputAlign);
  if (!input_buffer_ || input_buffer_->size() < total) input_buffer_ = host_buffer_type().allocate(total);
  size_t offset = 0;
  for (Tensor* t : inputs) {
    input_buffer_->place(*t, offset);
    offset += align_up(t->nbytes(), kInputAlign);
  }
}

std::string Session::last_graph_shapes() const {
  std::string out;
  for (const auto& [op, ne] : last_shapes_)
    out += fmt::format("{}[{},{},{},{}] ", op_name(op), ne[0], ne[1], ne[2], ne[3]);
  return out;
}

std::string Session::report() const { return scheduler_->report(); }

size_t Session::activation_bytes() const noexcept { return scheduler_->buffer_bytes(); }

}  // namespace tessera::llm
