// Graph allocator: peaks of known graphs, live ranges computed independently here never share
// bytes, outputs and leafs survive, in-place reuse, free-space reuse, and CPU results equal to an
// allocating Context's.
#include "tessera/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

// Host memory with a chosen alignment, per-tensor padding (alloc_size > nbytes) and size limit.
class TestBuffer final : public Buffer {
 public:
  TestBuffer(BufferType& type, size_t size, size_t align) : Buffer(type, size), memory_(size + align) {
    const auto p = reinterpret_cast<uintptr_t>(memory_.data());
    base_ = memory_.data() + ((align - p % align) % align);
  }
  void* base() const override { return base_; }
  void set(Tensor& t, const void* src, size_t offset, size_t size) override {
    std::memcpy(static_cast<char*>(t.data) + offset, src, size);
  }
  void get(const Tensor& t, void* dst, size_t offset, size_t size) const override {
    std::memcpy(dst, static_cast<const char*>(t.data) + offset, size);
  }
  void clear(uint8_t value) override { std::memset(base_, value, size()); }

 private:
  std::vector<char> memory_;
  char* base_;
};

class TestBufferType final : public BufferType {
 public:
  TestBufferType(size_t align, size_t pad, size_t max = SIZE_MAX) : align_(align), pad_(pad), max_(max) {}
  std::string name() const override { return "Test"; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    ++allocations;
    return std::make_unique<TestBuffer>(*this, size, align_);
  }
  size_t alignment() const override { return align_; }
  size_t max_size() const override { return max_; }
  size_t alloc_size(const Tensor& t) const override { return t.nbytes() + pad_; }
  bool is_host() const override { return true; }
  int allocations = 0;

 private:
  size_t align_, pad_, max_;
};

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

const Tensor* root(const Tensor* t) {
  while (t->view_src != nullptr) t = t->view_src;
  return t;
}

struct Interval {
  int64_t start, end;
};
constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

// Live range of every planned tensor from the graph alone: from the step that makes it (-1 for a
// leaf) to the last step that reads it or any view of it (or makes such a view); forever for
// leafs, outputs and what outputs view.
std::unordered_map<const Tensor*, Interval> live_ranges(const Graph& g, const AllocationPlan& plan) {
  std::unordered_map<const Tensor*, int64_t> index;
  for (size_t i = 0; i < g.nodes().size(); ++i) index[g.nodes()[i]] = static_cast<int64_t>(i);
  std::unordered_map<const Tensor*, Interval> r;
  for (const auto& [t, off] : plan.offsets) {
    auto it = index.find(t);
    const int64_t start = it == index.end() ? -1 : it->second;
    r[t] = {start, start == -1 ? kForever : start};
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Tensor* n = g.nodes()[i];
    std::vector<const Tensor*> reads(n->src.begin(), n->src.end());
    if (n->view_src != nullptr) reads.push_back(n);
    for (const Tensor* s : reads) {
      if (s == nullptr) continue;
      auto it = r.find(root(s));
      if (it != r.end()) it->second.end = std::max(it->second.end, static_cast<int64_t>(i));
    }
    if (n->flags & kFlagOutput)
      if (auto it = r.find(root(n)); it != r.end()) it->second.end = kForever;
  }
  for (const Tensor* o : g.outputs())
    if (auto it = r.find(root(o)); it != r.end()) it->second.end = kForever;
  return r;
}

