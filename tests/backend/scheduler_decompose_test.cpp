// FLASH_ATTN_EXT on a backend without it (a fake device, OpenCL0): the scheduler runs it there as
// MUL_MAT, (SCALE, TANH), SOFT_MAX, MUL_MAT and a copy of the merged heads per group of query rows
// (decompose.h), with the fused op's results; a backend lacking one of those ops leaves the node to
// the CPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backend/fake_device.h"
#include "support/opencl.h"
#include "tessera/convert.h"
#include "tessera/scheduler.h"
#include "tessera/tessera.h"

using namespace tessera;
using tessera::test::FakeDevice;

namespace {

const std::set<Op> kComposedOps = {Op::MulMat, Op::SoftMax, Op::Scale, Op::Unary, Op::Cpy, Op::Cont};

struct Case {
  int64_t d, n_kv, n_q, heads, kv_heads, batch;
  DType kv;
  bool v_transposed;  // V as the KV cache stores it: [n_kv, D] per head, seen transposed
  int mask;           // 0: none, 1: causal f32 (two rows more than the queries), 2: causal f16
  float scale, max_bias, softcap;
  bool sinks = false;  // attention sinks (gpt-oss): SOFT_MAX's sinks source in the decomposition
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return fmt::format("d{}_kv{}_q{}_h{}_{}_b{}_{}{}_mask{}{}{}", c.d, c.n_kv, c.n_q, c.heads, c.kv_heads,
                     c.batch, name(c.kv), c.v_transposed ? "_vT" : "", c.mask, c.max_bias > 0 ? "_alibi" : "",
                     c.softcap > 0 ? "_softcap" : "") +
         (c.sinks ? "_sinks" : "");
}

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

void set_values(Tensor& t, const std::vector<float>& v) {
  if (t.type == DType::F16) {
    std::vector<uint16_t> h(v.size());
    fp32_to_fp16_row(v.data(), h.data(), static_cast<int64_t>(v.size()));
    tensor_set(t, h.data(), 0, h.size() * 2);
  } else {
    tensor_set(t, v.data(), 0, v.size() * 4);
  }
}

std::vector<float> read(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  tensor_get(t, v.data(), 0, v.size() * 4);
  return v;
}

std::vector<float> mask_values(const Case& c) {
  const int64_t rows = c.n_q + 2;
  std::vector<float> m(static_cast<size_t>(c.n_kv * rows), 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c.n_kv; ++j)
      if (j > c.n_kv - c.n_q + i)
        m[static_cast<size_t>(i * c.n_kv + j)] = -std::numeric_limits<float>::infinity();
  return m;
}

// The case's tensors in a context; K and V (and nothing else) placed in `kv_type`'s memory.
struct Inputs {
  Context ctx{false};
  Tensor *q, *k, *v_stored, *v, *mask = nullptr, *sinks = nullptr;
  std::vector<std::unique_ptr<Buffer>> keep;

