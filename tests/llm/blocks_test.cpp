// The shared graph blocks' norms against hand-computed values.
#include "llm/blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tessera/allocator.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

// x = [[1, 2, 3, 6], [-2, 0, 2, 4]] (two rows of 4), weight w, bias c.
std::vector<float> run_norm(bool layer) {
  auto model = Model::load(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  KvCache cache(4);
  Context ctx;
  Graph graph;
  GraphBuild b(ctx, graph, *model, cache);
  Tensor* x = ctx.new_tensor(DType::F32, 4, 2);
  Tensor* w = ctx.new_tensor(DType::F32, 4);
  Tensor* c = ctx.new_tensor(DType::F32, 4);
  auto buffer = host_buffer_type().allocate(4096);
  buffer->place(*x, 0);
  buffer->place(*w, 1024);
  buffer->place(*c, 2048);
  const float xv[] = {1, 2, 3, 6, -2, 0, 2, 4}, wv[] = {1, 2, 0.5f, -1}, cv[] = {0.5f, 0, 0, 1};
  tensor_set(*x, xv, 0, sizeof xv);
  tensor_set(*w, wv, 0, sizeof wv);
  tensor_set(*c, cv, 0, sizeof cv);
  Tensor* out = layer ? layer_norm(b, x, w, c, 0.0f, "n", 0) : rms_norm(b, x, w, 0.0f, "n", 0);
  EXPECT_EQ(out->name, "n.0");
  graph.expand(out);
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(graph);
  cpu::CpuBackend(1).compute(graph);
  std::vector<float> got(8);
  tensor_get(*out, got.data(), 0, sizeof(float) * 8);
  return got;
}

}  // namespace

TEST(Blocks, RmsNormTimesWeight) {
  // Row 0: mean square (1 + 4 + 9 + 36) / 4 = 12.5; row 1: (4 + 0 + 4 + 16) / 4 = 6.
  const std::vector<float> got = run_norm(false);
  const float r0 = 1.0f / std::sqrt(12.5f), r1 = 1.0f / std::sqrt(6.0f);
  const float expected[] = {1 * r0, 4 * r0, 1.5f * r0, -6 * r0, -2 * r1, 0, 1 * r1, -4 * r1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(Blocks, LayerNormTimesWeightPlusBias) {
  // Row 0: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5; row 1: mean 1, variance (9 + 1 + 1 + 9) / 4 = 5.
  const std::vector<float> got = run_norm(true);
  const float s0 = 1.0f / std::sqrt(3.5f), s1 = 1.0f / std::sqrt(5.0f);
  const float expected[] = {-2 * s0 + 0.5f, -2 * s0, 0,         -3 * s0 + 1,  //
                            -3 * s1 + 0.5f, -2 * s1, 0.5f * s1, -3 * s1 + 1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

namespace {

// Layer 0's attention block of stories260K over 6 tokens of one sequence (cells 0..5, F32 cache)
// with a sliding window, and what a token that sees only itself gets: wo (wv x), K/V heads shared.
struct WindowRun {
  std::vector<float> attn, value_only;
};

WindowRun run_attention(int32_t window) {
  auto model = Model::load(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  const Hparams& h = model->hparams();
  constexpr int64_t kTokens = 6;
  KvCache cache(*model, 32, DType::F32);
  const std::vector<int64_t> cells{0, 1, 2, 3, 4, 5};
  const std::vector<Pos> pos{0, 1, 2, 3, 4, 5};
  const std::vector<SeqId> seqs(kTokens, 0);
  cache.store(cells, pos, seqs);
  Context ctx;
  Graph graph;
  GraphBuild b(ctx, graph, *model, cache);
  b.n_tokens = kTokens;
  b.n_kv = 32;
  b.runs = {{0, 0, kTokens}};
  b.positions = ctx.new_tensor(DType::I32, kTokens);
  Tensor* x = ctx.new_tensor(DType::F32, h.n_embd, kTokens);
  AttentionParams ap;
  ap.rope.n_dims = static_cast<int>(h.n_rot);
  ap.kq_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  ap.window = window;
  AttentionWeights l;
  l.wq = model->weight("blk.0.attn_q.weight");
  l.wk = model->weight("blk.0.attn_k.weight");
  l.wv = model->weight("blk.0.attn_v.weight");
  l.wo = model->weight("blk.0.attn_output.weight");
  Tensor* attn = attention(b, l, 0, x, ap);
  Tensor* v = ops::mul_mat(ctx, l.wv, x);  // [n_embd_kv, tokens]
  graph.expand(attn);
  graph.expand(v);

  auto inputs = host_buffer_type().allocate(1 << 16);
  inputs->place(*b.positions, 0);
  inputs->place(*x, 1024);
  std::memcpy(b.positions->data, pos.data(), sizeof(int32_t) * kTokens);
  auto* xv = static_cast<float*>(x->data);
  for (int64_t i = 0; i < x->nelements(); ++i) xv[i] = std::sin(0.37f * static_cast<float>(i));
  EXPECT_EQ(b.masks.size(), 1u);
  Tensor* mask = b.masks.at(0).second;
  inputs->place(*mask, 1024 + x->nbytes() + 64);
  cache.fill_mask(pos, seqs, b.n_kv, b.masks[0].first, static_cast<float*>(mask->data));
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(graph);
  cpu::CpuBackend(1).compute(graph);
  WindowRun r;
  r.attn.resize(static_cast<size_t>(attn->nelements()));
  tensor_get(*attn, r.attn.data(), 0, r.attn.size() * 4);
  // wo times V with each query head reading its group's K/V head (head q uses q / group), on the host.
  std::vector<float> vv(static_cast<size_t>(v->nelements()));
  tensor_get(*v, vv.data(), 0, vv.size() * 4);
  const int64_t hd = h.head_dim(), group = h.n_head / h.n_head_kv, n_embd = h.n_embd;
  EXPECT_EQ(l.wo->type, DType::F32);
  const auto* wo = static_cast<const float*>(l.wo->data);  // [n_embd in, n_embd out]
  r.value_only.assign(r.attn.size(), 0.0f);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t o = 0; o < n_embd; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < n_embd; ++i) {
        const int64_t head = i / hd, kv_head = head / group;
        acc += static_cast<double>(wo[o * n_embd + i]) *
               vv[static_cast<size_t>(t * h.n_embd_kv() + kv_head * hd + i % hd)];
      }
      r.value_only[static_cast<size_t>(t * n_embd + o)] = static_cast<float>(acc);
    }
  return r;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST(Blocks, AttentionWithAOneTokenWindowSeesOnlyItself) {
  // Each token's softmax has one visible cell (its own): the output is wo (wv x), per token.
  const WindowRun one = run_attention(1);
  EXPECT_LT(max_diff(one.attn, one.value_only), 1e-5);
  // Without a window the earlier tokens mix in (except for the first token, which sees only itself).
  const WindowRun all = run_attention(0);
  EXPECT_GT(max_diff(all.attn, all.value_only), 1e-3);
  // A window wider than the sequence is no window at all.
  EXPECT_EQ(run_attention(6).attn, all.attn);
}