// No two tensors alive at the same step share a byte, except a node computed in place over the
// source whose life ends exactly there. Offsets aligned, everything inside the peak.
void expect_sound(const Graph& g, const AllocationPlan& plan, const BufferType& type) {
  const auto ranges = live_ranges(g, plan);
  std::vector<const Tensor*> ts;
  for (const auto& [t, off] : plan.offsets) ts.push_back(t);
  for (const Tensor* t : ts) {
    const size_t off = plan.offsets.at(t);
    EXPECT_EQ(off % type.alignment(), 0u) << t->name;
    EXPECT_LE(off + type.alloc_size(*t), plan.peak) << t->name;
    EXPECT_EQ(t->view_src, nullptr) << "views are not planned";
  }
  for (const auto& [dst, src] : plan.in_place) {
    ASSERT_EQ(dst->src[0], src);
    EXPECT_EQ(plan.offsets.at(dst), plan.offsets.at(src));
    EXPECT_EQ(ranges.at(src).end, ranges.at(dst).start) << "in place over a source still read later";
    EXPECT_EQ(dst->nbytes(), src->nbytes());
    EXPECT_EQ(dst->type, src->type);
    EXPECT_NE(src->op, Op::None);
    EXPECT_FALSE(src->flags & kFlagOutput);
  }
  for (size_t i = 0; i < ts.size(); ++i)
    for (size_t j = i + 1; j < ts.size(); ++j) {
      const Tensor* a = ts[i];
      const Tensor* b = ts[j];
      const size_t ao = plan.offsets.at(a), as = type.alloc_size(*a);
      const size_t bo = plan.offsets.at(b), bs = type.alloc_size(*b);
      if (as == 0 || bs == 0 || ao + as <= bo || bo + bs <= ao) continue;  // no shared byte
      const Interval ra = ranges.at(a), rb = ranges.at(b);
      if (ra.end < rb.start || rb.end < ra.start) continue;  // never alive together
      auto ip = [&](const Tensor* x, const Tensor* y) {
        auto it = plan.in_place.find(x);
        return it != plan.in_place.end() && it->second == y && ranges.at(y).end == ranges.at(x).start;
      };
      if (ip(a, b) || ip(b, a)) continue;
      ADD_FAILURE() << "tensors " << a->describe() << " [" << ra.start << ", " << ra.end << "] and "
                    << b->describe() << " [" << rb.start << ", " << rb.end << "] share bytes";
    }
}

std::vector<float> read_all(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  tensor_get(t, v.data(), 0, t.nbytes());
  return v;
}

void fill(Tensor* t, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(t->nelements()));
  for (float& x : v) x = u(rng);
  tensor_set(*t, v.data(), 0, t->nbytes());
}

}  // namespace

// ---------------------------------------------------------------- peaks of known graphs

TEST(Allocator, UnaryChainRunsInPlace) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 64, 4);
  Tensor* t = x;
  for (int i = 0; i < 100; ++i) {
    switch (i % 5) {
      case 0:
        t = ops::scale(ctx, t, 0.9f, 0.1f);
        break;
      case 1:
        t = ops::silu(ctx, t);
        break;
      case 2:
        t = ops::clamp(ctx, t, -2.0f, 2.0f);
        break;
      case 3:
        t = ops::sqr(ctx, t);
        break;
      default:
        t = ops::add(ctx, t, x);
    }
  }
  Graph g{t};
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  EXPECT_EQ(plan.offsets.size(), 100u);
  EXPECT_EQ(plan.in_place.size(), 99u);  // everything after the first node reuses it
  EXPECT_EQ(plan.peak, x->nbytes());
  expect_sound(g, plan, type);
}

TEST(Allocator, ChainOfHundredOpsPeaksAtThreeTensors) {
  // t[k] = t[k-1] + t[k-2]: t[k-1] is still read by t[k+1], so nothing can be in place, and three
  // tensors are alive at each step.
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 100, 3);
  std::vector<Tensor*> t{ops::scale(ctx, x, 2.0f), ops::scale(ctx, x, 3.0f)};
  while (t.size() < 100) t.push_back(ops::add(ctx, t[t.size() - 1], t[t.size() - 2]));
  Graph g{t.back()};
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  const size_t one = align_up(x->nbytes(), 64);
  EXPECT_LE(plan.peak, 3 * one);
  EXPECT_GT(plan.peak, 2 * one);
  // Only the last node may reuse its first source, which dies there.
  ASSERT_EQ(plan.in_place.size(), 1u);
  EXPECT_EQ(plan.in_place.at(t[99]), t[98]);
  expect_sound(g, plan, type);
}

