// FLASH_ATTN_EXT: fused attention (ops.h). The reference computes every score of a query row, then
// the softmax and the weighted sum of V, all in double (with an F16 cache, Q and the softmax rounded
// to f16 where MUL_MAT would round them). The fast path has two strategies:
// - composed (V is the KV cache's transposed view, and the node does not ask for the online
//   softmax): the composed ops' own kernels (MUL_MAT, SOFT_MAX, MUL_MAT) on scratch per group of
//   query rows whose KQ holds about 4 MiB, over the span of cells the group's mask rows leave
//   visible (a server's sequences each in their own range of the cache). On an AVX2 VM
//   (bench/attention_bench) it is as fast as the graph ops for generation and prompts alike, and
//   1.3-2x faster than the online softmax (which wins only for one token over about 64 cells on 2
//   threads: not worth a second set of bits).
// - online softmax: never holds a row's scores; it walks K/V in blocks of cells with a running max
//   and sum (the accumulator rescaled when the max grows), reads F16 K/V straight from their
//   layout (V as rows or channels), skips blocks the mask hides entirely, and lets the query heads
//   that share a K/V head read each block while it is in cache. It keeps Q and the weights in f32
//   (llama.cpp's tiled flash attention does too), so it agrees with the others to f16 rounding.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/op_params_store.h"
#include "cpu/element.h"
#include "cpu/kernels.h"
#include "cpu/vec_math.h"
#include "tessera/convert.h"
#include "tessera/op_constants.h"

namespace tessera::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Shapes {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const Tensor* mask;
  const float* sinks;  // one logit per query head, or nullptr
  int64_t d, d_v, n_kv, n_q, n_head, n_batch;
  int64_t heads_per_kv, batches_per_kv;  // query heads (batches) per K/V head (batch)
  float score_scale;                     // scale, or scale / softcap when soft-capping
  float softcap;
  AlibiSlopes alibi;
};

Shapes shapes_of(const Tensor& dst) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const Tensor* mask = dst.src[3];
  TESSERA_ASSERT(dst.type == DType::F32 && dst.is_contiguous());
  if (q.type != DType::F32 || k.type != v.type || (k.type != DType::F32 && k.type != DType::F16))
    raise(ErrorCode::Unsupported, "CPU: FLASH_ATTN_EXT needs f32 q and f32 or f16 k/v, got {}, {}, {}",
          q.describe(), k.describe(), v.describe());
  if (k.ne[0] != q.ne[0] || v.ne[1] != k.ne[1] || v.ne[2] != k.ne[2] || v.ne[3] != k.ne[3] ||
      q.ne[2] % k.ne[2] != 0 || q.ne[3] % k.ne[3] != 0 || dst.ne[0] != v.ne[0] || dst.ne[1] != q.ne[2] ||
      dst.ne[2] != q.ne[1] || dst.ne[3] != q.ne[3])
    raise(ErrorCode::InvalidArgument, "FLASH_ATTN_EXT: shapes do not fit: q {}, k {}, v {}, result {}",
          q.describe(), k.describe(), v.describe(), dst.describe());
  if (mask != nullptr && ((mask->type != DType::F32 && mask->type != DType::F16) || mask->ne[0] != k.ne[1] ||
                          mask->ne[1] < q.ne[1] || q.ne[2] % mask->ne[2] != 0 || q.ne[3] % mask->ne[3] != 0))
    raise(ErrorCode::InvalidArgument, "FLASH_ATTN_EXT: mask {} does not fit q {}, k {}", mask->describe(),
          q.describe(), k.describe());
  const Tensor* sinks = dst.src[4];
  if (sinks != nullptr && (sinks->type != DType::F32 || sinks->ne[0] != q.ne[2] || !sinks->rows_contiguous()))
    raise(ErrorCode::InvalidArgument, "FLASH_ATTN_EXT: sinks {} do not fit q {}", sinks->describe(),
          q.describe());
  const FlashAttnParams p = flash_attn_params(dst);
  return Shapes{q,
                k,
                v,
                mask,
                sinks != nullptr ? static_cast<const float*>(sinks->data) : nullptr,
                q.ne[0],
                v.ne[0],
                k.ne[1],
                q.ne[1],
                q.ne[2],
                q.ne[3],
                q.ne[2] / k.ne[2],
                q.ne[3] / k.ne[3],
                p.softcap != 0.0f ? p.scale / p.softcap : p.scale,
                p.softcap,
                alibi_slopes(p.max_bias, q.ne[2])};
}

