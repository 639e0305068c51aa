#pragma once
// The test-ops harness's cases and runner (the entry points the CLI uses are tessera/conformance.h):
// every op on a backend against the CPU reference kernels (NMSE, NaN/inf, guard bytes), batch
// invariance, the support matrix and a perf mode.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/conformance.h"
#include "tessera/context.h"
#include "tessera/device.h"
#include "tessera/op_types.h"

namespace tessera::conformance {

// How a leaf is filled.
enum class Fill { Uniform, NearOne, Indices, UniqueRow, Positions, Zero };

// One test case: a graph built from leafs; compared node by node with the reference.
class Case {
 public:
  virtual ~Case() = default;
  // "OP(type=..., ne=[...], params...)"
  virtual std::string name() const = 0;
  virtual Op op() const = 0;
  // Builds the graph's output in ctx (leafs made with leaf() so they get filled).
  virtual Tensor* build(Context& ctx) = 0;
  // Largest acceptable NMSE against the reference for node `node`.
  virtual double max_nmse(const Tensor& node) const;
  // Work of one run, for perf mode: floating-point operations (0 = report bandwidth instead).
  virtual double flops(const Tensor& /*out*/) const { return 0.0; }
  // Batch-invariance cases compare outputs within one backend instead of with the reference.
  virtual bool self_check() const { return false; }
  // For self-check cases: pairs (a, b) of output tensors that must agree.
  virtual std::vector<std::pair<Tensor*, Tensor*>> pairs() const { return {}; }

  // Helpers for build().
  Tensor* leaf(Context& ctx, DType type, std::array<int64_t, 4> ne, Fill fill = Fill::Uniform,
               int64_t range = 0);
  struct LeafSpec {
    Tensor* tensor;
    Fill fill;
    int64_t range;  // Indices: values in [0, range); Positions: max position
  };
  std::vector<LeafSpec> leafs_;  // filled by leaf(); reset before each build
};

struct Outcome {
  enum Kind { Pass, Fail, Skip } kind = Pass;
  std::string detail;  // "nmse=..." or the reason
};

// Every case of every family.
std::vector<std::unique_ptr<Case>> all_cases();

// Runs one case on the target against the reference; never throws for backend failures.
Outcome run_case(Case& c, const Target& target, uint32_t seed);

// Test mode over cases: prints one line per case and returns the totals.
Totals run_tests(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
                 const std::function<void(const std::string&)>& print);

// Makes a leaf of a probe: type, shape, how to fill it, and its range (Indices / Positions).
using LeafMaker = std::function<Tensor*(DType, std::array<int64_t, 4>, Fill, int64_t)>;
// A node of `op` with exactly these types, made by the op's builder from leafs (variant: the
// UnaryOp of UNARY). Throws Error when the builder refuses the combination or builds other types.
Tensor* build_probe(Context& ctx, Op op, const OpTypes& types, const LeafMaker& leaf, int variant = 0);
// Leafs as bare descriptors in ctx (no data).
LeafMaker plain_leaf(Context& ctx);
// Every combination of types over op's result and source slots (absent included), defined or not,
// except that a prefix (result, first sources) no rule admits appears once, its later slots absent.
std::vector<OpTypes> all_op_types(Op op);
// A node of op (built with its first defined types) whose result and sources can then be given any
// types: for asking a backend about combinations no builder makes. Each source is whole blocks of
// its type, one tensor per slot and type made on first use, so the exhaustive sweeps over every
// combination allocate nothing per combination.
class RetypedProbe {
 public:
  RetypedProbe(Context& ctx, Op op);
  const Tensor& with(const OpTypes& types);

 private:
  Context& ctx_;
  Tensor* node_;
  std::array<std::array<Tensor*, kDTypeCount>, kMaxSources> sources_{};
};

// Perf mode: time per run and GFLOP/s or GB/s per case.
void run_perf(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
              const std::function<void(const std::string&)>& print);

}  // namespace tessera::conformance