TEST(Allocator, CopyChainPingPongs) {
  // CONT never runs in place: two tensors alternate.
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 33, 5);
  Tensor* t = x;
  for (int i = 0; i < 100; ++i) t = ops::cont(ctx, t);
  Graph g{t};
  TestBufferType type(128, 0);
  const AllocationPlan plan = plan_graph(g, type);
  EXPECT_EQ(plan.peak, 2 * align_up(x->nbytes(), 128));
  expect_sound(g, plan, type);
}

TEST(Allocator, RespectsAlignmentAndAllocSize) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 10);  // 40 bytes; 40 + 100 padding -> 256 per tensor
  Tensor* t = x;
  for (int i = 0; i < 10; ++i) t = ops::cont(ctx, t);
  Graph g{t};
  TestBufferType type(256, 100);
  const AllocationPlan plan = plan_graph(g, type);
  EXPECT_EQ(plan.peak, 2u * 256u);
  expect_sound(g, plan, type);
}

TEST(Allocator, CoalescesNeighboursAndFitsBest) {
  // Explicit order (from_nodes). S = 256 bytes; alignment 64; tiny results take 64.
  Context data(true), ctx;
  Tensor* x1 = data.new_tensor(DType::F32, 64);     // S
  Tensor* x2 = data.new_tensor(DType::F32, 64, 2);  // 2S
  Tensor* a = ops::cont(ctx, x1);                   // @0
  Tensor* b = ops::cont(ctx, x1);                   // @S
  Tensor* c = ops::cont(ctx, x1);                   // @2S
  Tensor* u = ops::mul_mat(ctx, a, b);              // tiny @3S; then a and b are free: [0, 2S) coalesced
  Tensor* w = ops::concat(ctx, c, c, 0);            // 2S: fits the coalesced hole at 0
  Graph g = Graph::from_nodes({a, b, c, u, w}, {u, w});
  TestBufferType type(64, 0);
  AllocationPlan plan = plan_graph(g, type);
  EXPECT_EQ(plan.offsets.at(a), 0u);
  EXPECT_EQ(plan.offsets.at(b), 256u);
  EXPECT_EQ(plan.offsets.at(c), 512u);
  EXPECT_EQ(plan.offsets.at(u), 768u);
  EXPECT_EQ(plan.offsets.at(w), 0u);
  EXPECT_EQ(plan.peak, 768u + 64u);
  expect_sound(g, plan, type);

  // Holes of 2S at 0 and S at 3S (s1 between them): an S-sized tensor takes the S hole (best
  // fit), then a 2S one the other.
  Tensor* p = ops::cont(ctx, x2);             // 2S @0
  Tensor* s1 = ops::cont(ctx, x1);            // S @2S (stays alive)
  Tensor* q = ops::cont(ctx, x1);             // S @3S
  Tensor* s2 = ops::cont(ctx, x1);            // S @4S (stays alive)
  Tensor* pq = ops::mul_mat(ctx, p, q);       // tiny @5S; then p and q are free
  Tensor* small = ops::cont(ctx, s1);         // S -> the S hole at 3S, not the first (2S) hole
  Tensor* big = ops::concat(ctx, s2, s2, 0);  // 2S -> the 2S hole at 0
  g = Graph::from_nodes({p, s1, q, s2, pq, small, big}, {pq, small, big, s1, s2});
  plan = plan_graph(g, type);
  EXPECT_EQ(plan.offsets.at(p), 0u);
  EXPECT_EQ(plan.offsets.at(s1), 512u);
  EXPECT_EQ(plan.offsets.at(q), 768u);
  EXPECT_EQ(plan.offsets.at(s2), 1024u);
  EXPECT_EQ(plan.offsets.at(pq), 1280u);
  EXPECT_EQ(plan.offsets.at(small), 768u);
  EXPECT_EQ(plan.offsets.at(big), 0u);
  EXPECT_EQ(plan.peak, 1280u + 64u);
  expect_sound(g, plan, type);
}

