// A graph split across OpenCL0, OpenCL1 and the CPU gives the same result as the CPU alone.
#include "tessera/scheduler.h"

#include <gtest/gtest.h>

#include <random>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Places t in a fresh buffer of `type` and fills it from floats (quantized row by row).
std::unique_ptr<Buffer> upload(Tensor* t, BufferType& type, const std::vector<float>& values) {
  auto buf = type.allocate(type.alloc_size(*t));
  buf->place(*t, 0);
  std::vector<char> bytes(t->nbytes());
  for (int64_t r = 0; r < t->nrows(); ++r)
    from_f32_row(t->type, values.data() + r * t->ne[0], bytes.data() + r * t->row_size(), t->ne[0]);
  tensor_set(*t, bytes.data(), 0, bytes.size());
  return buf;
}

}  // namespace

TEST(OpenClScheduler, SplitAcrossTwoDevicesAndTheCpuEqualsTheCpuAlone) {
  Device* d0 = Registry::instance().find("OpenCL0");
  Device* d1 = Registry::instance().find("OpenCL1");
  ASSERT_TRUE(d0 != nullptr && d1 != nullptr)
      << "needs OpenCL0 and OpenCL1 (POCL_DEVICES=\"pthread pthread\")";
  const int64_t K = 64, M = 96, N = 40;
  const auto w1v = random_values(K * M, 1), w2v = random_values(M * K, 2), xv = random_values(K * N, 3);

  // The graph: x -> mul_mat(w1: q8_0 on OpenCL0) -> silu -> mul_mat(w2: q4_0 on OpenCL1) -> rms_norm
  // -> add(bias in host memory) -> soft_max.
  auto build = [&](Context& ctx, Tensor* w1, Tensor* w2, Tensor* x, Tensor* bias) {
    Tensor* h = ops::silu(ctx, ops::mul_mat(ctx, w1, x));
    h = ops::rms_norm(ctx, ops::mul_mat(ctx, w2, h), 1e-5f);
    return ops::soft_max(ctx, ops::add(ctx, h, bias), nullptr, 0.5f);
  };
  const auto bv = random_values(K, 4);

  // CPU alone.
  Context cctx;
  Tensor* cw1 = cctx.new_tensor(DType::Q8_0, K, M);
  Tensor* cw2 = cctx.new_tensor(DType::Q4_0, M, K);
  Tensor* cx = cctx.new_tensor(DType::F32, K, N);
  Tensor* cb = cctx.new_tensor(DType::F32, K);
  std::vector<std::unique_ptr<Buffer>> keep;
  keep.push_back(upload(cw1, host_buffer_type(), w1v));
  keep.push_back(upload(cw2, host_buffer_type(), w2v));
  keep.push_back(upload(cx, host_buffer_type(), xv));
  keep.push_back(upload(cb, host_buffer_type(), bv));
  Context cg;
  Tensor* cout = build(cg, cw1, cw2, cx, cb);
  Graph cgraph{cout};
  cpu::CpuBackend cpu(2);
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(cgraph);
  cpu.compute(cgraph);
  std::vector<float> expected(static_cast<size_t>(cout->nelements()));
  tensor_get(*cout, expected.data(), 0, expected.size() * 4);

  // w1 on OpenCL0, w2 on OpenCL1, x and the bias in host memory.
  Context dctx;
  Tensor* w1 = dctx.new_tensor(DType::Q8_0, K, M);
  Tensor* w2 = dctx.new_tensor(DType::Q4_0, M, K);
  Tensor* x = dctx.new_tensor(DType::F32, K, N);
  Tensor* b = dctx.new_tensor(DType::F32, K);
  keep.push_back(upload(w1, d0->buffer_type(), w1v));
  keep.push_back(upload(w2, d1->buffer_type(), w2v));
  keep.push_back(upload(x, host_buffer_type(), xv));
  keep.push_back(upload(b, host_buffer_type(), bv));
  Context dg;
  Tensor* out = build(dg, w1, w2, x, b);
  Graph graph{out};
  auto b0 = d0->make_backend();
  auto b1 = d1->make_backend();
  Scheduler sched({b0.get(), b1.get(), &cpu});
  sched.pin(out->src[0], &cpu);  // the ADD runs on the CPU, between OpenCL1 and the soft_max
  sched.compute(graph);
  std::vector<float> got(expected.size());
  tensor_get(sched.result(*out), got.data(), 0, got.size() * 4);

  // Both devices ran something, and the result is the CPU's.
  bool used0 = false, used1 = false, used_cpu = false;
  for (const auto& s : sched.splits()) {
    used0 = used0 || s.backend == b0.get();
    used1 = used1 || s.backend == b1.get();
    used_cpu = used_cpu || (s.backend == &cpu && s.computed > 0);
  }
  EXPECT_TRUE(used0 && used1 && used_cpu) << sched.report();
  EXPECT_GE(sched.splits().size(), 3u) << sched.report();
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - expected[i]) * (got[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  EXPECT_LT(err / norm, 1e-6) << sched.report();
  // A second run (the plan reused, copies refreshed) gives the same result.
  sched.compute(graph);
  EXPECT_EQ(sched.plans_reused(), 1u);
  std::vector<float> again(got.size());
  tensor_get(sched.result(*out), again.data(), 0, again.size() * 4);
  EXPECT_EQ(again, got);
}
