#pragma once
// test-ops: every op on a backend against the CPU reference kernels (NMSE, NaN/inf, guard bytes),
// batch invariance, the support matrix and a perf mode.
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/backend.h"
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

struct Options {
  std::string backend;  // device name; empty: every non-reference backend
  std::string op;       // op name filter (e.g. MUL_MAT); empty: all
  std::string type;     // type filter (matches "type=" fields of the case name); empty: all
  uint32_t seed = 1;
  double perf_seconds = 1.0;
};

struct Outcome {
  enum Kind { Pass, Fail, Skip } kind = Pass;
  std::string detail;  // "nmse=..." or the reason
};

struct Totals {
  int passed = 0, failed = 0, skipped = 0;
};

// A device under test: how to make its backend and where its tensors live.
struct Target {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make_backend;
  BufferType* buffer_type = nullptr;
};

// Every case of every family.
std::vector<std::unique_ptr<Case>> all_cases();

// Runs one case on the target against the reference; never throws for backend failures.
Outcome run_case(Case& c, const Target& target, uint32_t seed);

// Test mode over cases: prints one line per case and returns the totals.
Totals run_tests(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
                 const std::function<void(const std::string&)>& print);

// The op x type support matrix of a backend, as a Markdown table: one row per op (and unary
// function) and types of the other sources, one column per type of the op's main slot; a cell is
// empty where core's table (tessera/op_types.h) has no such combination.
std::string support_table(const Target& target);

// Makes a leaf of a probe: type, shape, how to fill it, and its range (Indices / Positions).
using LeafMaker = std::function<Tensor*(DType, std::array<int64_t, 4>, Fill, int64_t)>;
// A node of `op` with exactly these types, made by the op's builder from leafs (variant: the
// UnaryOp of UNARY). Throws Error when the builder refuses the combination or builds other types.
Tensor* build_probe(Context& ctx, Op op, const OpTypes& types, const LeafMaker& leaf, int variant = 0);
// Leafs as bare descriptors in ctx (no data).
LeafMaker plain_leaf(Context& ctx);
// Every combination of types over op's result and source slots (absent included), defined or not.
std::vector<OpTypes> all_op_types(Op op);
// A node of op whose result and sources have been given these types after building: for asking a
// backend about combinations no builder makes.
Tensor* build_retyped_probe(Context& ctx, Op op, const OpTypes& types);

// Perf mode: time per run and GFLOP/s or GB/s per case.
void run_perf(const Target& target, std::vector<std::unique_ptr<Case>>& cases, const Options& options,
              const std::function<void(const std::string&)>& print);

// The registered devices as targets (the CPU with its fast kernels).
std::vector<Target> registered_targets();

}  // namespace tessera::conformance