// ---------------------------------------------------------------- lifetimes

TEST(Allocator, DiamondKeepsLiveTensorsApart) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 16, 4);
  Tensor* a = ops::scale(ctx, x, 0.5f);
  Tensor* b = ops::sqr(ctx, a);  // a still read by c and e: not in place
  Tensor* c = ops::scale(ctx, a, 3.0f);
  Tensor* d = ops::add(ctx, b, c);  // b dies here: in place
  Tensor* e = ops::mul(ctx, d, a);  // d and a die here
  Graph g{e};
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  EXPECT_FALSE(plan.in_place.count(b));
  EXPECT_FALSE(plan.in_place.count(c));
  EXPECT_EQ(plan.in_place.at(d), b);
  EXPECT_EQ(plan.in_place.at(e), d);
  EXPECT_NE(plan.offsets.at(a), plan.offsets.at(b));
  EXPECT_NE(plan.offsets.at(a), plan.offsets.at(c));
  EXPECT_NE(plan.offsets.at(b), plan.offsets.at(c));
  EXPECT_EQ(plan.peak, 3 * x->nbytes());
}

TEST(Allocator, ViewsExtendTheLifeOfTheirSource) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 8, 8);
  Tensor* a = ops::scale(ctx, x, 2.0f);
  Tensor* v = ops::reshape(ctx, a, 64);                              // view of a
  Tensor* vv = ops::view(ctx, v, {32, 1, 1, 1}, 128, 128, 128, 64);  // view of the view
  Tensor* b = ops::cont(ctx, x);  // made while a is alive only through its views
  Tensor* c = ops::cont(ctx, b);  // b dies
  Tensor* d = ops::sqr(ctx, vv);  // reads a through two views: a lives until here
  Tensor* rc = ops::reshape(ctx, c, 64);
  Tensor* rd = ops::reshape(ctx, d, 32);
  Tensor* e = ops::concat(ctx, rc, rd, 0);
  // Explicit order: b and c are made while a is alive only through its views.
  Graph g = Graph::from_nodes({a, v, vv, b, c, d, rc, rd, e}, {e});
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  // a's bytes are distinct from b's and c's (alive together through the views).
  const size_t ao = plan.offsets.at(a);
  for (const Tensor* t : {b, c}) {
    const size_t o = plan.offsets.at(t);
    EXPECT_TRUE(o + t->nbytes() <= ao || ao + a->nbytes() <= o) << t->describe();
  }
  EXPECT_FALSE(plan.offsets.count(v));
  EXPECT_FALSE(plan.offsets.count(vv));
  EXPECT_FALSE(plan.in_place.count(d));  // d's source is a view
}

TEST(Allocator, OutputsAndLeafsAreNeverReused) {
  Context ctx;  // descriptors only: the leaf needs memory from the plan too
  Tensor* x = ctx.new_tensor(DType::F32, 32);
  Tensor* mid = ops::scale(ctx, x, 2.0f);  // an output that later nodes read
  Tensor* t = mid;
  for (int i = 0; i < 20; ++i) t = i % 2 ? ops::cont(ctx, t) : ops::sqr(ctx, t);
  Tensor* view_out = ops::reshape(ctx, ops::cont(ctx, t), 4, 8);  // an output that is a view
  Tensor* last = view_out;
  for (int i = 0; i < 5; ++i) last = ops::cont(ctx, ops::sqr(ctx, last));
  Graph g;
  g.expand(mid);
  g.expand(view_out);
  g.expand(last);
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  ASSERT_TRUE(plan.offsets.count(x));
  expect_sound(g, plan, type);
  for (const auto& [dst, src] : plan.in_place) {
    EXPECT_NE(src, mid);
    EXPECT_NE(src, view_out->view_src);
    EXPECT_NE(src, x);
  }
  EXPECT_FALSE(plan.in_place.count(mid));  // its source is a leaf
}

