#include "blocks.h"

#include <fmt/format.h>

#include "core/check.h"

namespace tessera::llm {

Tensor* GraphBuild::kq_mask(int32_t window) {
  for (const auto& [w, t] : masks)
    if (w == window) return t;
  Tensor* t = ctx.new_tensor(DType::F32, n_kv, n_tokens);
  t->name = window > 0 ? fmt::format("kq_mask_swa{}", window) : "kq_mask";
  t->flags |= kFlagInput;
  masks.emplace_back(window, t);
  return t;
}

Tensor* GraphBuild::select_outputs(Tensor* x) {
  const int64_t n_out = static_cast<int64_t>(out_rows.size());
  if (n_out == n_tokens) return x;
  if (n_out == 1)  // one row (the usual last token): a view, no input needed
    return ops::view(ctx, x, {x->ne[0], 1, 1, 1}, x->nb[1], x->nb[1], x->nb[1],
                     static_cast<size_t>(out_rows[0]) * x->nb[1]);
  out_ids = ctx.new_tensor(DType::I32, n_out);
  out_ids->name = "out_ids";
  out_ids->flags |= kFlagInput;
  return ops::get_rows(ctx, x, out_ids);
}

Tensor* GraphBuild::named(Tensor* t, const char* what, int64_t il) {
  t->name = il < 0 ? std::string(what) : fmt::format("{}.{}", what, il);
  return t;
}

Tensor* rms_norm(GraphBuild& b, Tensor* x, Tensor* weight, float eps, const char* what, int64_t il) {
  Tensor* n = GraphBuild::named(ops::rms_norm(b.ctx, x, eps), fmt::format("{}_rms", what).c_str(), il);
  return GraphBuild::named(ops::mul(b.ctx, n, weight), what, il);
}

Tensor* layer_norm(GraphBuild& b, Tensor* x, Tensor* weight, Tensor* bias, float eps, const char* what,
                   int64_t il) {
  Tensor* n = GraphBuild::named(ops::norm(b.ctx, x, eps), fmt::format("{}_norm", what).c_str(), il);
  n = ops::mul(b.ctx, n, weight);
  if (bias != nullptr) n = ops::add(b.ctx, n, bias);
  return GraphBuild::named(n, what, il);
}

namespace {

// Stores this batch's K ([n_embd_kv, n_tokens]) and V ([n_embd_kv, n_tokens]) at the batch's
// cells, one copy per contiguous run. A run's shapes depend only on its length, so a generation
// step's stores look the same at every position (only the view offsets move).
void store_kv(GraphBuild& b, int64_t il, Tensor* k, Tensor* v) {
  Tensor* k_cache = b.cache.k(il);
  Tensor* v_cache = b.cache.v(il);
  const int64_t n_embd_kv = k->ne[0];
  const size_t es = traits(v_cache->type).block_bytes;
  for (const KvRun& r : b.runs) {
    Tensor* k_src = ops::view(b.ctx, k, {n_embd_kv, r.n, 1, 1}, k->nb[1], k->nb[1] * r.n, k->nb[1] * r.n,
                              static_cast<size_t>(r.token) * k->nb[1]);
    Tensor* k_dst = ops::view(b.ctx, k_cache, {n_embd_kv, r.n, 1, 1}, k_cache->nb[1], k_cache->nb[1] * r.n,
                              k_cache->nb[1] * r.n, static_cast<size_t>(r.cell) * k_cache->nb[1]);
    Tensor* v_src = ops::view(b.ctx, v, {n_embd_kv, r.n, 1, 1}, v->nb[1], v->nb[1] * r.n, v->nb[1] * r.n,
                              static_cast<size_t>(r.token) * v->nb[1]);
    Tensor* v_dst =
        ops::view(b.ctx, v_cache, {r.n, n_embd_kv, 1, 1}, v_cache->nb[1], v_cache->nb[1] * n_embd_kv,
                  v_cache->nb[1] * n_embd_kv, static_cast<size_t>(r.cell) * es);
    // Expanded before the attention that reads the cache, so the stores run first.
    b.graph.expand(GraphBuild::named(ops::cpy(b.ctx, k_src, k_dst), "k_store", il));
    b.graph.expand(GraphBuild::named(ops::cpy(b.ctx, ops::transpose(b.ctx, v_src), v_dst), "v_store", il));
  }
}

}  // namespace

Tensor* attention(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, const AttentionParams& p) {
  const Hparams& h = b.model.hparams();
  const int64_t hd = h.head_dim(), n_embd_kv = h.n_embd_kv(), n_tokens = b.n_tokens, n_kv = b.n_kv;
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  Tensor* q = ops::reshape(ctx, named(ops::mul_mat(ctx, l.wq, cur), "q", il), hd, h.n_head, n_tokens);
  Tensor* k = ops::reshape(ctx, named(ops::mul_mat(ctx, l.wk, cur), "k", il), hd, h.n_head_kv, n_tokens);
  Tensor* v = named(ops::mul_mat(ctx, l.wv, cur), "v", il);  // [n_embd_kv, n_tokens]
  q = named(ops::rope(ctx, q, b.positions, p.freq_factors, p.rope), "q_rope", il);
  k = named(ops::rope(ctx, k, b.positions, p.freq_factors, p.rope), "k_rope", il);
  store_kv(b, il, ops::reshape(ctx, k, n_embd_kv, n_tokens), v);

  // Attention over cells [0, n_kv); K/V heads are shared by groups of query heads (MUL_MAT
  // broadcasts the K/V head dimension over the query heads).
  Tensor* k_cache = b.cache.k(il);
  Tensor* v_cache = b.cache.v(il);
  const size_t es = traits(k_cache->type).block_bytes;
  Tensor* keys = ops::view(ctx, k_cache, {hd, n_kv, h.n_head_kv, 1}, k_cache->nb[1], hd * es,
                           k_cache->nb[1] * static_cast<size_t>(n_kv), 0);
  Tensor* values =
      ops::view(ctx, v_cache, {n_kv, hd, h.n_head_kv, 1}, v_cache->nb[1],
                v_cache->nb[1] * static_cast<size_t>(hd), v_cache->nb[1] * static_cast<size_t>(n_embd_kv), 0);
  Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);              // [hd, n_tokens, n_head]
  Tensor* kq = named(ops::mul_mat(ctx, keys, qp), "kq", il);  // [n_kv, n_tokens, n_head]
  kq = named(ops::soft_max(ctx, kq, b.kq_mask(p.window), p.kq_scale, 0.0f), "kq_softmax", il);
  Tensor* kqv = named(ops::mul_mat(ctx, values, kq), "kqv", il);  // [hd, n_tokens, n_head]
  cur = ops::reshape(ctx, named(ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3)), "kqv_merged", il),
                     h.n_embd, n_tokens);
  return named(ops::mul_mat(ctx, l.wo, cur), "attn_out", il);
}