// A raw score k^T q becomes the logit the softmax sees (before the mask).
inline float logit(const Shapes& s, float dot) {
  const float x = dot * s.score_scale;
  return s.softcap != 0.0f ? s.softcap * std::tanh(x) : x;
}

// ---------------------------------------------------------------- reference

// With an F16 cache the result is the composed graph's under MUL_MAT's rule for F16 weights (ggml's,
// llama.cpp's attention without flash attention): Q rounded to f16 before it meets K, and the
// normalised softmax rounded to f16 before it weighs V. (The online softmax keeps both in f32, as
// llama.cpp's tiled flash attention does, and agrees to that rounding.)
void reference(const ComputeContext& ctx, const Shapes& s, Tensor& dst) {
  const bool f16_cache = s.k.type == DType::F16;
  auto round_f16 = [](float x) { return fp16_to_fp32(fp32_to_fp16(x)); };
  ctx.parallel_for(s.n_q * s.n_head * s.n_batch, [&](int64_t begin, int64_t end) {
    std::vector<float> q(static_cast<size_t>(s.d)), k(static_cast<size_t>(s.d)),
        v(static_cast<size_t>(s.d_v));
    std::vector<float> m(s.mask != nullptr ? static_cast<size_t>(s.n_kv) : 0);
    std::vector<double> w(static_cast<size_t>(s.n_kv)), out(static_cast<size_t>(s.d_v));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t iq1 = r % s.n_q, iq2 = (r / s.n_q) % s.n_head, iq3 = r / (s.n_q * s.n_head);
      const int64_t ik2 = iq2 / s.heads_per_kv, ik3 = iq3 / s.batches_per_kv;
      load_row_f32(s.q, iq1, iq2, iq3, q.data());
      if (f16_cache)
        for (float& x : q) x = round_f16(x);
      if (s.mask != nullptr) load_row_f32(*s.mask, iq1, iq2 % s.mask->ne[2], iq3 % s.mask->ne[3], m.data());
      const float slope = s.alibi.slope(iq2);
      double max = -INFINITY;
      for (int64_t j = 0; j < s.n_kv; ++j) {
        load_row_f32(s.k, j, ik2, ik3, k.data());
        double dot = 0.0;
        for (int64_t i = 0; i < s.d; ++i)
          dot += static_cast<double>(q[static_cast<size_t>(i)]) * k[static_cast<size_t>(i)];
        float x = logit(s, static_cast<float>(dot));
        if (s.mask != nullptr) x += slope * m[static_cast<size_t>(j)];
        w[static_cast<size_t>(j)] = x;
        max = std::max(max, static_cast<double>(x));
      }
      float* y = reinterpret_cast<float*>(dst.at(0, iq2, iq1, iq3));
      // The head's sink joins the denominator (and the max) and adds nothing to the sum of V.
      const double sink = s.sinks != nullptr ? s.sinks[iq2] : -INFINITY;
      max = std::max(max, sink);
      if (max == -INFINITY) {  // every cell masked: zeros, as SOFT_MAX defines such a row
        std::fill(y, y + s.d_v, 0.0f);
        continue;
      }
      double sum = s.sinks != nullptr ? std::exp(sink - max) : 0.0;
      for (double& x : w) sum += (x = std::exp(x - max));
      for (double& x : w) x = f16_cache ? round_f16(static_cast<float>(x / sum)) : x / sum;
      std::fill(out.begin(), out.end(), 0.0);
      for (int64_t j = 0; j < s.n_kv; ++j) {
        if (w[static_cast<size_t>(j)] == 0.0) continue;
        load_row_f32(s.v, j, ik2, ik3, v.data());
        for (int64_t i = 0; i < s.d_v; ++i)
          out[static_cast<size_t>(i)] += w[static_cast<size_t>(j)] * v[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < s.d_v; ++i) y[i] = static_cast<float>(out[static_cast<size_t>(i)]);
    }
  });
}

// ---------------------------------------------------------------- fast path

constexpr int64_t kBlock = 64;  // cells per online-softmax step
// Query vectors (heads x rows) sharing one pass over K/V.
constexpr int64_t kQueriesPerTask = vec::kMaxDotRows;