TEST(Allocator, OutputsByListOrByFlagOutliveTheirReaders) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 32);
  TestBufferType type(64, 0);
  // Listed as an output (no flag: from_nodes sets none), and a view: its source must survive.
  Tensor* a = ops::cont(ctx, x);
  Tensor* v = ops::reshape(ctx, a, 8, 4);
  Tensor* b = ops::cont(ctx, v);
  Tensor* c = ops::cont(ctx, b);
  Tensor* d = ops::cont(ctx, c);
  ASSERT_FALSE(v->flags & kFlagOutput);
  Graph g = Graph::from_nodes({a, v, b, c, d}, {v, d});
  AllocationPlan plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  EXPECT_NE(plan.offsets.at(c), plan.offsets.at(a));
  EXPECT_NE(plan.offsets.at(d), plan.offsets.at(a));
  // Flagged as an output but not listed.
  Tensor* a2 = ops::cont(ctx, x);
  Tensor* b2 = ops::cont(ctx, a2);
  Tensor* c2 = ops::cont(ctx, b2);
  a2->flags |= kFlagOutput;
  g = Graph::from_nodes({a2, b2, c2}, {c2});
  plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  EXPECT_NE(plan.offsets.at(c2), plan.offsets.at(a2));
  EXPECT_EQ(plan.peak, 3u * 128u);
}

TEST(Allocator, UnreadResultsAreReleasedAtOnce) {
  // In a sub-graph a node may have no reader and not be an output: its memory is free right after.
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 32);
  Tensor* a = ops::cont(ctx, x);
  Tensor* dead = ops::cont(ctx, x);
  Tensor* c = ops::cont(ctx, a);
  Graph g = Graph::from_nodes({a, dead, c}, {c});
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  EXPECT_EQ(plan.offsets.at(c), plan.offsets.at(dead));
  EXPECT_EQ(plan.peak, 2u * 128u);
}

TEST(Allocator, InPlaceOnlyWhenSafe) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 8, 4);
  Tensor* x16 = data.new_tensor(DType::F16, 8, 4);
  // Broadcast view of the source as the other operand: would read overwritten rows.
  Tensor* a = ops::scale(ctx, x, 1.0f);
  Tensor* row = ops::view(ctx, a, {8, 1, 1, 1}, 32, 32, 32, 0);
  Tensor* b = ops::add(ctx, a, row);
  // The same tensor as both operands is read at the same index: fine.
  Tensor* c = ops::scale(ctx, x, 1.0f);
  Tensor* d = ops::mul(ctx, c, c);
  // Source read again later: no.
  Tensor* e = ops::scale(ctx, x, 1.0f);
  Tensor* f = ops::sqr(ctx, e);
  Tensor* h = ops::add(ctx, f, e);
  // Not an elementwise op: no.
  Tensor* k = ops::scale(ctx, x, 1.0f);
  Tensor* n = ops::rms_norm(ctx, k, 1e-5f);
  // f16 elementwise: yes.
  Tensor* m = ops::scale(ctx, x16, 1.0f);
  Tensor* m2 = ops::silu(ctx, m);
  Graph g{b, d, h, n, m2};
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  expect_sound(g, plan, type);
  EXPECT_FALSE(plan.in_place.count(b));
  EXPECT_EQ(plan.in_place.at(d), c);
  EXPECT_FALSE(plan.in_place.count(f));
  EXPECT_EQ(plan.in_place.at(h), f);
  EXPECT_FALSE(plan.in_place.count(n));
  EXPECT_EQ(plan.in_place.at(m2), m);
  EXPECT_TRUE(op_runs_in_place(Op::SoftMax));
  EXPECT_FALSE(op_runs_in_place(Op::MulMat));
  EXPECT_FALSE(op_runs_in_place(Op::Cont));
}

