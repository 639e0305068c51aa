// The scheduler's own description of the graph and its plan cache: the caller's tensors are never
// written, a graph of the same structure (built in a fresh Context, other data, other view
// offsets) reuses the plan and allocates nothing, a new shape makes a new plan; and offload is
// considered only for nodes reading weights in host memory, by the op's own batch size.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backend/fake_device.h"
#include "tessera/scheduler.h"
#include "tessera/tessera.h"

using namespace tessera;
using tessera::test::FakeBackend;
using tessera::test::FakeDevice;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> read(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  tensor_get(t, v.data(), 0, v.size() * 4);
  return v;
}

// Places tensors one after another in a fresh buffer of `type`.
std::unique_ptr<Buffer> place_all(BufferType& type, std::initializer_list<Tensor*> tensors) {
  size_t total = 0;
  for (const Tensor* t : tensors)
    total += (type.alloc_size(*t) + type.alignment() - 1) / type.alignment() * type.alignment();
  auto buffer = type.allocate(total);
  size_t offset = 0;
  for (Tensor* t : tensors) {
    buffer->place(*t, offset);
    offset += (type.alloc_size(*t) + type.alignment() - 1) / type.alignment() * type.alignment();
  }
  return buffer;
}

// Everything of a tensor a scheduler could change.
struct Snapshot {
  Tensor copy;
  explicit Snapshot(const Tensor& t) : copy(t) {}
  void expect_same(const Tensor& t) const {
    EXPECT_EQ(t.op, copy.op) << copy.name;
    EXPECT_EQ(t.type, copy.type) << copy.name;
    EXPECT_EQ(t.ne, copy.ne) << copy.name;
    EXPECT_EQ(t.nb, copy.nb) << copy.name;
    EXPECT_EQ(t.params, copy.params) << copy.name;
    EXPECT_EQ(t.src, copy.src) << copy.name;
    EXPECT_EQ(t.view_src, copy.view_src) << copy.name;
    EXPECT_EQ(t.view_offset, copy.view_offset) << copy.name;
    EXPECT_EQ(t.data, copy.data) << copy.name;
    EXPECT_EQ(t.buffer, copy.buffer) << copy.name;
    EXPECT_EQ(t.flags, copy.flags) << copy.name;
    EXPECT_EQ(t.name, copy.name);
  }
};

// h = silu(mul_mat(w, x[:, 1:]) + bias); out = soft_max(mul_mat(w2, h)): a view of a host leaf
// read on the device, an op the device lacks, two matmuls.
struct Mlp {
  static constexpr int64_t K = 16, M = 24, N = 8;
  std::vector<float> wv = random_values(K * M, 1), w2v = random_values(M * N, 2), bv = random_values(M, 3);
  Context wctx;
  Tensor* w = wctx.new_tensor(DType::F32, K, M);
  Tensor* w2 = wctx.new_tensor(DType::F32, M, N);
  Tensor* bias = wctx.new_tensor(DType::F32, M);
  std::vector<std::unique_ptr<Buffer>> keep;