  Inputs(const Case& c, BufferType& kv_type) {
    q = ctx.new_tensor(DType::F32, c.d, c.n_q, c.heads, c.batch);
    k = ctx.new_tensor(c.kv, c.d, c.n_kv, c.kv_heads, c.batch);
    v_stored = c.v_transposed ? ctx.new_tensor(c.kv, c.n_kv, c.d, c.kv_heads, c.batch)
                              : ctx.new_tensor(c.kv, c.d, c.n_kv, c.kv_heads, c.batch);
    if (c.mask != 0) mask = ctx.new_tensor(c.mask == 2 ? DType::F16 : DType::F32, c.n_kv, c.n_q + 2);
    if (c.sinks) sinks = ctx.new_tensor(DType::F32, c.heads);
    place(kv_type, {k, v_stored});
    std::vector<Tensor*> host = {q};
    if (mask != nullptr) host.push_back(mask);
    if (sinks != nullptr) host.push_back(sinks);
    place(host_buffer_type(), host);
    set_values(*q, random_values(q->nelements(), 1));
    set_values(*k, random_values(k->nelements(), 2));
    set_values(*v_stored, random_values(v_stored->nelements(), 3));
    if (mask != nullptr) set_values(*mask, mask_values(c));
    if (sinks != nullptr) set_values(*sinks, random_values(c.heads, 4));
  }
  void place(BufferType& type, const std::vector<Tensor*>& tensors) {
    size_t total = 0;
    for (const Tensor* t : tensors) total += (type.alloc_size(*t) + 255) / 256 * 256;
    keep.push_back(type.allocate(total));
    size_t offset = 0;
    for (Tensor* t : tensors) {
      keep.back()->place(*t, offset);
      offset += (type.alloc_size(*t) + 255) / 256 * 256;
    }
  }
  Tensor* attention(const Case& c) {
    v = c.v_transposed ? ops::transpose(ctx, v_stored) : v_stored;
    return ops::flash_attn_ext(ctx, q, k, v, mask, c.scale, c.max_bias, c.softcap, false, sinks);
  }
};

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return err / norm;
}

class DecomposedFlashAttn : public testing::TestWithParam<Case> {};

TEST_P(DecomposedFlashAttn, RunsOnTheDeviceWithTheFusedOpsResults) {
  const Case& c = GetParam();
  FakeDevice fake("Fake", kComposedOps);
  auto fake_backend = fake.make_backend();
  cpu::CpuBackend cpu_backend(2);
  Scheduler sched({fake_backend.get(), &cpu_backend});

  // The CPU's fused reference, from the same values in host memory.
  Inputs ref(c, host_buffer_type());
  Tensor* want_node = ref.attention(c);
  Graph rg({want_node});
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(rg);
  cpu::CpuBackend reference(1, cpu::KernelSet::Reference);
  reference.compute(rg);
  const std::vector<float> want = read(*want_node);

  for (int round = 0; round < 2; ++round) {  // the second graph reuses the plan
    Inputs in(c, fake.buffer_type());
    Tensor* out = in.attention(c);
    Tensor* after = ops::scale(in.ctx, out, 2.0f);  // a consumer on the device, reading the result
    Graph g({after});
    sched.compute(g);
    EXPECT_EQ(sched.backend_of(out), fake_backend.get());
    EXPECT_TRUE(sched.fallbacks().empty()) << sched.report();
    ASSERT_EQ(sched.splits().size(), 1u) << sched.report();
    EXPECT_EQ(sched.splits()[0].decomposed, 1u);
    EXPECT_NE(sched.report().find("1 decomposed"), std::string::npos) << sched.report();
    // Per group of query rows (KQ of about 4 MiB, at least 32 rows): MUL_MAT, (SCALE, TANH),
    // SOFT_MAX, MUL_MAT, CPY; V in rows is transposed once; then the consumer.
    const int64_t per_row = c.n_kv * c.heads * c.batch * 4;
    const int64_t group = std::max<int64_t>(32, (int64_t{4} << 20) / per_row / 32 * 32);
    const int64_t groups = (c.n_q + group - 1) / group;
    auto& fb = static_cast<tessera::test::FakeBackend&>(*fake_backend);
    EXPECT_EQ(fb.computed, (round + 1) * (1 + (c.v_transposed ? 0 : 1) + groups * (c.softcap > 0 ? 6 : 4)));
    std::vector<float> got = read(sched.result(*after));
    for (float& x : got) x *= 0.5f;
    // The composed ops multiply an F16 cache by Q and by the softmax rounded to f16 (MUL_MAT's
    // semantics for F16 weights, ggml's); the fused reference keeps them in f32.
    EXPECT_LT(nmse(got, want), c.kv == DType::F16 ? 3e-7 : 1e-9) << sched.report();
  }
  EXPECT_EQ(sched.plans_built(), 1u);
  EXPECT_EQ(sched.plans_reused(), 1u);
}