// How the fast path reads V: rows of d_v contiguous elements (ggml's layout), or the transposed
// view of our KV cache (each channel's cells contiguous).
enum class VLayout { Rows, Channels };

template <typename T>
const T* element_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return reinterpret_cast<const T*>(t.at(i0, i1, i2, i3));
}

// One query vector's running state.
struct QueryState {
  int64_t iq1 = 0, iq2 = 0;
  float max = kNegInf;
  double sum = 0.0;
};

// Queries [task's heads] x [task's rows] of one K/V head and batch, over all cells. Per block of
// cells: the mask rows, every score (each K row read once for all the task's queries), then per
// query the online softmax step, then V (each V row or channel read once for all of them).
template <typename KV>
void attend(const Shapes& s, const vec::MathKernels& mk, VLayout layout, int64_t iq3, int64_t ik2,
            int64_t head0, int64_t n_heads, int64_t row0, int64_t n_rows, Tensor& dst,
            std::vector<float>& work) {
  constexpr bool kF16 = std::is_same_v<KV, uint16_t>;
  const int n = static_cast<int>(n_heads * n_rows);
  const int64_t ik3 = iq3 / s.batches_per_kv;
  const size_t d = static_cast<size_t>(s.d), d_v = static_cast<size_t>(s.d_v), nq = static_cast<size_t>(n);
  work.resize(nq * (d + d_v + 3 * kBlock));
  float* qs = work.data();              // [n][d]
  float* acc = qs + nq * d;             // [n][d_v]
  float* scores = acc + nq * d_v;       // [n][kBlock]: logits, then probabilities
  float* masks = scores + nq * kBlock;  // [n][kBlock]: slope * mask
  float* raw = masks + nq * kBlock;     // [kBlock][n]: dot products as they come
  QueryState st[vec::kMaxDotRows];
  bool live[vec::kMaxDotRows];  // the block holds a cell this query sees
  float correction[vec::kMaxDotRows];
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t r = 0; r < n_rows; ++r) {
      const size_t i = static_cast<size_t>(h * n_rows + r);
      st[i].iq1 = row0 + r;
      st[i].iq2 = head0 + h;
      load_row_f32(s.q, st[i].iq1, st[i].iq2, iq3, qs + i * d);
    }
  std::fill(acc, acc + nq * d_v, 0.0f);
  auto dot_rows = [&](const KV* a, const float* b, int64_t stride, int64_t len, float* out) {
    if constexpr (kF16)
      mk.dot_rows_f16(a, b, stride, n, len, out);
    else
      mk.dot_rows_f32(a, b, stride, n, len, out);
  };
  auto scale_add = [&](float* y, float sc, float w, const KV* a, int64_t len) {
    if constexpr (kF16)
      mk.scale_add_f16(y, sc, w, a, len);
    else
      mk.scale_add_f32(y, sc, w, a, len);
  };
  for (int64_t j0 = 0; j0 < s.n_kv; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, s.n_kv - j0);
    bool any = false;
    for (size_t i = 0; i < nq; ++i) {
      live[i] = true;
      if (s.mask == nullptr) continue;
      float* m = masks + i * kBlock;
      const char* mrow = s.mask->at(j0, st[i].iq1, st[i].iq2 % s.mask->ne[2], iq3 % s.mask->ne[3]);
      if (s.mask->nb[0] == sizeof(float) && s.mask->type == DType::F32)
        std::memcpy(m, mrow, static_cast<size_t>(nb) * sizeof(float));
      else if (s.mask->nb[0] == 2 && s.mask->type == DType::F16)
        fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(mrow), m, nb);
      else
        for (int64_t b = 0; b < nb; ++b) m[b] = load_f32(s.mask->type, mrow + b * s.mask->nb[0]);
      const float slope = s.alibi.slope(st[i].iq2);
      bool seen = false;
      for (int64_t b = 0; b < nb; ++b) {
        m[b] *= slope;
        seen = seen || m[b] != kNegInf;
      }
      live[i] = seen;
      any = any || seen;
    }
    if (s.mask != nullptr && !any) continue;  // the mask hides the whole block from every query
    for (int64_t b = 0; b < nb; ++b)
      dot_rows(element_ptr<KV>(s.k, 0, j0 + b, ik2, ik3), qs, s.d, s.d, raw + b * n);
    for (size_t i = 0; i < nq; ++i) {
      float* x = scores + i * kBlock;
      correction[i] = 1.0f;
      if (!live[i]) {
        std::fill(x, x + nb, 0.0f);  // weights 0: V adds nothing to this query
        continue;
      }
      float block_max = kNegInf;
      for (int64_t b = 0; b < nb; ++b) {
        x[b] = logit(s, raw[b * n + static_cast<int64_t>(i)]);
        if (s.mask != nullptr) x[b] += masks[i * kBlock + static_cast<size_t>(b)];
        block_max = std::max(block_max, x[b]);
      }
      QueryState& q = st[i];
      const float new_max = std::max(q.max, block_max);
      correction[i] = q.max == kNegInf ? 0.0f : std::exp(q.max - new_max);
      q.sum = q.sum * correction[i] + mk.exp_sum(x, x, nb, new_max);
      q.max = new_max;
    }
    if (layout == VLayout::Rows) {
      for (size_t i = 0; i < nq; ++i) {
        float* a = acc + i * d_v;
        const float* p = scores + i * kBlock;
        float sc = correction[i];
        for (int64_t b = 0; b < nb; ++b) {
          if (p[b] == 0.0f) continue;
          scale_add(a, sc, p[b], element_ptr<KV>(s.v, 0, j0 + b, ik2, ik3), s.d_v);
          sc = 1.0f;
        }
        if (sc != 1.0f)
          for (size_t c = 0; c < d_v; ++c) a[c] *= sc;
      }
    } else {
      float sums[vec::kMaxDotRows];
      for (size_t c = 0; c < d_v; ++c) {
        dot_rows(element_ptr<KV>(s.v, static_cast<int64_t>(c), j0, ik2, ik3), scores, kBlock, nb, sums);
        for (size_t i = 0; i < nq; ++i) acc[i * d_v + c] = acc[i * d_v + c] * correction[i] + sums[i];
      }
    }
  }
  for (size_t i = 0; i < nq; ++i) {
    float* y = reinterpret_cast<float*>(dst.at(0, st[i].iq2, st[i].iq1, iq3));
    float* a = acc + i * d_v;
    if (s.sinks != nullptr) {
      // The head's sink as one more cell with no value: above the running max it rescales what
      // was gathered (to nothing if no cell was seen), else it adds exp(sink - max) to the sum.
      const float sink = s.sinks[st[i].iq2];
      if (sink > st[i].max) {
        const float rescale = st[i].max == kNegInf ? 0.0f : std::exp(st[i].max - sink);
        for (size_t c = 0; c < d_v; ++c) a[c] *= rescale;
        st[i].sum = st[i].sum * rescale + 1.0;
        st[i].max = sink;
      } else {
        st[i].sum += std::exp(sink - st[i].max);
      }
    }
    if (st[i].sum == 0.0) {
      std::fill(y, y + s.d_v, 0.0f);
      continue;
    }
    const float inv = static_cast<float>(1.0 / st[i].sum);
    for (size_t c = 0; c < d_v; ++c) y[c] = a[c] * inv;
  }
}