  explicit Mlp(BufferType& weights) {
    keep.push_back(place_all(weights, {w, w2}));
    keep.push_back(place_all(host_buffer_type(), {bias}));
    tensor_set(*w, wv.data(), 0, wv.size() * 4);
    tensor_set(*w2, w2v.data(), 0, w2v.size() * 4);
    tensor_set(*bias, bv.data(), 0, bv.size() * 4);
  }
  Tensor* build(Context& ctx, Tensor* x) const {
    Tensor* cols = ops::view(ctx, x, {K, x->ne[1] - 1, 1, 1}, x->nb[1], x->nb[1] * (x->ne[1] - 1),
                             x->nb[1] * (x->ne[1] - 1), x->nb[1]);
    Tensor* h = ops::silu(ctx, ops::add(ctx, ops::mul_mat(ctx, w, cols), bias));
    return ops::soft_max(ctx, ops::mul_mat(ctx, w2, h), nullptr, 0.5f);
  }
  // The same computation by hand: out[:, c] for columns 1.. of x.
  std::vector<float> expected(const std::vector<float>& x, int64_t cols) const {
    std::vector<float> out;
    for (int64_t c = 1; c < cols; ++c) {
      std::vector<double> h(M), z(N);
      for (int64_t m = 0; m < M; ++m) {
        double s = bv[m];
        for (int64_t k = 0; k < K; ++k) s += double(wv[m * K + k]) * x[c * K + k];
        h[m] = s / (1.0 + std::exp(-s));
      }
      double mx = -1e300, sum = 0;
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t m = 0; m < M; ++m) s += double(w2v[n * M + m]) * h[m];
        z[n] = 0.5 * s;
        mx = std::max(mx, z[n]);
      }
      for (auto& e : z) sum += (e = std::exp(e - mx));
      for (auto e : z) out.push_back(static_cast<float>(e / sum));
    }
    return out;
  }
};

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << i;
}

}  // namespace

TEST(SchedulerPlan, NeverWritesTheCallersGraph) {
  FakeDevice dev("Fake0", {Op::MulMat, Op::Add, Op::SoftMax});
  auto fake = dev.make_backend();
  cpu::CpuBackend cpu(1);
  Mlp mlp(dev.buffer_type());
  Context ictx;
  Tensor* x = ictx.new_tensor(DType::F32, Mlp::K, 5);
  auto xbuf = place_all(host_buffer_type(), {x});
  const auto xv = random_values(Mlp::K * 5, 4);
  tensor_set(*x, xv.data(), 0, xv.size() * 4);

  Context gctx;
  Tensor* out = mlp.build(gctx, x);
  Graph graph{out};
  std::vector<Snapshot> before;
  for (const Tensor* t : graph.nodes()) before.emplace_back(*t);
  for (const Tensor* t : graph.leafs()) before.emplace_back(*t);

  Scheduler sched({fake.get(), &cpu});
  for (int run = 0; run < 2; ++run) {
    sched.compute(graph);
    size_t i = 0;
    for (const Tensor* t : graph.nodes()) before[i++].expect_same(*t);
    for (const Tensor* t : graph.leafs()) before[i++].expect_same(*t);
    EXPECT_EQ(out->data, nullptr);  // the result lives in the scheduler's memory
    expect_near(read(sched.result(*out)), mlp.expected(xv, 5), 1e-5f);
  }
  // The device ran the matmuls and the add, the CPU the silu; x's view was copied to the device.
  EXPECT_EQ(sched.splits().size(), 3u) << sched.report();
  EXPECT_EQ(sched.fallbacks().size(), 1u) << sched.report();
  EXPECT_GE(sched.splits()[0].inputs, 1u) << sched.report();
  EXPECT_EQ(sched.plans_built(), 1u);
  EXPECT_EQ(sched.plans_reused(), 1u);
}

TEST(SchedulerPlan, GraphsOfOneShapeInFreshContextsShareAPlan) {
  FakeDevice dev("Fake0", {Op::MulMat, Op::Add, Op::SoftMax});
  auto fake = dev.make_backend();
  cpu::CpuBackend cpu(1);
  Mlp mlp(dev.buffer_type());
  Scheduler sched({fake.get(), &cpu});
  auto step = [&](int64_t cols, uint32_t seed) {
    // A fresh input descriptor and graph each time, as a generation step makes them.
    Context ictx;
    Tensor* x = ictx.new_tensor(DType::F32, Mlp::K, cols);
    auto xbuf = place_all(host_buffer_type(), {x});
    const auto xv = random_values(static_cast<size_t>(Mlp::K * cols), seed);
    tensor_set(*x, xv.data(), 0, xv.size() * 4);
    Context gctx;
    Tensor* out = mlp.build(gctx, x);
    sched.compute(Graph{out});
    expect_near(read(sched.result(*out)), mlp.expected(xv, cols), 1e-5f);
  };
  step(5, 10);
  const int allocations = dev.fake_buffer_type().allocations;
  const size_t bytes = sched.buffer_bytes();
  step(5, 11);
  step(5, 12);
  EXPECT_EQ(sched.plans_built(), 1u);
  EXPECT_EQ(sched.plans_reused(), 2u);
  EXPECT_EQ(dev.fake_buffer_type().allocations, allocations);  // a reused plan allocates nothing
  EXPECT_EQ(sched.buffer_bytes(), bytes);
  step(9, 13);  // another shape: another plan
  EXPECT_EQ(sched.plans_built(), 2u);
  step(5, 14);  // and the first one again
  EXPECT_EQ(sched.plans_built(), 2u);
  EXPECT_EQ(sched.plans_reused(), 3u);
  EXPECT_NE(sched.report().find("plans: 2 built, 3 reused"), std::string::npos) << sched.report();
}

