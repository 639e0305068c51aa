#include "blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "tessera/buffer.h"

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

Tensor* GraphBuild::batch_mask() {
  if (seq_mask == nullptr) {
    seq_mask = ctx.new_tensor(DType::F32, n_tokens, n_tokens);
    seq_mask->name = "kq_mask_batch";
    seq_mask->flags |= kFlagInput;
  }
  return seq_mask;
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

RopeHparams read_rope_hparams(const HparamReader& r, const Hparams& h) {
  constexpr int64_t kMaxContext = int64_t{1} << 30;
  RopeHparams rope;
  rope.freq_base = r.float_or("rope.freq_base", 10000.0f, 1e-3f, 1e30f);
  rope.n_ctx_orig = h.n_ctx_train;
  if (r.has("rope.scaling.type")) {
    const std::string type = r.string_or("rope.scaling.type", "none");
    const float factor = r.float_or("rope.scaling.factor", 1.0f, 0.0f, 1e6f);
    if (type == "linear" || type == "yarn") {
      if (factor > 0.0f) rope.freq_scale = 1.0f / factor;
      if (type == "yarn") rope.yarn_ext_factor = 1.0f;
      rope.n_ctx_orig = r.int_or("rope.scaling.original_context_length", h.n_ctx_train, 1, kMaxContext);
    } else if (type != "none") {
      raise(ErrorCode::Unsupported, "rope scaling type '{}' is not supported (none, linear, yarn)", type);
    }
  } else if (r.has("rope.scale_linear")) {
    const float factor = r.float_or("rope.scale_linear", 1.0f, 0.0f, 1e6f);
    if (factor > 0.0f) rope.freq_scale = 1.0f / factor;
  }
  return rope;
}

float read_rms_eps(const HparamReader& r) {
  return r.float_or("attention.layer_norm_rms_epsilon", 1e-5f, 0.0f, 1.0f);
}

void describe_rope(const RopeHparams& rope, const char* prefix, HparamList& out) {
  const auto add = [&](const char* what, auto v) {
    describe(out, fmt::format("{}{}", prefix, what).c_str(), v);
  };
  add("freq_base", rope.freq_base);
  add("freq_scale", rope.freq_scale);
  add("yarn_ext_factor", rope.yarn_ext_factor);
  add("attn_factor", rope.attn_factor);
  add("n_ctx_orig", rope.n_ctx_orig);
}

ops::RopeParams rope_params(const Hparams& h, const RopeHparams& rope, RopeMode mode) {
  ops::RopeParams rp;
  rp.n_dims = static_cast<int>(h.n_rot);
  rp.mode = mode;
  rp.n_ctx_orig = static_cast<int>(rope.n_ctx_orig);
  rp.freq_base = rope.freq_base;
  rp.freq_scale = rope.freq_scale;
  rp.ext_factor = rope.yarn_ext_factor;
  rp.attn_factor = rope.attn_factor;
  return rp;
}

namespace {

// Stores this batch's K ([n_embd_kv, n_tokens]) and V ([n_embd_v_kv, n_tokens]) at the batch's
// cells, one copy per contiguous run. A run's shapes depend only on its length, so a generation
// step's stores look the same at every position (only the view offsets move).
void store_kv(GraphBuild& b, int64_t il, Tensor* k, Tensor* v) {
  Tensor* k_cache = b.cache.k(il);
  Tensor* v_cache = b.cache.v(il);
  const int64_t n_embd_kv = k->ne[0], n_embd_v_kv = v->ne[0];
  const size_t es = traits(v_cache->type).block_bytes;
  for (const KvRun& r : b.runs) {
    Tensor* k_src = ops::view(b.ctx, k, {n_embd_kv, r.n, 1, 1}, k->nb[1], k->nb[1] * r.n, k->nb[1] * r.n,
                              static_cast<size_t>(r.token) * k->nb[1]);
    Tensor* k_dst = ops::view(b.ctx, k_cache, {n_embd_kv, r.n, 1, 1}, k_cache->nb[1], k_cache->nb[1] * r.n,
                              k_cache->nb[1] * r.n, static_cast<size_t>(r.cell) * k_cache->nb[1]);
    Tensor* v_src = ops::view(b.ctx, v, {n_embd_v_kv, r.n, 1, 1}, v->nb[1], v->nb[1] * r.n, v->nb[1] * r.n,
                              static_cast<size_t>(r.token) * v->nb[1]);
    Tensor* v_dst =
        ops::view(b.ctx, v_cache, {r.n, n_embd_v_kv, 1, 1}, v_cache->nb[1], v_cache->nb[1] * n_embd_v_kv,
                  v_cache->nb[1] * n_embd_v_kv, static_cast<size_t>(r.cell) * es);
    // Expanded before the attention that reads the cache, so the stores run first.
    b.graph.expand(GraphBuild::named(ops::cpy(b.ctx, k_src, k_dst), "k_store", il));
    b.graph.expand(GraphBuild::named(ops::cpy(b.ctx, ops::transpose(b.ctx, v_src), v_dst), "v_store", il));
  }
}

// Q ([hd, n_head, n_tokens]), K ([hd, n_head_kv, n_tokens]) and V ([n_embd_v_kv, n_tokens]) of the
// normed input: one fused projection (rows Q then K then V, with its bias when it has one; the
// heads are views into it) or three, each with its bias when it has one.
struct Qkv {
  Tensor *q, *k, *v;
};
Qkv project_qkv(GraphBuild& b, const AttentionWeights& l, int64_t il, Tensor* cur) {
  const Hparams& h = b.model.hparams();
  const int64_t hd = h.head_dim(), n_tokens = b.n_tokens;
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  if (l.wqkv != nullptr) {
    Tensor* qkv = named(ops::mul_mat(ctx, l.wqkv, cur), "qkv", il);
    if (l.bqkv != nullptr) qkv = named(ops::add(ctx, qkv, l.bqkv), "qkv_biased", il);
    const size_t es = sizeof(float), row = qkv->nb[1], all = row * static_cast<size_t>(n_tokens);
    return {ops::view(ctx, qkv, {hd, h.n_head, n_tokens, 1}, hd * es, row, all, 0),
            ops::view(ctx, qkv, {hd, h.n_head_kv, n_tokens, 1}, hd * es, row, all,
                      static_cast<size_t>(h.n_embd_q()) * es),
            ops::view(ctx, qkv, {h.n_embd_v_kv(), n_tokens, 1, 1}, row, all, all,
                      static_cast<size_t>(h.n_embd_q() + h.n_embd_kv()) * es)};
  }
  auto project = [&](Tensor* w, Tensor* bias, const char* what) {
    Tensor* t = named(ops::mul_mat(ctx, w, cur), what, il);
    return bias != nullptr ? named(ops::add(ctx, t, bias), what, il) : t;
  };
  return {ops::reshape(ctx, project(l.wq, l.bq, "q"), hd, h.n_head, n_tokens),
          ops::reshape(ctx, project(l.wk, l.bk, "k"), hd, h.n_head_kv, n_tokens), project(l.wv, l.bv, "v")};
}

// RMS norm of Q or K ([hd, heads, n_tokens]) times `weight`: per head when the weight is one head
// wide (Qwen3, Gemma 3), over the whole projection when it is heads * hd wide (OLMoE; with one head
// the two are the same).
Tensor* qk_norm(GraphBuild& b, Tensor* x, Tensor* weight, float eps, const char* what, int64_t il) {
  if (weight->ne[0] == x->ne[0]) return rms_norm(b, x, weight, eps, what, il);
  Tensor* flat = x->is_contiguous() ? x : ops::cont(b.ctx, x);
  flat = ops::reshape(b.ctx, flat, x->ne[0] * x->ne[1], x->ne[2]);
  return ops::reshape(b.ctx, rms_norm(b, flat, weight, eps, what, il), x->ne[0], x->ne[1], x->ne[2]);
}

}  // namespace

Tensor* attention(GraphBuild& b, const AttentionWeights& l, int64_t il, Tensor* cur,
                  const AttentionParams& p) {
  const Hparams& h = b.model.hparams();
  const int64_t hd = h.head_dim(), hd_v = h.head_dim_v(), n_embd_kv = h.n_embd_kv(), n_tokens = b.n_tokens,
                n_kv = b.n_kv;
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  auto [q, k, v] = project_qkv(b, l, il, cur);
  if (l.q_norm != nullptr) q = qk_norm(b, q, l.q_norm, p.qk_norm_eps, "q_norm", il);
  if (l.k_norm != nullptr) k = qk_norm(b, k, l.k_norm, p.qk_norm_eps, "k_norm", il);
  if (p.use_rope) {
    q = named(ops::rope(ctx, q, b.positions, p.freq_factors, p.rope), "q_rope", il);
    k = named(ops::rope(ctx, k, b.positions, p.freq_factors, p.rope), "k_rope", il);
  }
  if (p.q_scale != 0.0f) q = named(ops::scale(ctx, q, p.q_scale), "q_scaled", il);
  store_kv(b, il, ops::reshape(ctx, k, n_embd_kv, n_tokens), v);

  // Attention over cells [0, n_kv) as one FLASH_ATTN_EXT node: K/V heads are shared by groups of
  // query heads, V is read through the transposed view of the cache ([hd_v, n_kv, n_head_kv]),
  // and the result is already [hd_v, n_head, n_tokens], the merged heads. How it runs is each
  // backend's business: the CPU's kernel (the composed ops per group of query tokens, or the
  // online softmax), the ops it is made of on a device without it (the scheduler's decomposition).
  Tensor* k_cache = b.cache.k(il);
  Tensor* v_cache = b.cache.v(il);
  const size_t es = traits(k_cache->type).block_bytes;
  Tensor* keys = ops::view(ctx, k_cache, {hd, n_kv, h.n_head_kv, 1}, k_cache->nb[1], hd * es,
                           k_cache->nb[1] * static_cast<size_t>(n_kv), 0);
  Tensor* values_t = ops::view(ctx, v_cache, {n_kv, hd_v, h.n_head_kv, 1}, v_cache->nb[1],
                               v_cache->nb[1] * static_cast<size_t>(hd_v),
                               v_cache->nb[1] * static_cast<size_t>(h.n_embd_v_kv()), 0);
  Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tokens, n_head]
  Tensor* kqv = named(ops::flash_attn_ext(ctx, qp, keys, ops::transpose(ctx, values_t), b.kq_mask(p.window),
                                          p.kq_scale, 0.0f, p.softcap, b.flash_attn, l.sinks),
                      "kqv", il);
  cur = ops::reshape(ctx, kqv, hd_v * h.n_head, n_tokens);
  cur = named(ops::mul_mat(ctx, l.wo, cur), "attn_out", il);
  if (l.bo != nullptr) cur = named(ops::add(ctx, cur, l.bo), "attn_out_biased", il);
  return cur;
}

