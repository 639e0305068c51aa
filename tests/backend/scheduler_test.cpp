// The scheduler against two fake "devices" (fake_device.h), each supporting only some ops.
#include "tessera/scheduler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "backend/fake_device.h"
#include "tessera/tessera.h"

using namespace tessera;
using tessera::test::FakeDevice;

namespace {

void fill(Tensor* t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(t->nelements()));
  for (auto& e : v) e = dist(rng);
  tensor_set(*t, v.data(), 0, v.size() * 4);
}

std::vector<float> read(const Tensor* t) {
  std::vector<float> v(static_cast<size_t>(t->nelements()));
  tensor_get(*t, v.data(), 0, v.size() * 4);
  return v;
}

// x -> mul_mat(w1) -> add(bias) -> silu -> mul_mat(w2) -> soft_max
struct Net {
  Tensor *w1, *bias, *w2, *x;
  Tensor* build(Context& ctx) {
    Tensor* h = ops::mul_mat(ctx, w1, x);
    h = ops::add(ctx, h, bias);
    h = ops::silu(ctx, h);
    h = ops::mul_mat(ctx, w2, h);
    return ops::soft_max(ctx, h, nullptr, 0.5f);
  }
};

}  // namespace

TEST(Scheduler, SplitAcrossTwoDevicesAndCpuEqualsCpuAlone) {
  FakeDevice dev0("Fake0", {Op::MulMat, Op::Add});
  FakeDevice dev1("Fake1", {Op::MulMat, Op::SoftMax});
  auto b0 = dev0.make_backend();
  auto b1 = dev1.make_backend();
  cpu::CpuBackend cpu_backend(2);

  // Reference: everything in host memory on the CPU.
  std::mt19937 rng(7);
  Context host(true);
  Net ref{host.new_tensor(DType::F32, 16, 24), host.new_tensor(DType::F32, 24, 1),
          host.new_tensor(DType::F32, 24, 8), host.new_tensor(DType::F32, 16, 5)};
  for (Tensor* t : {ref.w1, ref.bias, ref.w2, ref.x}) fill(t, rng);
  Context cctx(true);
  Tensor* expected_out = ref.build(cctx);
  Graph g_ref{expected_out};
  cpu_backend.compute(g_ref);
  const auto expected = read(expected_out);

  // The same weights: w1 on Fake0, w2 on Fake1, bias and x in host memory.
  Context wctx;
  Net net{wctx.new_tensor(DType::F32, 16, 24), wctx.new_tensor(DType::F32, 24, 1),
          wctx.new_tensor(DType::F32, 24, 8), wctx.new_tensor(DType::F32, 16, 5)};
  auto buf0 = dev0.buffer_type().allocate(net.w1->nbytes());
  buf0->place(*net.w1, 0);
  auto buf1 = dev1.buffer_type().allocate(net.w2->nbytes());
  buf1->place(*net.w2, 0);
  auto hostbuf = host_buffer_type().allocate(4096);
  hostbuf->place(*net.bias, 0);
  hostbuf->place(*net.x, 1024);
  tensor_set(*net.w1, ref.w1->data, 0, ref.w1->nbytes());
  tensor_set(*net.w2, ref.w2->data, 0, ref.w2->nbytes());
  tensor_set(*net.bias, ref.bias->data, 0, ref.bias->nbytes());
  tensor_set(*net.x, ref.x->data, 0, ref.x->nbytes());

  Context gctx;
  Tensor* out = net.build(gctx);
  Graph graph{out};
  Scheduler sched({b0.get(), b1.get(), &cpu_backend});
  sched.compute(graph);

  // mul_mat(w1) and add on Fake0, silu on the CPU (Fake0 lacks UNARY), mul_mat(w2) and soft_max on Fake1.
  const auto& nodes = graph.nodes();
  ASSERT_EQ(nodes.size(), 5u);
  EXPECT_EQ(sched.backend_of(nodes[0]), b0.get());
  EXPECT_EQ(sched.backend_of(nodes[1]), b0.get());
  EXPECT_EQ(sched.backend_of(nodes[2]), &cpu_backend);
  EXPECT_EQ(sched.backend_of(nodes[3]), b1.get());
  EXPECT_EQ(sched.backend_of(nodes[4]), b1.get());
  EXPECT_EQ(sched.splits().size(), 3u);
  ASSERT_EQ(sched.fallbacks().size(), 1u);
  EXPECT_NE(sched.fallbacks()[0].node.find("UNARY"), std::string::npos) << sched.fallbacks()[0].node;
  const std::string report = sched.report();
  EXPECT_NE(report.find("Fake0"), std::string::npos);
  EXPECT_NE(report.find("UNARY"), std::string::npos) << report;
  EXPECT_NE(report.find("Fake0 does not support it"), std::string::npos) << report;

  const auto got = read(&sched.result(*out));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6f) << i;

  // A second run of the same graph reuses the plan and gives the same result.
  sched.compute(graph);
  EXPECT_EQ(sched.plans_built(), 1u);
  EXPECT_EQ(sched.plans_reused(), 1u);
  const auto again = read(&sched.result(*out));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(again[i], got[i]);
}

TEST(Scheduler, RejectsBadBackendLists) {
  FakeDevice dev0("Fake0", {Op::MulMat});
  auto b0 = dev0.make_backend();
  EXPECT_THROW(Scheduler({}), Error);
  EXPECT_THROW(Scheduler({b0.get()}), Error);  // last must be the CPU
}