TEST(Allocator, DeepChainPlansWithoutRecursion) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 16);
  Tensor* t = x;
  for (int i = 0; i < 100000; ++i) t = i % 3 == 2 ? ops::cont(ctx, t) : ops::scale(ctx, t, 1.0f);
  Graph g{t};
  TestBufferType type(64, 0);
  const AllocationPlan plan = plan_graph(g, type);
  EXPECT_EQ(plan.offsets.size(), 100000u);
  EXPECT_EQ(plan.peak, 2u * 64u);
}

// ---------------------------------------------------------------- random graphs

namespace {

struct RandomGraph {
  std::vector<Tensor*> outputs;
};

// The same seed builds the same graph in any context; leafs come from `data`.
RandomGraph build_random(Context& ctx, const std::vector<Tensor*>& leafs, Tensor* pos, uint32_t seed, int n) {
  std::mt19937 rng(seed);
  auto pick = [&](int k) { return static_cast<int>(rng() % static_cast<uint32_t>(k)); };
  // One pool per shape class (leafs[c] has class c's shape), recent tensors favoured.
  std::vector<std::vector<Tensor*>> pool(leafs.size());
  for (size_t c = 0; c < leafs.size(); ++c) pool[c].push_back(leafs[c]);
  auto choose = [&](size_t c) {
    auto& p = pool[c];
    const int back = std::min<int>(static_cast<int>(p.size()), 1 + pick(6));
    return p[p.size() - static_cast<size_t>(back)];
  };
  RandomGraph rg;
  for (int i = 0; i < n; ++i) {
    const size_t c = static_cast<size_t>(pick(static_cast<int>(leafs.size())));
    Tensor* a = choose(c);
    Tensor* r = nullptr;
    switch (pick(11)) {
      case 0:
        r = ops::scale(ctx, a, 0.75f, 0.125f);
        break;
      case 1:
        r = ops::sqr(ctx, ops::clamp(ctx, a, -1.5f, 1.5f));
        break;
      case 2:
        r = ops::add(ctx, a, choose(c));
        break;
      case 3:
        r = ops::mul(ctx, ops::tanh(ctx, a), choose(c));
        break;
      case 4:
        r = ops::cont(ctx, a);
        break;
      case 5:  // a view whose consumers come later
        r = ops::reshape(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        break;
      case 6:
        r = ops::soft_max(ctx, a, nullptr, 0.5f);
        break;
      case 7: {  // broadcast of a's first row back over a
        Tensor* row = ops::view(ctx, a, {a->ne[0], 1, 1, 1}, a->nb[1], a->nb[2], a->nb[3], 0);
        r = ops::add(ctx, a, row);
        break;
      }
      case 8:
        r = ops::div(ctx, a, ops::scale(ctx, ops::sqr(ctx, choose(c)), 1.0f, 1.0f));
        break;
      case 9:
        if (a->ne[2] == pos->ne[0] && a->ne[0] % 2 == 0) {
          ops::RopeParams rp;
          rp.n_dims = static_cast<int>(a->ne[0]);
          r = ops::rope(ctx, a, pos, nullptr, rp);
        } else {
          r = ops::leaky_relu(ctx, a, 0.1f);
        }
        break;
      default:
        r = ops::rms_norm(ctx, a, 1e-5f);
    }
    pool[c].push_back(r);
    if (pick(12) == 0) rg.outputs.push_back(r);
  }
  for (auto& p : pool) rg.outputs.push_back(p.back());
  return rg;
}

}  // namespace

TEST(Allocator, RandomGraphsAreSoundAndComputeLikeAnAllocatingContext) {
  Context data(true);
  const std::vector<std::array<int64_t, 4>> shapes = {
      {8, 2, 3, 1}, {5, 7, 1, 1}, {64, 3, 1, 1}, {16, 1, 3, 2}};
  std::vector<Tensor*> leafs;
  for (size_t c = 0; c < shapes.size(); ++c) {
    leafs.push_back(data.new_tensor(DType::F32, std::span<const int64_t>(shapes[c].data(), 4)));
    fill(leafs.back(), static_cast<uint32_t>(c + 1));
  }
  Tensor* pos = data.new_tensor(DType::I32, 3);
  const int32_t p[3] = {0, 5, 17};
  tensor_set(*pos, p, 0, sizeof p);

  cpu::CpuBackend cpu(1);
  TestBufferType type(32, 24);
  GraphAllocator allocator(type);
  size_t total_bytes_max = 0;
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    Context ctx;
    RandomGraph rg = build_random(ctx, leafs, pos, seed, 150);
    Graph g{std::span<Tensor* const>(rg.outputs)};
    allocator.allocate(g);
    const AllocationPlan& plan = allocator.plan();
    expect_sound(g, plan, type);
    size_t sum = 0;
    for (const auto& [t, off] : plan.offsets) sum += type.alloc_size(*t);
    EXPECT_LT(plan.peak, sum) << "no reuse at all, seed " << seed;
    total_bytes_max = std::max(total_bytes_max, plan.peak);
    EXPECT_GE(allocator.buffer()->size(), plan.peak);
    for (Tensor* n : g.nodes()) ASSERT_NE(n->data, nullptr);
    cpu.compute(g);

    Context ref(true);
    RandomGraph rr = build_random(ref, leafs, pos, seed, 150);
    Graph gr{std::span<Tensor* const>(rr.outputs)};
    cpu.compute(gr);
    ASSERT_EQ(rg.outputs.size(), rr.outputs.size());
    for (size_t i = 0; i < rg.outputs.size(); ++i) {
      const std::vector<float> got = read_all(*rg.outputs[i]), want = read_all(*rr.outputs[i]);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << "seed " << seed << " output " << i << " " << rg.outputs[i]->describe();
    }
  }
  // One buffer grown as plans need it, never once per graph.
  EXPECT_LT(type.allocations, 25);
  EXPECT_EQ(allocator.buffer()->size(), total_bytes_max);
}