Tensor* encoder_attention(GraphBuild& b, const AttentionWeights& l, int64_t il, Tensor* cur,
                          const AttentionParams& p) {
  const Hparams& h = b.model.hparams();
  const int64_t hd_v = h.head_dim_v(), n_tokens = b.n_tokens;
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  auto [q, k, v] = project_qkv(b, l, il, cur);
  if (p.use_rope) {
    q = named(ops::rope(ctx, q, b.positions, p.freq_factors, p.rope), "q_rope", il);
    k = named(ops::rope(ctx, k, b.positions, p.freq_factors, p.rope), "k_rope", il);
  }
  // Per head: KQ [n_tokens (keys), n_tokens (queries)], masked to the token's own sequence.
  Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);                  // [hd, tokens, n_head]
  Tensor* kp = ops::cont(ctx, ops::permute(ctx, k, 0, 2, 1, 3));  // [hd, tokens, n_head_kv]
  Tensor* kq = named(ops::mul_mat(ctx, kp, qp), "kq", il);        // [tokens, tokens, n_head]
  kq = named(ops::soft_max(ctx, kq, b.batch_mask(), p.kq_scale, 0.0f), "kq_softmax", il);
  Tensor* v3 = ops::reshape(ctx, ops::cont(ctx, v), hd_v, h.n_head_kv, n_tokens);
  Tensor* vt = ops::cont(ctx, ops::permute(ctx, v3, 1, 2, 0, 3));  // [tokens, hd_v, n_head_kv]
  Tensor* kqv = named(ops::mul_mat(ctx, vt, kq), "kqv", il);       // [hd_v, tokens, n_head]
  Tensor* merged = named(ops::cont(ctx, ops::permute(ctx, kqv, 0, 2, 1, 3)), "kqv_merged", il);
  cur = named(ops::mul_mat(ctx, l.wo, ops::reshape(ctx, merged, hd_v * h.n_head, n_tokens)), "attn_out", il);
  if (l.bo != nullptr) cur = named(ops::add(ctx, cur, l.bo), "attn_out_biased", il);
  return cur;
}