// What a generation loop does: per token a fresh graph that stores K at position t of a cache
// (a view whose offset moves) and attends over the cache padded to a multiple of 8 positions, so
// that the shape changes once every 8 tokens. The reference is computed by hand.
class SchedulerGeneration : public testing::TestWithParam<bool> {};

TEST_P(SchedulerGeneration, PaddedKvLengthReusesOnePlanPerPadding) {
  const bool with_device = GetParam();
  constexpr int64_t d = 16, n_ctx = 32, pad = 8, n_steps = 12;
  FakeDevice dev("Fake0", {Op::MulMat, Op::SoftMax, Op::Cont});
  auto fake = dev.make_backend();
  cpu::CpuBackend cpu(2);
  std::vector<Backend*> backends{&cpu};
  if (with_device) backends.insert(backends.begin(), fake.get());
  Scheduler sched(backends);

  const auto wqv = random_values(d * d, 20), wkv = random_values(d * d, 21);
  Context wctx;
  Tensor* wq = wctx.new_tensor(DType::F32, d, d);
  Tensor* wk = wctx.new_tensor(DType::F32, d, d);
  Tensor* cache = wctx.new_tensor(DType::F32, d, n_ctx);
  auto wbuf = place_all(with_device ? dev.buffer_type() : host_buffer_type(), {wq, wk});
  auto cbuf = place_all(host_buffer_type(), {cache});
  cbuf->clear(0);
  tensor_set(*wq, wqv.data(), 0, wqv.size() * 4);
  tensor_set(*wk, wkv.data(), 0, wkv.size() * 4);
  // Inputs live in one persistent buffer; their descriptors are made afresh per token.
  auto inputs = host_buffer_type().allocate(4096);

  std::vector<float> ref_cache(static_cast<size_t>(d * n_ctx), 0.0f);
  const float scale = 0.25f;
  int allocations_after_first = 0;
  for (int64_t t = 0; t < n_steps; ++t) {
    const int64_t n_pad = (t + 1 + pad - 1) / pad * pad;
    const auto xv = random_values(d, static_cast<uint32_t>(100 + t));
    Context ctx;
    Tensor* x = ctx.new_tensor(DType::F32, d);
    Tensor* mask = ctx.new_tensor(DType::F32, n_pad);
    inputs->place(*x, 0);
    inputs->place(*mask, 1024);
    tensor_set(*x, xv.data(), 0, xv.size() * 4);
    std::vector<float> maskv(static_cast<size_t>(n_pad));
    for (int64_t j = 0; j < n_pad; ++j) maskv[j] = j <= t ? 0.0f : -std::numeric_limits<float>::infinity();
    tensor_set(*mask, maskv.data(), 0, maskv.size() * 4);

    Graph graph;
    Tensor* k = ops::mul_mat(ctx, wk, x);
    Tensor* q = ops::mul_mat(ctx, wq, x);
    Tensor* slot = ops::view(ctx, cache, {d, 1, 1, 1}, cache->nb[1], cache->nb[1], cache->nb[1],
                             static_cast<size_t>(t) * cache->nb[1]);
    graph.expand(ops::cpy(ctx, k, slot));
    Tensor* keys =
        ops::view(ctx, cache, {d, n_pad, 1, 1}, cache->nb[1], cache->nb[1] * n_pad, cache->nb[1] * n_pad, 0);
    Tensor* p = ops::soft_max(ctx, ops::mul_mat(ctx, keys, q), mask, scale);
    Tensor* out = ops::mul_mat(ctx, ops::cont(ctx, ops::transpose(ctx, keys)), p);
    graph.expand(out);
    sched.compute(graph);

    // By hand.
    std::vector<double> qv(d), kv(d);
    for (int64_t m = 0; m < d; ++m)
      for (int64_t i = 0; i < d; ++i) {
        qv[m] += double(wqv[m * d + i]) * xv[i];
        kv[m] += double(wkv[m * d + i]) * xv[i];
      }
    for (int64_t m = 0; m < d; ++m) ref_cache[t * d + m] = static_cast<float>(kv[m]);
    std::vector<double> w(static_cast<size_t>(t + 1));
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j <= t; ++j) {
      for (int64_t m = 0; m < d; ++m) w[j] += double(ref_cache[j * d + m]) * qv[m];
      w[j] *= scale;
      mx = std::max(mx, w[j]);
    }
    for (auto& e : w) sum += (e = std::exp(e - mx));
    std::vector<float> want(d);
    for (int64_t m = 0; m < d; ++m) {
      double s = 0;
      for (int64_t j = 0; j <= t; ++j) s += ref_cache[j * d + m] * w[j] / sum;
      want[m] = static_cast<float>(s);
    }
    expect_near(read(sched.result(*out)), want, 1e-4f);
    if (t == 0) allocations_after_first = dev.fake_buffer_type().allocations;
    if (t > 0 && t < pad) {
      EXPECT_EQ(dev.fake_buffer_type().allocations, allocations_after_first) << t;
    }
  }
  // Steps 0-7 share the 8-position plan, steps 8-11 the 16-position one.
  EXPECT_EQ(sched.plans_built(), 2u);
  EXPECT_EQ(sched.plans_reused(), static_cast<uint64_t>(n_steps - 2));
  if (with_device) {
    EXPECT_GE(sched.splits().size(), 3u) << sched.report();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SchedulerGeneration, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) {
                           return i.param ? "FakeAndCpu" : "CpuOnly";
                         });