// The fast path reads K rows and V rows or channels through plain pointers.
bool fast_layout(const Shapes& s, VLayout& layout) {
  const size_t es = traits(s.k.type).block_bytes;
  if (s.k.nb[0] != es || reinterpret_cast<uintptr_t>(s.k.data) % es != 0) return false;
  if (s.v.nb[0] == es) {
    layout = VLayout::Rows;
    return true;
  }
  if (s.v.nb[1] == es) {
    layout = VLayout::Channels;
    return true;
  }
  return false;
}

void fast(const ComputeContext& ctx, const Shapes& s, VLayout layout, Tensor& dst) {
  const vec::MathKernels& mk = vec::math();
  // A task: one batch, one K/V head, a group of its query heads and a tile of query rows, at most
  // kQueriesPerTask query vectors. Heads of one group go together so that they share each K/V
  // block; rows tile the rest.
  const int64_t n_kv_heads = s.n_head / s.heads_per_kv;
  const int64_t heads = std::min(s.heads_per_kv, kQueriesPerTask);
  const int64_t head_groups = (s.heads_per_kv + heads - 1) / heads;
  const int64_t rows = std::max<int64_t>(1, kQueriesPerTask / heads);
  const int64_t row_tiles = (s.n_q + rows - 1) / rows;
  const int64_t n_tasks = s.n_batch * n_kv_heads * head_groups * row_tiles;
  ctx.parallel_for(n_tasks, [&](int64_t begin, int64_t end) {
    std::vector<float> work;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t tile = t % row_tiles, group = (t / row_tiles) % head_groups,
                    ik2 = (t / (row_tiles * head_groups)) % n_kv_heads,
                    iq3 = t / (row_tiles * head_groups * n_kv_heads);
      const int64_t head0 = ik2 * s.heads_per_kv + group * heads;
      const int64_t n_heads = std::min(heads, (ik2 + 1) * s.heads_per_kv - head0);
      const int64_t row0 = tile * rows, n_rows = std::min(rows, s.n_q - row0);
      if (s.k.type == DType::F16)
        attend<uint16_t>(s, mk, layout, iq3, ik2, head0, n_heads, row0, n_rows, dst, work);
      else
        attend<float>(s, mk, layout, iq3, ik2, head0, n_heads, row0, n_rows, dst, work);
    }
  });
}