Tensor* gelu_ffn(GraphBuild& b, const FfnWeights& w, int64_t il, Tensor* cur) {
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  Tensor* up = named(ops::mul_mat(ctx, w.up, cur), "ffn_up", il);
  if (w.up_b != nullptr) up = named(ops::add(ctx, up, w.up_b), "ffn_up_biased", il);
  Tensor* out = named(ops::mul_mat(ctx, w.down, named(ops::gelu(ctx, up), "ffn_act", il)), "ffn_out", il);
  if (w.down_b != nullptr) out = named(ops::add(ctx, out, w.down_b), "ffn_out_biased", il);
  return out;
}

Tensor* encoder(GraphBuild& b, const EncoderWeights& w, float norm_eps, const AttentionParams& ap) {
  const Model& m = b.model;
  const Hparams& h = m.hparams();
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  Tensor* x = named(ops::get_rows(ctx, m.token_embd(), b.tokens), "embd", -1);
  if (w.type_embd != nullptr) {  // every token is of type 0 ("sentence A"), as llama.cpp has it
    Tensor* type0 = ops::view(ctx, w.type_embd, {h.n_embd, 1, 1, 1}, w.type_embd->nb[1], w.type_embd->nb[1],
                              w.type_embd->nb[1], 0);
    x = named(ops::add(ctx, x, type0), "embd_typed", -1);
  }
  if (w.pos_embd != nullptr)
    x = named(ops::add(ctx, ops::get_rows(ctx, w.pos_embd, b.positions), x), "embd_pos", -1);
  x = layer_norm(b, x, w.tok_norm, w.tok_norm_b, norm_eps, "embd_norm", -1);
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const EncoderLayer& l = w.layers[static_cast<size_t>(il)];
    Tensor* cur = encoder_attention(b, l.attn, il, x, ap);
    cur = named(ops::add(ctx, cur, x), "attn_residual", il);
    cur = layer_norm(b, cur, l.attn_out_norm, l.attn_out_norm_b, norm_eps, "attn_out_norm", il);
    Tensor* ffn_in = cur;
    cur = l.ffn.gate != nullptr ? gated_ffn(b, l.ffn, "ffn", il, cur, FfnActivation::Silu)
                                : gelu_ffn(b, l.ffn, il, cur);
    cur = named(ops::add(ctx, cur, ffn_in), "ffn_residual", il);
    x = layer_norm(b, cur, l.layer_out_norm, l.layer_out_norm_b, norm_eps, "l_out", il);
  }
  return named(b.select_outputs(x), "result_embd", -1);
}

