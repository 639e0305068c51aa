#include "backend/decompose.h"

#include <algorithm>

#include "core/check.h"
#include "tessera/op_params.h"
#include "tessera/ops.h"

namespace tessera {

Tensor* Decomposition::read(Tensor* node, int slot, int from) {
  TESSERA_ASSERT(node->src[static_cast<size_t>(slot)] == source(from));
  links_.push_back({node, slot, from, 0});
  return node;
}

Tensor* Decomposition::viewed(Tensor* view, int from) {
  const Tensor* s = source(from);
  const size_t base = s->view_src != nullptr ? s->view_offset : 0;
  TESSERA_ASSERT(view->view_src == (s->view_src != nullptr ? s->view_src : s) && view->view_offset >= base);
  links_.push_back({view, kMaxSources, from, view->view_offset - base});
  return add(view);
}

Tensor* Decomposition::add(Tensor* node) {
  nodes_.push_back(node);
  return node;
}

void Decomposition::rebind() {
  for (const Link& l : links_) {
    Tensor* s = source(l.from);
    if (l.slot < kMaxSources) {
      l.node->src[static_cast<size_t>(l.slot)] = s;
      continue;
    }
    l.node->view_src = s->view_src != nullptr ? s->view_src : s;
    l.node->view_offset = (s->view_src != nullptr ? s->view_offset : 0) + l.offset;
  }
  for (Tensor* n : nodes_)
    if (n->view_src != nullptr) resolve_view_data(*n);
}

std::unique_ptr<Decomposition> Decomposition::flash_attn(const Tensor& node, Tensor* result,
                                                         int64_t group_bytes) {
  TESSERA_ASSERT(node.op == Op::FlashAttnExt && result != nullptr);
  auto d = std::unique_ptr<Decomposition>(new Decomposition());
  d->hub_ = node;
  Context& ctx = d->ctx_;
  constexpr int kQ = 0, kK = 1, kV = 2, kMask = 3, kSinks = 4;
  Tensor* q = d->source(kQ);
  Tensor* k = d->source(kK);
  Tensor* v = d->source(kV);
  Tensor* mask = d->source(kMask);
  Tensor* sinks = d->source(kSinks);
  const FlashAttnParams p = flash_attn_params(node);
  const int64_t n_kv = k->ne[1], n_q = q->ne[1], heads = q->ne[2], batch = q->ne[3];

  // K with whole rows, and V^T ([n_kv, D_v] per head) as MUL_MAT's weights.
  Tensor* keys = k;
  bool k_linked = false;
  if (k->nb[0] != traits(k->type).block_bytes) {
    keys = d->add(d->read(ops::cont(ctx, k), 0, kK));
    k_linked = true;
  }
  Tensor* values = d->viewed(ops::transpose(ctx, v), kV);
  if (values->nb[0] != traits(values->type).block_bytes) values = d->add(ops::cont(ctx, values));

  const int64_t per_row = n_kv * heads * batch * static_cast<int64_t>(sizeof(float));
  constexpr int64_t kMinGroup = 32;
  const int64_t group =
      std::max(kMinGroup, group_bytes / std::max<int64_t>(per_row, 1) / kMinGroup * kMinGroup);
  for (int64_t t0 = 0; t0 < n_q; t0 += group) {
    const int64_t rows = std::min(group, n_q - t0);
    Tensor* q_part = q;
    bool q_linked = false;
    if (rows < n_q) {
      q_part = d->viewed(ops::view(ctx, q, {q->ne[0], rows, heads, batch}, q->nb[1], q->nb[2], q->nb[3],
                                   static_cast<size_t>(t0) * q->nb[1]),
                         kQ);
      q_linked = true;
    }
    Tensor* kq = ops::mul_mat(ctx, keys, q_part);  // [n_kv, rows, H, B]
    if (!k_linked) d->read(kq, 0, kK);
    if (!q_linked) d->read(kq, 1, kQ);
    d->add(kq);
    float softmax_scale = p.scale;
    if (p.softcap != 0.0f) {
      kq = d->add(ops::tanh(ctx, d->add(ops::scale(ctx, kq, p.scale / p.softcap))));
      softmax_scale = p.softcap;
    }
    Tensor* mask_part = nullptr;
    bool mask_linked = false;
    if (mask != nullptr) {
      mask_part = mask;  // its rows past the group's are not read
      if (t0 > 0) {
        mask_part = d->viewed(ops::view(ctx, mask, {n_kv, rows, mask->ne[2], mask->ne[3]}, mask->nb[1],
                                        mask->nb[2], mask->nb[3], static_cast<size_t>(t0) * mask->nb[1]),
                              kMask);
        mask_linked = true;
      }
    }
    Tensor* probs = ops::soft_max(ctx, kq, mask_part, softmax_scale, p.max_bias, sinks);
    if (mask != nullptr && !mask_linked) d->read(probs, 1, kMask);
    if (sinks != nullptr) d->read(probs, 2, kSinks);
    d->add(probs);
    Tensor* kqv = d->add(ops::mul_mat(ctx, values, probs));       // [D_v, rows, H, B]
    Tensor* merged = d->add(ops::permute(ctx, kqv, 0, 2, 1, 3));  // [D_v, H, rows, B]
    Tensor* slot = d->add(ops::view(ctx, result, {result->ne[0], heads, rows, batch}, result->nb[1],
                                    result->nb[2], result->nb[3], static_cast<size_t>(t0) * result->nb[2]));
    d->add(ops::cpy(ctx, merged, slot));
  }
  return d;
}

}  // namespace tessera