// ---------------------------------------------------------------- visible spans

// A query row's span: the cells [lo, hi) around every cell its mask leaves visible (not -inf), in
// every mask plane the row is broadcast over, rounded out to kSpanAlign cells. The composed ops run
// over a group's span only: a cell outside it is hidden, so its softmax weight is exactly 0 and it
// adds exactly 0 to the sums, and with both ends on multiples of kSpanAlign (or at n_kv) the
// kernels' vector lanes and tails fall on the same cells as over [0, n_kv): the same bits.
// A server's batch holds one row per sequence, each in its own range of the shared cache, so the
// step's attention costs each sequence its own cells instead of every sequence's.
constexpr int64_t kSpanAlign = 64;

struct Span {
  int64_t lo = 0, hi = 0;  // empty when hi <= lo: every cell is hidden
  int64_t size() const noexcept { return std::max<int64_t>(0, hi - lo); }
  bool empty() const noexcept { return hi <= lo; }
};

Span merge(Span a, Span b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

bool hidden(const char* p, DType type) {
  if (type == DType::F16) {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof bits);
    return bits == 0xfc00;  // f16 -inf
  }
  float x;
  std::memcpy(&x, p, sizeof x);
  return x == kNegInf;
}

// The first cell in [from, to) of a mask row that is not hidden (to when none): a server's step
// scans every row of a cache of all the slots' cells once per layer, so contiguous f32 rows go 16
// cells at a time.
int64_t first_visible(const char* row, size_t nb0, DType type, int64_t from, int64_t to) {
  int64_t j = from;
  if (type == DType::F32 && nb0 == sizeof(float)) {
    constexpr int64_t kStep = 16;
    const float* f = reinterpret_cast<const float*>(row);
    for (; j + kStep <= to; j += kStep) {
      bool all = true;
      for (int64_t i = 0; i < kStep; ++i) all &= f[j + i] == kNegInf;
      if (!all) break;
    }
  }
  while (j < to && hidden(row + static_cast<size_t>(j) * nb0, type)) ++j;
  return j;
}

// One past the last cell in [from, to) that is not hidden (from when none).
int64_t last_visible_end(const char* row, size_t nb0, DType type, int64_t from, int64_t to) {
  int64_t j = to;
  if (type == DType::F32 && nb0 == sizeof(float)) {
    constexpr int64_t kStep = 16;
    const float* f = reinterpret_cast<const float*>(row);
    for (; j - kStep >= from; j -= kStep) {
      bool all = true;
      for (int64_t i = 1; i <= kStep; ++i) all &= f[j - i] == kNegInf;
      if (!all) break;
    }
  }
  while (j > from && hidden(row + static_cast<size_t>(j - 1) * nb0, type)) --j;
  return j;
}

Span visible_span(const Shapes& s, int64_t iq1) {
  if (s.mask == nullptr) return {0, s.n_kv};
  const Tensor& m = *s.mask;
  const size_t nb0 = m.nb[0];
  int64_t lo = s.n_kv, hi = 0;
  for (int64_t i3 = 0; i3 < m.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < m.ne[2]; ++i2) {
      const char* row = m.at(0, iq1, i2, i3);
      lo = first_visible(row, nb0, m.type, 0, lo);
      hi = last_visible_end(row, nb0, m.type, hi, s.n_kv);
    }
  if (hi <= lo) return {};
  return {lo / kSpanAlign * kSpanAlign, std::min(s.n_kv, (hi + kSpanAlign - 1) / kSpanAlign * kSpanAlign)};
}

