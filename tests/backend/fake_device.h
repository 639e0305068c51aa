#pragma once
// Fake "devices" for scheduler tests: host memory that the scheduler must treat as foreign,
// computed with the CPU reference kernels, each supporting only some ops and offloading from a
// chosen batch size (op_batch_size) on.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cpu/kernels.h"
#include "tessera/tessera.h"

namespace tessera::test {

class FakeBuffer final : public Buffer {
 public:
  FakeBuffer(BufferType& type, size_t size) : Buffer(type, size), mem_(std::max<size_t>(size, 1)) {}
  void* base() const override { return const_cast<char*>(mem_.data()); }
  void set(Tensor& t, const void* src, size_t off, size_t n) override {
    std::memcpy(static_cast<char*>(t.data) + off, src, n);
  }
  void get(const Tensor& t, void* dst, size_t off, size_t n) const override {
    std::memcpy(dst, static_cast<const char*>(t.data) + off, n);
  }
  void clear(uint8_t v) override { std::memset(mem_.data(), v, mem_.size()); }

 private:
  std::vector<char> mem_;
};

class FakeBufferType final : public BufferType {
 public:
  explicit FakeBufferType(Device* d) : device_(d) {}
  std::string name() const override { return "Fake"; }
  std::unique_ptr<Buffer> allocate(size_t size) override {
    ++allocations;
    return std::make_unique<FakeBuffer>(*this, size);
  }
  size_t alignment() const override { return 128; }
  bool is_host() const override { return false; }
  Device* device() const override { return device_; }
  int allocations = 0;

 private:
  Device* device_;
};

class FakeDevice final : public Device {
 public:
  // offload_min_batch 0: never wants to offload.
  FakeDevice(std::string name, std::set<Op> ops, int64_t offload_min_batch = 0)
      : name_(std::move(name)), ops_(std::move(ops)), min_batch_(offload_min_batch), type_(this) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "fake"; }
  DeviceKind kind() const override { return DeviceKind::Gpu; }
  DeviceMemory memory() const override { return {1 << 30, 1 << 30}; }
  BufferType& buffer_type() override { return type_; }
  FakeBufferType& fake_buffer_type() { return type_; }
  std::unique_ptr<Backend> make_backend() override;
  const std::set<Op>& ops() const { return ops_; }
  int64_t min_batch() const { return min_batch_; }

 private:
  std::string name_;
  std::set<Op> ops_;
  int64_t min_batch_;
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
      if (is_view_op(n->op) || n->op == Op::None) continue;  // as every backend skips them
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
  bool wants_offload(const Tensor& op) const override {
    return device_.min_batch() > 0 && op_batch_size(op) >= device_.min_batch();
  }
  int computed = 0;

 private:
  FakeDevice& device_;
  std::vector<char> scratch_;
};

inline std::unique_ptr<Backend> FakeDevice::make_backend() { return std::make_unique<FakeBackend>(*this); }

}  // namespace tessera::test