// ---------------------------------------------------------------- GraphAllocator

TEST(GraphAllocator, ComputesLikeAnAllocatingContext) {
  auto build = [](Context& ctx, Tensor* x, Tensor* y) {
    Tensor* a = ops::add(ctx, x, y);
    Tensor* b = ops::mul(ctx, a, x);
    Tensor* c = ops::scale(ctx, b, 0.5f, 1.0f);
    Tensor* d = ops::sqr(ctx, c);
    Tensor* t = ops::cont(ctx, ops::transpose(ctx, d));
    Tensor* e = ops::add(ctx, ops::reshape(ctx, t, 6, 4), ops::reshape(ctx, a, 6, 4));
    return ops::soft_max(ctx, e, nullptr, 0.25f);
  };
  Context data(true);
  Tensor* x = data.new_tensor(DType::F32, 4, 6);
  Tensor* y = data.new_tensor(DType::F32, 4, 6);
  fill(x, 1);
  fill(y, 2);

  Context ctx;
  Tensor* out = build(ctx, x, y);
  Graph g{out};
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(g);
  EXPECT_GT(alloc.peak(), 0u);
  cpu::CpuBackend cpu(2);
  cpu.compute(g);
  const std::vector<float> got = read_all(*out);

  Context ref(true);
  Tensor* ref_out = build(ref, x, y);
  Graph gr{ref_out};
  cpu.compute(gr);
  const std::vector<float> want = read_all(*ref_out);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);

  // An independent double-precision check of one row: softmax over 0.25 * e.
  std::vector<float> xv = read_all(*x), yv = read_all(*y);
  auto d_at = [&](int i0, int i1) {  // d = ((x + y) * x * 0.5 + 1)^2 at [i0, i1] of the [4, 6] grid
    const double a = double(xv[i1 * 4 + i0]) + yv[i1 * 4 + i0];
    const double c = a * xv[i1 * 4 + i0] * 0.5 + 1.0;
    return c * c;
  };
  for (int r = 0; r < 4; ++r) {
    // Row r of e: t (d transposed, [6, 4]) row r plus a's bytes viewed as [6, 4].
    double w[6], mx = -1e300, s = 0;
    for (int i = 0; i < 6; ++i) {
      const int flat = r * 6 + i;  // a's element at flat index (row-major [4, 6])
      const double a = double(xv[flat]) + yv[flat];
      w[i] = 0.25 * (d_at(r, i) + a);
      mx = std::max(mx, w[i]);
    }
    for (double& v : w) s += (v = std::exp(v - mx));
    for (int i = 0; i < 6; ++i)
      EXPECT_NEAR(got[static_cast<size_t>(r * 6 + i)], w[i] / s, 1e-5) << r << " " << i;
  }

  // Allocating the same graph again re-plans it in the same buffer.
  Buffer* first = alloc.buffer();
  alloc.allocate(g);
  EXPECT_EQ(alloc.buffer(), first);
  cpu.compute(g);
  EXPECT_EQ(read_all(*out), got);
}