// ---------------------------------------------------------------- composed strategy

// KQ a group of query rows may hold (the scratch it takes): a 512-token batch at depth 4096 would
// hold 151 MB of it at once; 4 MiB stays in the last-level cache.
constexpr int64_t kGroupBytes = int64_t{4} << 20, kMinGroup = 32;
// What a group of its own costs beyond its work, in cells x rows: its four ops' dispatches. A row
// joins the group before it when the union of their spans costs less than that: rows of one
// sequence (a prompt) go together, rows of sequences in different ranges of the cache do not.
constexpr int64_t kGroupCost = 256;
// Groups with less work than this (multiply-adds) run side by side, each on one thread, rather
// than one after another on all of them: a server's step has one small group per sequence.
constexpr int64_t kSmallGroupMacs = int64_t{1} << 21;

// The composed ops need K rows and the KV cache's transposed V (V^T rows, MUL_MAT's weights) in place.
bool composed_layout(const Shapes& s, VLayout layout) { return layout == VLayout::Channels && s.n_kv > 0; }

// Descriptors of the composed ops' operands and results for their kernels, on the stack: no Context
// (a generation step runs this once per layer, and the builders' allocations showed).
class Descriptors {
 public:
  // A contiguous F32 result of `op` over `srcs` at `data`.
  Tensor& node(Op op, const std::array<int64_t, kMaxDims>& ne, std::initializer_list<const Tensor*> srcs,
               void* data) {
    Tensor& t = next();
    t.op = op;
    t.ne = ne;
    t.nb = contiguous_strides(DType::F32, ne);
    size_t i = 0;
    for (const Tensor* s : srcs) t.src[i++] = const_cast<Tensor*>(s);
    t.data = data;
    return t;
  }
  // `of`'s elements with other dims and strides, `offset` bytes in (what VIEW, PERMUTE and
  // TRANSPOSE make; kernels read only data and strides).
  Tensor& view(const Tensor& of, const std::array<int64_t, kMaxDims>& ne,
               const std::array<size_t, kMaxDims>& nb, size_t offset) {
    Tensor& t = next();
    t.op = Op::View;
    t.type = of.type;
    t.ne = ne;
    t.nb = nb;
    t.data = static_cast<char*>(of.data) + offset;
    return t;
  }

 private:
  Tensor& next() {
    TESSERA_ASSERT(used_ < items_.size());
    return items_[used_++];
  }
  std::array<Tensor, 16> items_;
  size_t used_ = 0;
};

// Consecutive query rows attended together over the union of their spans.
struct Group {
  int64_t t0 = 0, rows = 0;
  Span span;
};

int64_t group_rows_max(const Shapes& s, int64_t span) {
  const int64_t per_row =
      std::max<int64_t>(1, span) * s.n_head * s.n_batch * static_cast<int64_t>(sizeof(float));
  return std::max(kMinGroup, kGroupBytes / per_row / kMinGroup * kMinGroup);
}

std::vector<Group> groups_of(const Shapes& s) {
  std::vector<Group> groups;
  for (int64_t t = 0; t < s.n_q; ++t) {
    const Span sp = visible_span(s, t);
    if (!groups.empty()) {
      Group& g = groups.back();
      const Span u = merge(g.span, sp);
      const int64_t together = (g.rows + 1) * u.size(),
                    apart = g.rows * g.span.size() + sp.size() + kGroupCost;
      if (g.rows < group_rows_max(s, u.size()) && together <= apart) {
        ++g.rows;
        g.span = u;
        continue;
      }
    }
    groups.push_back({t, 1, sp});
  }
  return groups;
}

size_t group_bytes(const Shapes& s, const Group& g) {
  const size_t kq = static_cast<size_t>(g.span.size() * g.rows * s.n_head * s.n_batch) * sizeof(float);
  const size_t kqv = static_cast<size_t>(s.d_v * s.n_head * s.n_batch * g.rows) * sizeof(float);
  return kq + kqv + 64;  // and the alignment
}

