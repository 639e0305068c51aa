// Graph construction: topological order, each tensor once, leafs vs nodes, outputs, deep chains.
#include "tessera/graph.h"

#include <gtest/gtest.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tessera/context.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

// Every source and view source of a node is a leaf or an earlier node.
void expect_topological(const Graph& g) {
  std::unordered_map<const Tensor*, size_t> pos;
  for (size_t i = 0; i < g.nodes().size(); ++i) pos[g.nodes()[i]] = i;
  std::unordered_set<const Tensor*> leafs(g.leafs().begin(), g.leafs().end());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Tensor* n = g.nodes()[i];
    std::vector<const Tensor*> deps(n->src.begin(), n->src.end());
    deps.push_back(n->view_src);
    for (const Tensor* d : deps) {
      if (d == nullptr) continue;
      if (leafs.count(d)) continue;
      auto it = pos.find(d);
      ASSERT_NE(it, pos.end()) << "a dependency of node " << i << " is missing from the graph";
      ASSERT_LT(it->second, i) << "node " << i << " comes before its dependency";
    }
  }
}

void expect_unique(const Graph& g) {
  std::unordered_set<const Tensor*> seen;
  for (const Tensor* t : g.nodes()) EXPECT_TRUE(seen.insert(t).second) << "duplicate node";
  for (const Tensor* t : g.leafs()) EXPECT_TRUE(seen.insert(t).second) << "duplicate leaf (or leaf as node)";
}

}  // namespace

TEST(Graph, TopologicalOrderNoDuplicatesLeafsVsNodes) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* b = ctx.new_tensor(DType::F32, 4, 3);
  Tensor* c = ops::add(ctx, a, b);
  Tensor* d = ops::mul(ctx, c, a);
  Tensor* e = ops::scale(ctx, d, 2.0f);
  Tensor* f = ops::add(ctx, e, c);  // c reached twice (diamond)
  Tensor* v = ops::reshape(ctx, c, 12);
  Tensor* g2 = ops::sqr(ctx, v);
  Graph g{f, g2};
  expect_topological(g);
  expect_unique(g);
  // Leafs are exactly the op-less inputs, nodes everything else.
  ASSERT_EQ(g.leafs().size(), 2u);
  EXPECT_EQ(g.leafs()[0], a);
  EXPECT_EQ(g.leafs()[1], b);
  const std::unordered_set<const Tensor*> nodes(g.nodes().begin(), g.nodes().end());
  EXPECT_EQ(nodes, (std::unordered_set<const Tensor*>{c, d, e, f, v, g2}));
  for (const Tensor* n : g.nodes()) EXPECT_NE(n->op, Op::None);
  for (const Tensor* l : g.leafs()) EXPECT_EQ(l->op, Op::None);
  EXPECT_EQ(g.size(), 6u);
  // Outputs: listed once, in order, and flagged.
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0], f);
  EXPECT_EQ(g.outputs()[1], g2);
  EXPECT_TRUE(f->flags & kFlagOutput);
  EXPECT_TRUE(g2->flags & kFlagOutput);
  EXPECT_FALSE(c->flags & kFlagOutput);
  g.expand(f);
  EXPECT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.size(), 6u);
}

TEST(Graph, ExpandAddsOnlyNewTensors) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 8);
  Tensor* a = ops::sqr(ctx, x);
  Tensor* b = ops::scale(ctx, a, 3.0f);
  Tensor* c = ops::add(ctx, a, b);
  Graph g;
  g.expand(b);
  EXPECT_EQ(g.size(), 2u);
  g.expand(c);
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.nodes().back(), c);
  EXPECT_EQ(g.leafs().size(), 1u);
  expect_topological(g);
  expect_unique(g);
}

TEST(Graph, ViewSourcesComeFirst) {
  // A view's source is a dependency even when it is not among its sources (CPY's destination).
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 6, 2);
  Tensor* dst = ctx.new_tensor(DType::F16, 6, 2);
  Tensor* y = ops::scale(ctx, x, 0.5f);
  Tensor* cp = ops::cpy(ctx, y, dst);
  Tensor* t = ops::transpose(ctx, ops::reshape(ctx, cp, 4, 3));
  Tensor* out = ops::cont(ctx, t);
  Graph g{out};
  expect_topological(g);
  expect_unique(g);
  EXPECT_EQ(g.leafs().size(), 2u);
  EXPECT_EQ(g.size(), 5u);  // scale, cpy, reshape, transpose, cont
}

TEST(Graph, DeepChainDoesNotOverflowTheStack) {
  constexpr int kDepth = 100000;
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 4);
  std::vector<Tensor*> chain;
  chain.reserve(kDepth);
  Tensor* t = x;
  for (int i = 0; i < kDepth; ++i) {
    // Every fifth link is a view, so view sources are followed as deep too.
    t = i % 5 == 4 ? ops::reshape(ctx, t, 4) : ops::scale(ctx, t, 1.0f);
    chain.push_back(t);
  }
  Graph g{t};
  ASSERT_EQ(g.size(), static_cast<size_t>(kDepth));
  ASSERT_EQ(g.leafs().size(), 1u);
  for (int i = 0; i < kDepth; ++i)
    ASSERT_EQ(g.nodes()[static_cast<size_t>(i)], chain[static_cast<size_t>(i)]);
}

TEST(Graph, WideFanInIsVisitedOnce) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 2);
  Tensor* acc = ops::sqr(ctx, x);
  Tensor* shared = acc;
  for (int i = 0; i < 1000; ++i) acc = ops::add(ctx, acc, shared);
  Graph g{acc};
  EXPECT_EQ(g.size(), 1001u);
  expect_topological(g);
  expect_unique(g);
}

TEST(Graph, FromNodesKeepsTheGivenOrder) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, 3);
  Tensor* a = ops::sqr(ctx, x);
  Tensor* b = ops::scale(ctx, a, 2.0f);
  Graph g = Graph::from_nodes({a, b}, {b});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g.nodes()[0], a);
  EXPECT_EQ(g.nodes()[1], b);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0], b);
  EXPECT_TRUE(g.leafs().empty());  // x is an external input of the sub-graph
}