Tensor* gated_ffn(GraphBuild& b, const FfnWeights& w, const char* what, int64_t il, Tensor* cur,
                  FfnActivation act) {
  Context& ctx = b.ctx;
  const auto named = [&](Tensor* t, const char* part) {
    return GraphBuild::named(t, fmt::format("{}_{}", what, part).c_str(), il);
  };
  const auto biased = [&](Tensor* t, Tensor* bias, const char* part) {
    return bias != nullptr ? named(ops::add(ctx, t, bias), part) : t;
  };
  Tensor *gate = nullptr, *up = nullptr;
  if (w.gate != nullptr) {
    gate = biased(named(ops::mul_mat(ctx, w.gate, cur), "gate"), w.gate_b, "gate_biased");
    up = biased(named(ops::mul_mat(ctx, w.up, cur), "up"), w.up_b, "up_biased");
  } else {
    // Fused: rows [0, n_ff) are the gate, [n_ff, 2 n_ff) the up projection.
    Tensor* both = named(ops::mul_mat(ctx, w.up, cur), "gate_up_fused");
    const int64_t n_ff = both->ne[0] / 2;
    const size_t half = static_cast<size_t>(n_ff) * sizeof(float), row = both->nb[1];
    const size_t all = row * static_cast<size_t>(both->ne[1]);
    gate = ops::view(ctx, both, {n_ff, both->ne[1], 1, 1}, row, all, all, 0);
    up = ops::view(ctx, both, {n_ff, both->ne[1], 1, 1}, row, all, all, half);
  }
  gate = named(act == FfnActivation::Silu ? ops::silu(ctx, gate) : ops::gelu(ctx, gate), "act");
  Tensor* out = named(ops::mul_mat(ctx, w.down, named(ops::mul(ctx, gate, up), "gate_up")), "out");
  return biased(out, w.down_b, "out_biased");
}

