// The Llama forward pass as a Tessera graph (see ../shared/OPS.md, "The llama architecture").
#include "tessera/llm/session.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "tessera/ops.h"

namespace tessera::llm {
namespace {

constexpr size_t kInputAlign = 64;
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

Session::Session(const Model& model, const SessionOptions& options) : model_(model), options_(options) {
  const Hparams& h = model.hparams();
  n_ctx_ = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(h.n_ctx_train, 4096);
  if (n_ctx_ <= 0) raise(ErrorCode::InvalidArgument, "context size must be positive, got {}", n_ctx_);
  if (options_.n_batch <= 0)
    raise(ErrorCode::InvalidArgument, "batch size must be positive, got {}", options_.n_batch);
  if (options_.kv_type != DType::F16 && options_.kv_type != DType::F32)
    raise(ErrorCode::InvalidArgument, "KV cache type must be f16 or f32, got {}", name(options_.kv_type));
  cpu_ = std::make_unique<cpu::CpuBackend>(options.n_threads);

  // KV cache: K rows per position [n_embd_kv, n_ctx]; V transposed [n_ctx, n_embd_kv] so that
  // attention reads V^T rows contiguously. Each layer's cache lives with the layer's weights.
  const int64_t n_kv_embd = h.n_embd_kv();
  std::vector<Tensor*> host_caches, device_caches;
  for (int64_t il = 0; il < h.n_layer; ++il) {
    Tensor* k = cache_ctx_.new_tensor(options_.kv_type, n_kv_embd, n_ctx_);
    Tensor* v = cache_ctx_.new_tensor(options_.kv_type, n_ctx_, n_kv_embd);
    k->name = fmt::format("cache_k.{}", il);
    v->name = fmt::format("cache_v.{}", il);
    k_cache_.push_back(k);
    v_cache_.push_back(v);
    auto& list = model.layer_on_device(il) ? device_caches : host_caches;
    list.push_back(k);
    list.push_back(v);
  }
  auto place_all = [&](BufferType& type, const std::vector<Tensor*>& tensors) {
    if (tensors.empty()) return;
    size_t total = 0;
    for (const Tensor* t : tensors) total += align_up(type.alloc_size(*t), type.alignment());
    cache_buffers_.push_back(type.allocate(total));
    cache_buffers_.back()->clear(0);
    size_t offset = 0;
    for (Tensor* t : tensors) {
      cache_buffers_.back()->place(*t, offset);
      offset += align_up(type.alloc_size(*t), type.alignment());
    }
  };
  place_all(host_buffer_type(), host_caches);
  if (model.device() != nullptr) {
    place_all(model.device()->buffer_type(), device_caches);
    device_backend_ = model.device()->make_backend();
    scheduler_ = std::make_unique<Scheduler>(std::vector<Backend*>{device_backend_.get(), cpu_.get()});
  } else {
    allocator_ = std::make_unique<GraphAllocator>(host_buffer_type());
  }

  // Inputs (token ids, positions, mask) for the largest batch, allocated once.
  const int64_t nb = options_.n_batch;
  const size_t input_bytes = align_up(static_cast<size_t>(nb) * 4, kInputAlign) * 2 +
                             align_up(static_cast<size_t>(n_ctx_ * nb) * 4, kInputAlign);
  input_buffer_ = host_buffer_type().allocate(input_bytes);
}

Session::~Session() = default;

const std::vector<float>& Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  const Hparams& h = model_.hparams();
  if (tokens.empty()) raise(ErrorCode::InvalidArgument, "decode: no tokens given");
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    raise(ErrorCode::InvalidArgument, "{} tokens at position {} do not fit in the context of {} tokens",
          tokens.size(), n_past_, n_ctx_);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= h.n_vocab)
      raise(ErrorCode::InvalidArgument, "token id {} at index {} is outside the vocabulary [0, {})",
            tokens[i], i, h.n_vocab);
  logits_.clear();
  std::vector<float> batch_logits;
  for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(options_.n_batch)) {
    const size_t n = std::min(tokens.size() - start, static_cast<size_t>(options_.n_batch));
    const bool last = start + n == tokens.size();
    eval_batch(tokens.subspan(start, n), all_logits, batch_logits);
    if (all_logits || last) logits_.insert(logits_.end(), batch_logits.begin(), batch_logits.end());
  }
  return logits_;
}