// One group's attention as the graph ops it is made of, run by their CPU kernels on descriptors of
// `memory` (group_bytes of it) over the group's span of cells: MUL_MAT(K, Q), SCALE and TANH when
// soft-capping (softcap * tanh(scale * KQ / softcap), then the softmax scales by softcap),
// SOFT_MAX with the mask, scale and ALiBi, MUL_MAT(V^T, P), and the merged heads copied into dst.
// So the result has those kernels' bits: a query row's result does not depend on the group it is
// in (MUL_MAT's bits do not depend on the batch width), nor on the thread count, nor on its span.
// Each op runs on `threads` threads, or on the caller alone when it touches fewer than
// min_parallel_bytes (generation's SOFT_MAX and copy are a few KiB).
void composed_group(const ComputeContext& ctx, int threads, const Shapes& s, const Group& g, char* memory,
                    Tensor& dst) {
  const FlashAttnParams p = flash_attn_params(dst);
  const int64_t t0 = g.t0, rows = g.rows, lo = g.span.lo, n = g.span.size();
  char* kq_memory = memory + (64 - reinterpret_cast<uintptr_t>(memory) % 64) % 64;
  char* kqv_memory = kq_memory + static_cast<size_t>(n * rows * s.n_head * s.n_batch) * sizeof(float);
  // The inner kernels' own scratch (MUL_MAT's prepared Q rows) must not move ours.
  thread_local std::vector<char> inner_scratch;
  ComputeContext inner = ctx;
  inner.arena = nullptr;
  inner.scratch = &inner_scratch;
  auto run = [&](Tensor& t) {
    inner.n_threads = bytes_touched(t) < ctx.min_parallel_bytes ? 1 : threads;
    compute_node(inner, t);
  };
  const Tensor& q = s.q;
  const Tensor* mask = s.mask;
  const std::array<size_t, kMaxDims>& knb = s.k.nb;
  const std::array<size_t, kMaxDims>& vnb = s.v.nb;
  Descriptors d;
  // K rows and V^T ([n, D_v] rows per K/V head, the cache's own layout) of the span's cells.
  const Tensor& k = d.view(s.k, {s.d, n, s.k.ne[2], s.k.ne[3]}, knb, static_cast<size_t>(lo) * knb[1]);
  const Tensor& v_t = d.view(s.v, {n, s.d_v, s.v.ne[2], s.v.ne[3]}, {vnb[1], vnb[0], vnb[2], vnb[3]},
                             static_cast<size_t>(lo) * vnb[1]);
  // A lone query row of grouped heads (a generation step's row): the heads that share a K/V head
  // are the columns of one product, so MUL_MAT reads each K row and V^T row once for all of them
  // (in its tiles) instead of once per head. KQ and KQV are laid out the same either way
  // ([n, 1, H] is [n, H / G, G] for G K/V heads), and MUL_MAT's bits do not depend on the width.
  const int64_t n_kv_heads = s.n_head / s.heads_per_kv;
  const bool fold = rows == 1 && s.heads_per_kv > 1 && s.n_batch == 1 && s.k.ne[3] == 1;
  const std::array<int64_t, kMaxDims> kq_ne{n, rows, s.n_head, s.n_batch},
      kq_fold_ne{n, s.heads_per_kv, n_kv_heads, 1};
  const std::array<int64_t, kMaxDims> kqv_ne{s.d_v, rows, s.n_head, s.n_batch},
      kqv_fold_ne{s.d_v, s.heads_per_kv, n_kv_heads, 1};
  const Tensor& q_part =
      fold ? d.view(q, {s.d, s.heads_per_kv, n_kv_heads, 1},
                    {q.nb[0], q.nb[2], q.nb[2] * static_cast<size_t>(s.heads_per_kv), q.nb[3]},
                    static_cast<size_t>(t0) * q.nb[1])
           : d.view(q, {s.d, rows, s.n_head, s.n_batch}, q.nb, static_cast<size_t>(t0) * q.nb[1]);
  Tensor* kq = &d.node(Op::MulMat, fold ? kq_fold_ne : kq_ne, {&k, &q_part}, kq_memory);
  run(*kq);
  float softmax_scale = p.scale;
  if (p.softcap != 0.0f) {
    Tensor& scaled = d.node(Op::Scale, kq->ne, {kq}, kq_memory);
    detail::store_params(scaled, ScaleParams{p.scale / p.softcap, 0.0f});
    run(scaled);
    Tensor& capped = d.node(Op::Unary, kq->ne, {&scaled}, kq_memory);
    detail::store_params(capped, UnaryOp::Tanh);
    run(capped);
    kq = &capped;
    softmax_scale = p.softcap;
  }
  const Tensor* kq_rows = fold ? &d.view(*kq, kq_ne, contiguous_strides(DType::F32, kq_ne), 0) : kq;
  const Tensor* mask_part = nullptr;
  if (mask != nullptr)
    mask_part = &d.view(*mask, {n, rows, mask->ne[2], mask->ne[3]}, mask->nb,
                        static_cast<size_t>(t0) * mask->nb[1] + static_cast<size_t>(lo) * mask->nb[0]);
  // The softmax sees each row and head as they are (ALiBi's slope is per head).
  Tensor& probs = d.node(Op::SoftMax, kq_ne, {kq_rows, mask_part, dst.src[4]}, kq_memory);
  detail::store_params(probs, SoftMaxParams{softmax_scale, p.max_bias});
  run(probs);
  const Tensor* probs_in =
      fold ? &d.view(probs, kq_fold_ne, contiguous_strides(DType::F32, kq_fold_ne), 0) : &probs;
  Tensor& kqv = d.node(Op::MulMat, fold ? kqv_fold_ne : kqv_ne, {&v_t, probs_in}, kqv_memory);
  run(kqv);
  const std::array<size_t, kMaxDims> kqv_nb = contiguous_strides(DType::F32, kqv_ne);
  // The merged heads: kqv permuted to [D_v, H, rows, B], copied into the group's rows of dst.
  const Tensor& merged =
      d.view(kqv, {s.d_v, s.n_head, rows, s.n_batch}, {kqv_nb[0], kqv_nb[2], kqv_nb[1], kqv_nb[3]}, 0);
  Tensor& out = d.view(dst, {s.d_v, s.n_head, rows, s.n_batch}, dst.nb, static_cast<size_t>(t0) * dst.nb[2]);
  out.op = Op::Cpy;
  out.src[0] = const_cast<Tensor*>(&merged);
  run(out);
}