Tensor* moe_ffn(GraphBuild& b, const MoeWeights& l, int64_t il, Tensor* cur, const MoeParams& p) {
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  const Hparams& h = b.model.hparams();
  const int64_t n_embd = cur->ne[0], n_tokens = cur->ne[1], n_expert = h.n_expert, n_used = h.n_expert_used;
  // Routing: the n_used largest of the router's logits (or of their softmax, the same experts).
  Tensor* logits = ops::mul_mat(ctx, l.router, cur);
  if (l.router_b != nullptr) logits = named(ops::add(ctx, logits, l.router_b), "ffn_moe_logits", il);
  Tensor* probs = p.softmax_of_selected ? logits : named(ops::soft_max(ctx, logits), "ffn_moe_probs", il);
  Tensor* order = ops::argsort(ctx, probs, SortOrder::Descending);
  Tensor* selected =
      named(ops::view(ctx, order, {n_used, n_tokens, 1, 1}, order->nb[1], order->nb[2], order->nb[3], 0),
            "ffn_moe_topk", il);
  Tensor* weights = ops::get_rows(ctx, ops::reshape(ctx, probs, 1, n_expert, n_tokens), selected);
  weights = ops::reshape(ctx, weights, n_used, n_tokens);
  if (p.softmax_of_selected) {
    weights = ops::soft_max(ctx, weights);  // over the picked logits only
  } else if (p.renormalize) {
    // Renormalised to sum 1 (the sum clamped away from 0 as llama.cpp does: F16's smallest normal).
    Tensor* sum = ops::clamp(ctx, ops::sum_rows(ctx, weights), 6.103515625e-5f, INFINITY);
    weights = ops::div(ctx, weights, sum);
  }
  weights = named(ops::reshape(ctx, weights, 1, n_used, n_tokens), "ffn_moe_weights", il);
  // The picked experts, each on every token that picked it; each result plus the expert's bias row.
  const auto expert_product = [&](Tensor* w, Tensor* bias, Tensor* in, const char* what) {
    Tensor* y = ops::mul_mat_id(ctx, w, in, selected);
    if (bias != nullptr) y = ops::add_id(ctx, y, bias, selected);
    return named(y, what, il);
  };
  Tensor* x = ops::reshape(ctx, cur, n_embd, 1, n_tokens);
  Tensor* up = expert_product(l.up_exps, l.up_exps_b, x, "ffn_moe_up");
  Tensor* gate = expert_product(l.gate_exps, l.gate_exps_b, x, "ffn_moe_gate");
  Tensor* act =
      p.swiglu_oai ? ops::swiglu_oai(ctx, gate, up, 1.702f, 7.0f) : ops::mul(ctx, ops::silu(ctx, gate), up);
  act = named(act, "ffn_moe_gate_up", il);
  Tensor* experts = expert_product(l.down_exps, l.down_exps_b, act, "ffn_moe_down");
  experts = named(ops::mul(ctx, experts, weights), "ffn_moe_weighted", il);  // [n_embd, n_used, n_tokens]
  // The sum over the used experts, in slot order.
  const auto slot = [&](int64_t e) {
    return ops::view(ctx, experts, {n_embd, n_tokens, 1, 1}, experts->nb[2], experts->nb[2] * n_tokens,
                     experts->nb[2] * n_tokens, static_cast<size_t>(e) * experts->nb[1]);
  };
  Tensor* out = slot(0);
  for (int64_t e = 1; e < n_used; ++e) out = ops::add(ctx, out, slot(e));
  if (n_used == 1) out = ops::cont(ctx, out);
  out = named(out, "ffn_moe_out", il);
  if (l.shared.up == nullptr) return out;
  Tensor* shared = gated_ffn(b, l.shared, "ffn_shexp", il, cur, FfnActivation::Silu);
  return named(ops::add(ctx, out, shared), "ffn_moe_shexp_out", il);
}

