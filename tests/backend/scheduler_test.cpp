// The scheduler against two fake "devices": host memory that the scheduler must treat as foreign,
// computed with the CPU reference kernels, each supporting only some ops.
#include "tessera/scheduler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

#include "cpu/kernels.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

class FakeDevice;

class FakeBuffer final : public Buffer {
 public:
  FakeBuffer(BufferType& type, size_t size) : Buffer(type, size), mem_(std::max<size_t>(size, 1)) {}
  void* base() const override { return const_cast<char*>(mem_.data()); }
  void set(Tensor& t, const void* src, size_t off, size_t n) override {
    std::memcpy((char*)t.data + off, src, n);
  }
  void get(const Tensor& t, void* dst, size_t off, size_t n) const override {
    std::memcpy(dst, (const char*)t.data + off, n);
  }
  void clear(uint8_t v) override { std::memset(mem_.data(), v, mem_.size()); }

 private:
  std::vector<char> mem_;
};

class FakeBufferType final : public BufferType {
 public:
  explicit FakeBufferType(Device* d) : device_(d) {}
  std::string name() const override { return "Fake"; }
  std::unique_ptr<Buffer> allocate(size_t size) override { return std::make_unique<FakeBuffer>(*this, size); }
  size_t alignment() const override { return 128; }
  bool is_host() const override { return false; }
  Device* device() const override { return device_; }

 private:
  Device* device_;
};

class FakeBackend;

class FakeDevice final : public Device {
 public:
  FakeDevice(std::string name, std::set<Op> ops)
      : name_(std::move(name)), ops_(std::move(ops)), type_(this) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "fake"; }
  DeviceKind kind() const override { return DeviceKind::Gpu; }
  DeviceMemory memory() const override { return {1 << 30, 1 << 30}; }
  BufferType& buffer_type() override { return type_; }
  std::unique_ptr<Backend> make_backend() override;
  const std::set<Op>& ops() const { return ops_; }

 private:
  std::string name_;
  std::set<Op> ops_;
  FakeBufferType type_;
};

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(FakeDevice& d) : device_(d) {}
  std::string name() const override { return device_.name(); }
  Device& device() const override { return device_; }
  void compute(Graph& graph) override {
    cpu::ComputeContext ctx;
    ctx.scratch = &scratch_;
    for (Tensor* n : graph.nodes()) {
      if (is_view_op(n->op)) continue;
      ASSERT_TRUE(supports(*n)) << op_name(n->op);
      // Everything this backend reads must be in its own memory (the scheduler copies inputs in).
      for (const Tensor* s : n->src) {
        if (s == nullptr) continue;
        const Tensor* r = s->view_src ? s->view_src : s;
        ASSERT_NE(r->buffer, nullptr) << r->describe();
        ASSERT_EQ(r->buffer->type().device(), &device_) << r->describe();
      }
      cpu::compute_node(ctx, *n);
      ++computed;
    }
  }
  bool supports(const Tensor& op) const override { return device_.ops().count(op.op) > 0; }
  int computed = 0;

 private:
  FakeDevice& device_;
  std::vector<char> scratch_;
};

std::unique_ptr<Backend> FakeDevice::make_backend() { return std::make_unique<FakeBackend>(*this); }

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

  const auto got = read(out);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6f) << i;

  // A second run of the same graph gives the same result (sources restored, copies refreshed).
  sched.compute(graph);
  const auto again = read(out);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(again[i], got[i]);
}

TEST(Scheduler, RejectsBadBackendLists) {
  FakeDevice dev0("Fake0", {Op::MulMat});
  auto b0 = dev0.make_backend();
  EXPECT_THROW(Scheduler({}), Error);
  EXPECT_THROW(Scheduler({b0.get()}), Error);  // last must be the CPU
}