const float kScale = 0.125f;
INSTANTIATE_TEST_SUITE_P(
    Cases, DecomposedFlashAttn,
    testing::Values(
        // generation: one query, grouped heads, the KV cache's layout
        Case{64, 256, 1, 8, 2, 1, DType::F16, true, 1, kScale, 0.0f, 0.0f},
        Case{64, 100, 7, 4, 4, 1, DType::F32, false, 2, kScale, 0.0f, 0.0f},
        Case{40, 70, 3, 6, 3, 2, DType::F16, false, 0, kScale, 0.0f, 0.0f},
        Case{32, 64, 5, 8, 2, 1, DType::F32, true, 1, kScale, 8.0f, 0.0f},
        // soft-capping with a scale that is not 1: the tanh sees the scaled score
        Case{32, 96, 9, 4, 2, 1, DType::F16, true, 2, 0.3f, 0.0f, 5.0f},
        // 600 query rows over 2048 cells x 4 heads: groups of 128 rows (32 KiB of KQ per row)
        Case{16, 2048, 600, 4, 1, 1, DType::F16, true, 1, kScale, 0.0f, 0.0f},
        // attention sinks, the model's layout and a sliding mask's shape
        Case{64, 100, 7, 4, 2, 1, DType::F16, true, 2, kScale, 0.0f, 0.0f, true},
        Case{32, 64, 5, 8, 2, 1, DType::F32, false, 0, kScale, 0.0f, 0.0f, true}),
    case_name);

// The same on OpenCL0, which has no FLASH_ATTN_EXT kernel: its MUL_MAT, SCALE, TANH, SOFT_MAX (with
// sinks too) and CPY kernels give the fused op's results within SOFT_MAX's conformance bound.
TEST_P(DecomposedFlashAttn, RunsOnOpenCL0) {
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL0");
  const Case& c = GetParam();
  Device& device = *Registry::instance().find("OpenCL0");
  auto device_backend = device.make_backend();
  cpu::CpuBackend cpu_backend(2);
  Scheduler sched({device_backend.get(), &cpu_backend});
  Inputs ref(c, host_buffer_type());
  Tensor* want_node = ref.attention(c);
  Graph rg({want_node});
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(rg);
  cpu::CpuBackend reference(1, cpu::KernelSet::Reference);
  reference.compute(rg);
  const std::vector<float> want = read(*want_node);

  Inputs in(c, device.buffer_type());
  Tensor* out = in.attention(c);
  Graph g({out});
  sched.compute(g);
  EXPECT_EQ(sched.backend_of(out), device_backend.get());
  EXPECT_TRUE(sched.fallbacks().empty()) << sched.report();
  EXPECT_NE(sched.report().find("1 decomposed"), std::string::npos) << sched.report();
  EXPECT_LT(nmse(read(sched.result(*out)), want), 1e-6) << sched.report();
}

TEST(DecomposedFlashAttnFallback, ADeviceLackingSoftMaxLeavesItToTheCpu) {
  const Case c{32, 64, 4, 4, 2, 1, DType::F16, true, 1, kScale, 0.0f, 0.0f};
  std::set<Op> ops = kComposedOps;
  ops.erase(Op::SoftMax);
  FakeDevice fake("Fake", ops);
  auto fake_backend = fake.make_backend();
  cpu::CpuBackend cpu_backend(1);
  Scheduler sched({fake_backend.get(), &cpu_backend});
  Inputs in(c, fake.buffer_type());
  Tensor* out = in.attention(c);
  Graph g({out});
  sched.compute(g);
  EXPECT_EQ(sched.backend_of(out), &cpu_backend);
  ASSERT_EQ(sched.fallbacks().size(), 1u) << sched.report();
  EXPECT_NE(sched.fallbacks()[0].node.find("FLASH_ATTN_EXT"), std::string::npos);
}

}  // namespace