Tensor* soft_cap(GraphBuild& b, Tensor* x, float c, const char* what, int64_t il) {
  Tensor* t = ops::tanh(b.ctx, ops::scale(b.ctx, x, 1.0f / c));
  return GraphBuild::named(ops::scale(b.ctx, t, c), what, il);
}

AttentionParams roped_attention(const Hparams& h, const ops::RopeParams& rope) {
  AttentionParams ap;
  ap.rope = rope;
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  return ap;
}

std::function<AttentionParams(int64_t)> every_layer(const AttentionParams& p) {
  return [p](int64_t) { return p; };
}

namespace {

// The logits of the wanted rows of the last hidden states x (scaled and soft-capped as p says), or
// those rows normed when the session computes embeddings; x itself when the graph does not end the
// model.
Tensor* decoder_output(GraphBuild& b, Tensor* x, const DecoderParams& p) {
  if (!b.ends_model()) return x;
  x = b.select_outputs(x);
  x = rms_norm(b, x, b.model.output_norm(), p.rms_eps, "result_norm", -1);
  if (b.embeddings) return x;
  Tensor* logits = GraphBuild::named(ops::mul_mat(b.ctx, b.model.output(), x), "logits", -1);
  if (p.logit_scale != 0.0f)
    logits = GraphBuild::named(ops::scale(b.ctx, logits, 1.0f / p.logit_scale), "logits_scaled", -1);
  if (p.final_softcap != 0.0f) logits = soft_cap(b, logits, p.final_softcap, "logits_capped", -1);
  return logits;
}

}  // namespace