TEST(GraphAllocator, GrowsForLargerGraphsAndKeepsItsBufferForSmaller) {
  Context data(true);
  Tensor* small = data.new_tensor(DType::F32, 16);
  Tensor* big = data.new_tensor(DType::F32, 4096);
  TestBufferType type(64, 0);
  GraphAllocator alloc(type);
  auto chain = [](Context& ctx, Tensor* x) { return ops::cont(ctx, ops::cont(ctx, ops::cont(ctx, x))); };
  Context c1, c2, c3;
  Graph g1{chain(c1, small)};
  alloc.allocate(g1);
  EXPECT_EQ(type.allocations, 1);
  Graph g2{chain(c2, big)};
  alloc.allocate(g2);
  EXPECT_EQ(type.allocations, 2);
  EXPECT_EQ(alloc.buffer()->size(), 2u * 4096u * 4u);
  Graph g3{chain(c3, small)};
  alloc.allocate(g3);
  EXPECT_EQ(type.allocations, 2);
  EXPECT_EQ(alloc.peak(), 2u * 64u);
}

TEST(GraphAllocator, ResolvesViewsOfViewsAndInputs) {
  Context ctx;  // descriptors only: input leaf and everything else from the allocator
  Tensor* x = ctx.new_tensor(DType::F32, 4, 4);
  x->flags |= kFlagInput;
  Tensor* a = ops::scale(ctx, x, 2.0f);
  Tensor* v = ops::view(ctx, a, {4, 2, 1, 1}, 16, 32, 32, 32);  // rows 2..3
  Tensor* vv = ops::view(ctx, v, {2, 2, 1, 1}, 16, 32, 32, 8);  // columns 2..3 of those
  Tensor* out = ops::cont(ctx, vv);
  Graph g{out};
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(g);
  ASSERT_NE(x->data, nullptr);
  EXPECT_EQ(v->data, static_cast<char*>(a->data) + 32);
  EXPECT_EQ(vv->data, static_cast<char*>(a->data) + 40);
  EXPECT_EQ(vv->buffer, alloc.buffer());
  const float in[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  tensor_set(*x, in, 0, sizeof in);
  cpu::CpuBackend cpu(1);
  cpu.compute(g);
  EXPECT_EQ(read_all(*out), (std::vector<float>{20, 22, 28, 30}));
}

TEST(GraphAllocator, PlanLargerThanTheTypeAllowsIsAnError) {
  Context data(true), ctx;
  Tensor* x = data.new_tensor(DType::F32, 1024);
  Graph g{ops::cont(ctx, ops::cont(ctx, x))};
  TestBufferType type(64, 0, 4096);
  GraphAllocator alloc(type);
  try {
    alloc.allocate(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("Test"), std::string::npos);
  }
}