TEST(SchedulerPlan, ANodeTheCallerPlacedIsComputedInPlace) {
  cpu::CpuBackend cpu(1);
  Scheduler sched({&cpu});
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  Tensor* b = ctx.new_tensor(DType::F32, 4);
  auto in = place_all(host_buffer_type(), {a, b});
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  tensor_set(*a, av, 0, sizeof av);
  tensor_set(*b, bv, 0, sizeof bv);
  Tensor* sum = ops::add(ctx, a, b);
  Tensor* out = ops::scale(ctx, sum, 2.0f);
  auto outbuf = place_all(host_buffer_type(), {out});
  Graph graph{out};
  sched.compute(graph);
  EXPECT_EQ(read(*out), (std::vector<float>{22, 44, 66, 88}));
  EXPECT_EQ(&sched.result(*out), &sched.result(*out));
  EXPECT_EQ(read(sched.result(*out)), (std::vector<float>{22, 44, 66, 88}));
  EXPECT_EQ(&sched.result(*a), a);  // a leaf is its own result
  // An intermediate's memory may have been reused: asking for it is an error, not stale bytes.
  EXPECT_THROW(sched.result(*sum), Error);
  Context other;
  EXPECT_THROW(sched.result(*other.new_tensor(DType::F32, 4)), Error);
}

