// The test-ops harness itself: a wrong kernel, a write past an output and a false support claim
// must all be reported as failures; an honest "not supported" as skipped.
#include "conformance/harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "tessera/buffer.h"
#include "tessera/cpu.h"
#include "tessera/error.h"
#include "tessera/ops.h"

using namespace tessera;
using namespace tessera::conformance;

namespace {

enum class Flaw { None, WrongResult, WritePastEnd, ClaimsButThrows, HonestUnsupported };

// The CPU backend with one injected flaw, for ADD nodes only.
class FlawedBackend final : public Backend {
 public:
  explicit FlawedBackend(Flaw flaw) : flaw_(flaw), cpu_(1) {}
  std::string name() const override { return "Flawed"; }
  Device& device() const override { return cpu_.device(); }
  bool supports(const Tensor& op) const override {
    return !(flaw_ == Flaw::HonestUnsupported && op.op == Op::Add) && cpu_.supports(op);
  }
  void compute(Graph& graph) override {
    for (Tensor* n : graph.nodes())
      if (n->op == Op::Add && flaw_ == Flaw::ClaimsButThrows)
        throw Error(ErrorCode::Unsupported, "ADD: no kernel");
    cpu_.compute(graph);
    for (Tensor* n : graph.nodes()) {
      if (n->op != Op::Add) continue;
      auto* f = static_cast<float*>(n->data);
      if (flaw_ == Flaw::WrongResult) f[3] += 0.5f;                // one element off
      if (flaw_ == Flaw::WritePastEnd) f[n->nelements()] = 42.0f;  // one float past the end
    }
  }

 private:
  Flaw flaw_;
  mutable cpu::CpuBackend cpu_;
};

class AddCase final : public Case {
 public:
  std::string name() const override { return "ADD(type_a=f32, type_b=f32, ne=[16,4,1,1])"; }
  Op op() const override { return Op::Add; }
  Tensor* build(Context& ctx) override {
    return ops::add(ctx, leaf(ctx, DType::F32, {16, 4, 1, 1}), leaf(ctx, DType::F32, {16, 1, 1, 1}));
  }
};

Outcome run_with(Flaw flaw) {
  Target target{"Flawed", [flaw] { return std::make_unique<FlawedBackend>(flaw); }, &host_buffer_type()};
  AddCase c;
  return run_case(c, target, 1);
}

}  // namespace

TEST(Harness, HonestBackendPasses) { EXPECT_EQ(run_with(Flaw::None).kind, Outcome::Pass); }

TEST(Harness, WrongKernelFails) {
  const Outcome o = run_with(Flaw::WrongResult);
  EXPECT_EQ(o.kind, Outcome::Fail);
  EXPECT_NE(o.detail.find("nmse"), std::string::npos) << o.detail;
}

TEST(Harness, WritePastAnOutputTripsTheGuard) {
  const Outcome o = run_with(Flaw::WritePastEnd);
  EXPECT_EQ(o.kind, Outcome::Fail);
  EXPECT_NE(o.detail.find("guard"), std::string::npos) << o.detail;
}

TEST(Harness, FalseSupportClaimFailsLoudly) {
  const Outcome o = run_with(Flaw::ClaimsButThrows);
  EXPECT_EQ(o.kind, Outcome::Fail);
  EXPECT_NE(o.detail.find("claims support"), std::string::npos) << o.detail;
}

TEST(Harness, HonestUnsupportedIsSkipped) {
  EXPECT_EQ(run_with(Flaw::HonestUnsupported).kind, Outcome::Skip);
}

TEST(Harness, NanInResultFails) {
  // A NaN where the reference has a number is a failure whatever the NMSE threshold.
  class NanBackend final : public Backend {
   public:
    NanBackend() : cpu_(1) {}
    std::string name() const override { return "Nan"; }
    Device& device() const override { return cpu_.device(); }
    bool supports(const Tensor& op) const override { return cpu_.supports(op); }
    void compute(Graph& graph) override {
      cpu_.compute(graph);
      static_cast<float*>(graph.nodes().back()->data)[0] = std::nanf("");
    }

   private:
    mutable cpu::CpuBackend cpu_;
  };
  Target target{"Nan", [] { return std::make_unique<NanBackend>(); }, &host_buffer_type()};
  AddCase c;
  const Outcome o = run_case(c, target, 1);
  EXPECT_EQ(o.kind, Outcome::Fail);
  EXPECT_NE(o.detail.find("NaN"), std::string::npos) << o.detail;
}

TEST(Harness, EveryCaseHasAUniqueName) {
  auto cases = all_cases();
  EXPECT_GT(cases.size(), 500u);
  std::set<std::string> names;
  for (const auto& c : cases) EXPECT_TRUE(names.insert(c->name()).second) << "duplicate: " << c->name();
  // Every op of the required set has cases.
  std::set<Op> ops;
  for (const auto& c : cases) ops.insert(c->op());
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (op == Op::None || is_view_op(op)) continue;
    EXPECT_TRUE(ops.count(op)) << "no case for " << op_name(op);
  }
}

TEST(Harness, SupportTableShowsTheCoreTableAndRefusals) {
  Target cpu{"CPU", [] { return std::make_unique<cpu::CpuBackend>(1); }, &host_buffer_type()};
  const std::string table = support_table(cpu);
  // Rows and blank cells come from core's table: MUL_MAT takes no i32 weights; ADD with an f16 b
  // only for an f16 a.
  EXPECT_NE(table.find("| MUL_MAT (b f32) | yes | yes | yes | yes | yes | |"), std::string::npos) << table;
  EXPECT_NE(table.find("| ADD (b f16) | | yes | | | | |"), std::string::npos) << table;
  EXPECT_NE(table.find("| CPY (a i32) | yes | | | | | yes |"), std::string::npos) << table;
  EXPECT_NE(table.find("| ROPE (freq factors f32) | yes | yes |"), std::string::npos) << table;
  // A backend that refuses ADD shows "no" where the CPU says yes.
  Target flawed{"Flawed", [] { return std::make_unique<FlawedBackend>(Flaw::HonestUnsupported); },
                &host_buffer_type()};
  const std::string refused = support_table(flawed);
  EXPECT_NE(refused.find("| ADD (b f32) | no | no | | | | |"), std::string::npos) << refused;
  EXPECT_NE(refused.find("| MUL (b f32) | yes | yes | | | | |"), std::string::npos) << refused;
}
