// `tessera test-ops`: conformance of every op on every backend against the CPU reference kernels.
#include <fmt/format.h>

#include <cstdlib>

#include "checks.h"
#include "commands.h"
#include "tessera/conformance.h"
#include "tessera/error.h"
#include "tessera/ops.h"

namespace tessera::cli {

void add_test_ops(CLI::App& app) {
  struct Args {
    std::string backend, op, type, mode = "test";
    uint32_t seed = 1;
    double seconds = 1.0;
    bool skip_missing = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("test-ops", "Check every op on a backend against the CPU reference kernels");
  cmd->add_option("-b,--backend", args->backend, "device name (CPU, OpenCL0, ...); default: every device");
  cmd->add_option("-o,--op", args->op, "only this op (e.g. MUL_MAT)");
  cmd->add_option("-t,--type", args->type, "only cases with this type (e.g. q4_0)");
  cmd->add_option("--mode", args->mode, "test, support or perf")
      ->check(CLI::IsMember({"test", "support", "perf"}));
  cmd->add_option("--seed", args->seed, "random seed of the inputs");
  cmd->add_option("--seconds", args->seconds, "perf mode: seconds per case")->check(positive());
  cmd->add_flag("--skip-missing", args->skip_missing,
                "exit with 77 (skipped) when the backend is not present");
  cmd->callback([args] {
    auto targets = conformance::registered_targets();
    if (!args->backend.empty()) {
      std::erase_if(targets, [&](const conformance::Target& t) { return t.name != args->backend; });
      if (targets.empty() && args->skip_missing) {
        fmt::print("backend {} is not present on this machine: skipped\n0 passed, 0 failed, 1 skipped\n",
                   args->backend);
        std::fflush(stdout);
        std::exit(77);
      }
      if (targets.empty()) {
        std::string known;
        for (const auto& t : conformance::registered_targets()) known += (known.empty() ? "" : ", ") + t.name;
        throw Error(ErrorCode::InvalidArgument,
                    fmt::format("unknown backend '{}' (devices: {})", args->backend, known));
      }
    }
    if (!args->op.empty()) {
      bool known = false;
      for (int i = 0; i < kOpCount; ++i) known = known || op_name(static_cast<Op>(i)) == args->op;
      if (!known) throw Error(ErrorCode::InvalidArgument, fmt::format("unknown op '{}'", args->op));
    }
    if (args->mode == "support") {
      for (const auto& t : targets) fmt::print("{}\n", conformance::support_table(t));
      return;
    }
    conformance::Options options;
    options.op = args->op;
    options.type = args->type;
    options.seed = args->seed;
    options.perf_seconds = args->seconds;
    auto print = [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    };
    conformance::Totals totals;
    for (const auto& t : targets) {
      fmt::print("Backend {}:\n", t.name);
      if (args->mode == "perf") {
        conformance::run_perf(t, options, print);
        continue;
      }
      const auto tt = conformance::run_tests(t, options, print);
      totals.passed += tt.passed;
      totals.failed += tt.failed;
      totals.skipped += tt.skipped;
    }
    if (args->mode == "test") {
      fmt::print("{} passed, {} failed, {} skipped\n", totals.passed, totals.failed, totals.skipped);
      if (totals.failed > 0)
        throw Error(ErrorCode::InvalidArgument, fmt::format("{} cases failed", totals.failed));
    }
  });
}

}  // namespace tessera::cli