TEST(SchedulerPlan, ALeafWithoutMemoryIsAnError) {
  cpu::CpuBackend cpu(1);
  Scheduler sched({&cpu});
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 4);
  a->name = "unplaced";
  Graph graph{ops::scale(ctx, a, 2.0f)};
  try {
    sched.compute(graph);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unplaced"), std::string::npos) << e.what();
  }
}

// Offload: a device that wants batches of >= 32 gets the nodes reading host weights at such a
// batch, and nothing at batch 1 (ROPE of 32 heads at one token included); nodes without weights
// are never pulled over by offload.
TEST(SchedulerOffload, OnlyNodesWithHostWeightsAndOnlyAtTheirOwnBatch) {
  FakeDevice dev("Fake0", {Op::MulMat, Op::Rope}, 32);
  auto fake = dev.make_backend();
  cpu::CpuBackend cpu(2);
  constexpr int64_t hd = 8, heads = 32;
  Context wctx;
  Tensor* w = wctx.new_tensor(DType::F32, 16, 24);
  Tensor* freqs = wctx.new_tensor(DType::F32, hd / 2);
  auto wbuf = place_all(host_buffer_type(), {w, freqs});
  const auto wv = random_values(16 * 24, 5);
  tensor_set(*w, wv.data(), 0, wv.size() * 4);
  const std::vector<float> fv(hd / 2, 1.0f);
  tensor_set(*freqs, fv.data(), 0, fv.size() * 4);
  w->flags |= kFlagWeight;
  freqs->flags |= kFlagWeight;

  std::vector<std::unique_ptr<Buffer>> keep;  // inputs, zeroed, kept for every run reading them
  auto run = [&](Tensor* node) {
    Scheduler sched({fake.get(), &cpu});
    Graph graph{node};
    for (Tensor* leaf : graph.leafs())
      if (leaf->data == nullptr) {
        keep.push_back(place_all(host_buffer_type(), {leaf}));
        keep.back()->clear(0);
      }
    sched.compute(graph);
    return std::make_pair(sched.backend_of(node),
                          sched.splits().empty() ? 0 : sched.splits()[0].weights_copied);
  };
  ops::RopeParams rp;
  rp.n_dims = hd;
  {
    Context ctx;
    auto [b, weights] = run(ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 16, 1)));
    EXPECT_EQ(b, &cpu);
    EXPECT_EQ(weights, 0u);
  }
  {
    Context ctx;
    auto [b, weights] = run(ops::mul_mat(ctx, w, ctx.new_tensor(DType::F32, 16, 32)));
    EXPECT_EQ(b, fake.get());  // a prompt batch: the weight is worth copying
    EXPECT_EQ(weights, 1u);
  }
  {
    // The same batch against a host leaf that is not a weight: no offload.
    Context ctx;
    Tensor* plain = ctx.new_tensor(DType::F32, 16, 24);
    EXPECT_EQ(run(ops::mul_mat(ctx, plain, ctx.new_tensor(DType::F32, 16, 32))).first, &cpu);
  }
  {
    // ROPE of one token of 32 heads, with and without weights (freq factors): stays.
    Context ctx;
    Tensor* q = ctx.new_tensor(DType::F32, hd, heads, 1);
    Tensor* pos = ctx.new_tensor(DType::I32, 1);
    EXPECT_EQ(run(ops::rope(ctx, q, pos, freqs, rp)).first, &cpu);
    EXPECT_EQ(run(ops::rope(ctx, q, pos, nullptr, rp)).first, &cpu);
  }
  {
    // 32 tokens: with freq factors it goes, without weights it stays.
    Context ctx;
    Tensor* q = ctx.new_tensor(DType::F32, hd, 4, 32);
    Tensor* pos = ctx.new_tensor(DType::I32, 32);
    EXPECT_EQ(run(ops::rope(ctx, q, pos, freqs, rp)).first, fake.get());
    EXPECT_EQ(run(ops::rope(ctx, q, pos, nullptr, rp)).first, &cpu);
  }
}