// Rows whose mask hides every cell: zeros, as SOFT_MAX defines such a row.
void zero_rows(const Shapes& s, const Group& g, Tensor& dst) {
  for (int64_t b = 0; b < s.n_batch; ++b)
    for (int64_t t = g.t0; t < g.t0 + g.rows; ++t)
      std::memset(dst.at(0, 0, t, b), 0, static_cast<size_t>(s.d_v * s.n_head) * sizeof(float));
}

// The attention per group of query rows (groups_of): the large groups one after another, each op
// on all threads; the small ones (a server's step: a row per sequence) side by side, one group per
// thread at a time.
void composed(const ComputeContext& ctx, const Shapes& s, Tensor& dst) {
  const std::vector<Group> groups = groups_of(s);
  std::vector<const Group*> small;
  for (const Group& g : groups) {
    if (g.span.empty()) {
      zero_rows(s, g, dst);
      continue;
    }
    const int64_t macs = g.rows * g.span.size() * s.n_head * s.n_batch * (s.d + s.d_v);
    if (macs < kSmallGroupMacs) {
      small.push_back(&g);
      continue;
    }
    composed_group(ctx, ctx.n_threads, s, g, ctx.scratch_memory(group_bytes(s, g)), dst);
  }
  if (small.size() == 1) {
    composed_group(ctx, ctx.n_threads, s, *small[0], ctx.scratch_memory(group_bytes(s, *small[0])), dst);
  } else if (!small.empty()) {
    ctx.parallel_for(static_cast<int64_t>(small.size()), [&](int64_t begin, int64_t end) {
      thread_local std::vector<char> memory;
      for (int64_t i = begin; i < end; ++i) {
        const Group& g = *small[static_cast<size_t>(i)];
        const size_t bytes = group_bytes(s, g);
        if (memory.size() < bytes) memory.resize(bytes);
        composed_group(ctx, 1, s, g, memory.data(), dst);
      }
    });
  }
}

}  // namespace

void run_flash_attn(const ComputeContext& ctx, Tensor& dst) {
  const Shapes s = shapes_of(dst);
  VLayout layout = VLayout::Rows;
  if (ctx.reference() || !fast_layout(s, layout)) return reference(ctx, s, dst);
  if (!flash_attn_params(dst).online_softmax && composed_layout(s, layout)) return composed(ctx, s, dst);
  fast(ctx, s, layout, dst);
}

}  // namespace tessera::cpu
