#pragma once
// test-ops, the conformance harness: every op on a device against the CPU reference kernels
// (NMSE, NaN/inf, guard bytes), batch invariance, the op x type support matrix and a perf mode.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/buffer.h"

namespace tessera::conformance {

struct Options {
  std::string backend;  // device name; empty: every non-reference backend
  std::string op;       // op name filter (e.g. MUL_MAT); empty: all
  std::string type;     // type filter (matches "type=" fields of the case name); empty: all
  uint32_t seed = 1;
  double perf_seconds = 1.0;
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

using Print = std::function<void(const std::string&)>;

// The registered devices as targets (the CPU with its fast kernels).
std::vector<Target> registered_targets();

// Test mode over every case: prints one line per case and returns the totals.
Totals run_tests(const Target& target, const Options& options, const Print& print);

// Perf mode over every case: time per run and GFLOP/s or GB/s per case.
void run_perf(const Target& target, const Options& options, const Print& print);

// The op x type support matrix of a backend, as a Markdown table: one row per op (and unary
// function) and types of the other sources, one column per type of the op's main slot; a cell is
// empty where core's table (tessera/op_types.h) has no such combination.
std::string support_table(const Target& target);

}  // namespace tessera::conformance
