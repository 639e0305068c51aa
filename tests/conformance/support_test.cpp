// Core's op x type table (tessera/op_types.h) against the builders, the CPU backend and the device
// op libraries: the builders admit exactly the table; the CPU says yes to every combination of the
// table and runs it (against its reference kernels), and says no to every other; no device library
// claims a combination the table lacks.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance/harness.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"

using namespace tessera;
using namespace tessera::conformance;

namespace {

std::vector<Op> ops_with_kernels() {
  std::vector<Op> out;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (op != Op::None && !is_view_op(op)) out.push_back(op);
  }
  return out;
}

int variants(Op op) { return op == Op::Unary ? kUnaryOpCount : 1; }

// One defined combination as a test-ops case, so it runs through the harness like any other.
class ProbeCase final : public Case {
 public:
  ProbeCase(Op op, OpTypes types, int variant) : op_(op), types_(types), variant_(variant) {}
  std::string name() const override {
    return fmt::format("{}[{}]({})", op_name(op_), variant_, describe(types_));
  }
  Op op() const override { return op_; }
  Tensor* build(Context& ctx) override {
    return build_probe(
        ctx, op_, types_,
        [&](DType t, std::array<int64_t, 4> ne, Fill fill, int64_t range) {
          return leaf(ctx, t, ne, fill, range);
        },
        variant_);
  }

 private:
  Op op_;
  OpTypes types_;
  int variant_;
};

}  // namespace

TEST(SupportTable, BuildersAdmitExactlyTheTable) {
  int defined = 0;
  for (Op op : ops_with_kernels()) {
    EXPECT_FALSE(defined_op_types(op).empty()) << op_name(op);
    for (const OpTypes& t : all_op_types(op)) {
      Context ctx;
      bool built = true;
      try {
        build_probe(ctx, op, t, plain_leaf(ctx));
      } catch (const Error&) {
        built = false;
      }
      EXPECT_EQ(built, op_types_defined(op, t)) << op_name(op) << " " << describe(t);
      defined += built ? 1 : 0;
    }
  }
  EXPECT_GT(defined, 100);
}

TEST(SupportTable, CpuSaysYesExactlyToTheTable) {
  cpu::CpuBackend cpu(1);
  int refused = 0;
  for (Op op : ops_with_kernels()) {
    Context probes;
    RetypedProbe retyped(probes, op);
    for (const OpTypes& t : all_op_types(op)) {
      if (op_types_defined(op, t)) {
        Context ctx;
        EXPECT_TRUE(cpu.supports(*build_probe(ctx, op, t, plain_leaf(ctx))))
            << op_name(op) << " " << describe(t);
      } else {
        EXPECT_FALSE(cpu.supports(retyped.with(t))) << op_name(op) << " " << describe(t);
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 1000);
  // Two the builders refuse, spelled out: MUL_MAT with i32 weights, ADD of f32 by f16.
  Context ctx;
  OpTypes mm{DType::F32, {DType::I32, DType::F32}};
  EXPECT_FALSE(cpu.supports(RetypedProbe(ctx, Op::MulMat).with(mm)));
  OpTypes add{DType::F32, {DType::F32, DType::F16}};
  EXPECT_FALSE(cpu.supports(RetypedProbe(ctx, Op::Add).with(add)));
}

TEST(SupportTable, CpuRunsEveryCombinationOfTheTable) {
  Target cpu{"CPU", [] { return std::make_unique<cpu::CpuBackend>(2); }, &host_buffer_type()};
  int ran = 0;
  for (Op op : ops_with_kernels())
    for (const OpTypes& t : defined_op_types(op))
      for (int v = 0; v < variants(op); ++v) {
        ProbeCase c(op, t, v);
        const Outcome o = run_case(c, cpu, 7);
        EXPECT_EQ(o.kind, Outcome::Pass) << c.name() << ": " << o.detail;
        ++ran;
      }
  EXPECT_GT(ran, 100);
}

TEST(SupportTable, DeviceLibrariesNeverClaimBeyondTheTable) {
  int devices = 0;
  for (const Target& target : registered_targets()) {
    if (target.name == "CPU") continue;
    ++devices;
    auto backend = target.make_backend();
    for (Op op : ops_with_kernels()) {
      Context ctx;
      RetypedProbe retyped(ctx, op);
      for (const OpTypes& t : all_op_types(op)) {
        if (op_types_defined(op, t)) continue;
        EXPECT_FALSE(backend->supports(retyped.with(t)))
            << target.name << " " << op_name(op) << " " << describe(t);
      }
    }
  }
  if (devices == 0) GTEST_SKIP() << "no device besides the CPU is registered";
}

TEST(SupportTable, DevicesRunEveryCombinationTheyClaim) {
  int devices = 0;
  for (const Target& target : registered_targets()) {
    if (target.name == "CPU") continue;
    ++devices;
    auto backend = target.make_backend();
    for (Op op : ops_with_kernels())
      for (const OpTypes& t : defined_op_types(op))
        for (int v = 0; v < variants(op); ++v) {
          Context ctx;
          if (!backend->supports(*build_probe(ctx, op, t, plain_leaf(ctx), v))) continue;
          ProbeCase c(op, t, v);
          const Outcome o = run_case(c, target, 7);
          EXPECT_EQ(o.kind, Outcome::Pass) << target.name << " " << c.name() << ": " << o.detail;
        }
  }
  if (devices == 0) GTEST_SKIP() << "no device besides the CPU is registered";
}