void Session::eval_batch(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& out) {
  const Hparams& h = model_.hparams();
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  const int64_t n_kv = n_past_ + n_tokens;
  const int64_t hd = h.head_dim();
  const int64_t n_embd_kv = h.n_embd_kv();
  const size_t kv_es = traits(options_.kv_type).block_bytes;

  Context ctx;
  // Inputs in the persistent input buffer.
  Tensor* inp_tokens = ctx.new_tensor(DType::I32, n_tokens);
  Tensor* inp_pos = ctx.new_tensor(DType::I32, n_tokens);
  Tensor* kq_mask = ctx.new_tensor(DType::F32, n_kv, n_tokens);
  inp_tokens->name = "inp_tokens";
  inp_pos->name = "inp_pos";
  kq_mask->name = "kq_mask";
  const size_t slot = align_up(static_cast<size_t>(options_.n_batch) * 4, kInputAlign);
  input_buffer_->place(*inp_tokens, 0);
  input_buffer_->place(*inp_pos, slot);
  input_buffer_->place(*kq_mask, 2 * slot);
  std::memcpy(inp_tokens->data, tokens.data(), tokens.size() * 4);
  auto* pos = static_cast<int32_t*>(inp_pos->data);
  for (int64_t i = 0; i < n_tokens; ++i) pos[i] = static_cast<int32_t>(n_past_ + i);
  // Causal mask: token i (position n_past + i) sees cache entries j <= n_past + i.
  auto* mask = static_cast<float*>(kq_mask->data);
  for (int64_t i = 0; i < n_tokens; ++i)
    for (int64_t j = 0; j < n_kv; ++j)
      mask[i * n_kv + j] = j <= n_past_ + i ? 0.0f : -std::numeric_limits<float>::infinity();

  ops::RopeParams rp;
  rp.n_dims = static_cast<int>(h.n_rot);
  rp.mode = RopeMode::Normal;
  rp.n_ctx_orig = static_cast<int>(h.rope_n_ctx_orig);
  rp.freq_base = h.rope_freq_base;
  rp.freq_scale = h.rope_freq_scale;
  rp.ext_factor = h.rope_yarn_ext_factor;
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  Graph graph;
  Tensor* x = ops::get_rows(ctx, model_.token_embd(), inp_tokens);
  x->name = "embd";
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const Layer& l = model_.layers()[static_cast<size_t>(il)];
    // Node names ("attn_q.3", ...) make placement reports and errors readable.
    auto named = [il](Tensor* t, const char* what) {
      t->name = fmt::format("{}.{}", what, il);
      return t;
    };
    Tensor* cur =
        named(ops::mul(ctx, named(ops::rms_norm(ctx, x, h.rms_eps), "attn_rms"), l.attn_norm), "attn_in");
    Tensor* q = ops::reshape(ctx, named(ops::mul_mat(ctx, l.wq, cur), "q"), hd, h.n_head, n_tokens);
    Tensor* k = ops::reshape(ctx, named(ops::mul_mat(ctx, l.wk, cur), "k"), hd, h.n_head_kv, n_tokens);
    Tensor* v = named(ops::mul_mat(ctx, l.wv, cur), "v");  // [n_embd_kv, n_tokens]
    q = named(ops::rope(ctx, q, inp_pos, nullptr, rp), "q_rope");
    k = named(ops::rope(ctx, k, inp_pos, nullptr, rp), "k_rope");

    // Store this batch's K and V at positions n_past.. (expanded first so that the attention
    // below, which reads the cache, runs after the stores).
    Tensor* k_cache = k_cache_[static_cast<size_t>(il)];
    Tensor* v_cache = v_cache_[static_cast<size_t>(il)];
    Tensor* k_dst = ops::view(ctx, k_cache, {n_embd_kv * n_tokens, 1, 1, 1}, k_cache->nb[1], k_cache->nb[1],
                              k_cache->nb[1], static_cast<size_t>(n_past_) * k_cache->nb[1]);
    Tensor* v_dst =
        ops::view(ctx, v_cache, {n_tokens, n_embd_kv, 1, 1}, v_cache->nb[1], v_cache->nb[1] * n_embd_kv,
                  v_cache->nb[1] * n_embd_kv, static_cast<size_t>(n_past_) * kv_es);
    graph.expand(ops::cpy(ctx, k, k_dst));
    graph.expand(ops::cpy(ctx, ops::transpose(ctx, v), v_dst));

    // Attention over the n_kv cached positions; K/V heads are shared by groups of query heads.
    Tensor* keys = ops::view(ctx, k_cache, {hd, n_kv, h.n_head_kv, 1}, k_cache->nb[1], hd * kv_es,
                             k_cache->nb[1] * static_cast<size_t>(n_kv), 0);
    Tensor* values = ops::view(ctx, v_cache, {n_kv, hd, h.n_head_kv, 1}, v_cache->nb[1],
                               v_cache->nb[1] * static_cast<size_t>(hd),
                               v_cache->nb[1] * static_cast<size_t>(n_embd_kv), 0);
    Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);          // [hd, n_tokens, n_head]
    Tensor* kq = named(ops::mul_mat(ctx, keys, qp), "kq");  // [n_kv, n_tokens, n_head]
    kq = named(ops::soft_max(ctx, kq, kq_mask, kq_scale, 0.0f), "kq_softmax");
    Tensor* kqv = named(ops::mul_mat(ctx, values, kq), "kqv");  // [hd, n_tokens, n_head]
    cur = ops::reshape(ctx, named(ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3)), "kqv_merged"), h.n_embd,
                       n_tokens);
    cur = named(ops::mul_mat(ctx, l.wo, cur), "attn_out");
    x = named(ops::add(ctx, x, cur), "attn_residual");

    cur = named(ops::mul(ctx, named(ops::rms_norm(ctx, x, h.rms_eps), "ffn_rms"), l.ffn_norm), "ffn_in");
    Tensor* gate = named(ops::silu(ctx, named(ops::mul_mat(ctx, l.ffn_gate, cur), "ffn_gate")), "ffn_silu");
    Tensor* up = named(ops::mul_mat(ctx, l.ffn_up, cur), "ffn_up");
    cur = named(ops::mul_mat(ctx, l.ffn_down, named(ops::mul(ctx, gate, up), "ffn_gate_up")), "ffn_out");
    x = ops::add(ctx, x, cur);
    x->name = fmt::format("l_out.{}", il);
  }
  if (!all_logits && n_tokens > 1)  // only the last token's logits are needed
    x = ops::view(ctx, x, {h.n_embd, 1, 1, 1}, x->nb[1], x->nb[1], x->nb[1],
                  static_cast<size_t>(n_tokens - 1) * x->nb[1]);
  Tensor* logits = ops::mul_mat(ctx, model_.output(),
                                ops::mul(ctx, ops::rms_norm(ctx, x, h.rms_eps), model_.output_norm()));
  logits->name = "logits";
  graph.expand(logits);

  if (scheduler_) {
    scheduler_->compute(graph);
  } else {
    allocator_->allocate(graph);
    cpu_->compute(graph);
  }
  out.resize(static_cast<size_t>(logits->nelements()));
  tensor_get(*logits, out.data(), 0, out.size() * sizeof(float));
  n_past_ += n_tokens;
}

std::string Session::report() const { return scheduler_ ? scheduler_->report() : std::string(); }

size_t Session::activation_bytes() const noexcept { return allocator_ ? allocator_->peak() : 0; }

}  // namespace tessera::llm