Tensor* pre_norm_decoder(GraphBuild& b, std::span<const DecoderLayer> layers, const DecoderParams& p) {
  const Model& m = b.model;
  auto named = GraphBuild::named;
  Context& ctx = b.ctx;
  Tensor* x = b.stage_input([&] {
    Tensor* e = named(ops::get_rows(ctx, m.token_embd(), b.tokens), "embd", -1);
    if (p.embedding_scale != 0.0f) e = named(ops::scale(ctx, e, p.embedding_scale), "embd_scaled", -1);
    return e;
  });
  // Granite scales each block's output before its residual add (llama.cpp: cur * s + x).
  const auto residual = [&](Tensor* out, const char* what, int64_t il) {
    if (p.residual_scale == 0.0f) return named(ops::add(ctx, x, out), what, il);
    return named(ops::add(ctx, ops::scale(ctx, out, p.residual_scale), x), what, il);
  };
  for (int64_t il = b.layers.first; il < b.layers.end; ++il) {
    const DecoderLayer& l = layers[static_cast<size_t>(il)];
    Tensor* cur = rms_norm(b, x, l.attn_norm, p.rms_eps, "attn_in", il);
    cur = attention(b, l.attn, il, cur, p.attention(il));
    x = residual(cur, "attn_residual", il);
    cur = rms_norm(b, x, l.ffn_norm, p.rms_eps, "ffn_in", il);
    cur = l.moe.router != nullptr ? moe_ffn(b, l.moe, il, cur, p.moe)
                                  : gated_ffn(b, l.ffn, "ffn", il, cur, FfnActivation::Silu);
    x = residual(cur, "l_out", il);
  }
  return decoder_output(b, x, p);
}

Tensor* sandwich_norm_decoder(GraphBuild& b, std::span<const DecoderLayer> layers, const DecoderParams& p) {
  const Model& m = b.model;
  auto named = GraphBuild::named;
  Tensor* x = b.stage_input([&] {
    Tensor* e = named(ops::get_rows(b.ctx, m.token_embd(), b.tokens), "embd", -1);
    return named(ops::scale(b.ctx, e, std::sqrt(static_cast<float>(m.hparams().n_embd))), "embd_scaled", -1);
  });
  for (int64_t il = b.layers.first; il < b.layers.end; ++il) {
    const DecoderLayer& l = layers[static_cast<size_t>(il)];
    Tensor* cur = rms_norm(b, x, l.attn_norm, p.rms_eps, "attn_in", il);
    cur = attention(b, l.attn, il, cur, p.attention(il));
    cur = rms_norm(b, cur, l.post_attn_norm, p.rms_eps, "attn_post_norm", il);
    x = named(ops::add(b.ctx, cur, x), "attn_residual", il);
    cur = rms_norm(b, x, l.ffn_norm, p.rms_eps, "ffn_in", il);
    cur = gated_ffn(b, l.ffn, "ffn", il, cur, FfnActivation::Gelu);
    cur = rms_norm(b, cur, l.post_ffn_norm, p.rms_eps, "ffn_post_norm", il);
    x = named(ops::add(b.ctx, cur, x), "l_out", il);
  }
  return decoder_output(b, x, p);
}

void rope_shift_k(GraphBuild& b, Tensor* shifts,
                  const std::function<std::optional<ops::RopeParams>(int64_t il)>& rope,
                  Tensor* freq_factors) {
  const Hparams& h = b.model.hparams();
  for (int64_t il = b.model.first_layer(); il < b.model.end_layer(); ++il) {
    const std::optional<ops::RopeParams> rp = rope(il);
    if (!rp) continue;  // its K carries no position
    // Re-roping by a difference is exact only for a rope that rotates without scaling magnitudes.
    if (rp->ext_factor != 0.0f)
      raise(ErrorCode::Unsupported, "shifting positions is not supported with YaRN rope scaling");
    Tensor* k_cache = b.cache.k(il);
    Tensor* heads = ops::reshape(b.ctx, k_cache, h.head_dim(), h.n_head_kv, k_cache->ne[1]);
    Tensor* roped = GraphBuild::named(ops::rope(b.ctx, heads, shifts, freq_factors, *rp), "k_shift", il);
    b.graph.expand(ops::cpy(b.ctx, roped, heads));
  }
}

}  // namespace tessera::llm