Tensor* gated_ffn(GraphBuild& b, const Layer& l, int64_t il, Tensor* cur, FfnActivation act) {
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  Tensor* gate = named(ops::mul_mat(ctx, l.ffn_gate, cur), "ffn_gate", il);
  gate = named(act == FfnActivation::Silu ? ops::silu(ctx, gate) : ops::gelu(ctx, gate), "ffn_act", il);
  Tensor* up = named(ops::mul_mat(ctx, l.ffn_up, cur), "ffn_up", il);
  return named(ops::mul_mat(ctx, l.ffn_down, named(ops::mul(ctx, gate, up), "ffn_gate_up", il)), "ffn_out",
               il);
}

void rope_shift_k(GraphBuild& b, Tensor* shifts, const ops::RopeParams& rope, Tensor* freq_factors) {
  const Hparams& h = b.model.hparams();
  for (int64_t il = 0; il < h.n_layer; ++il) {
    Tensor* k_cache = b.cache.k(il);
    Tensor* heads = ops::reshape(b.ctx, k_cache, h.head_dim(), h.n_head_kv, k_cache->ne[1]);
    Tensor* roped = GraphBuild::named(ops::rope(b.ctx, heads, shifts, freq_factors, rope), "k_shift", il);
    b.graph.expand(ops::cpy(b.ctx, roped, heads));
  }
}

}  // namespace tessera::llm
