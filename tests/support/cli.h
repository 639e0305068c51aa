#pragma once
// Runs the built `tessera` program (TESSERA_CLI) with arguments through the shell.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tessera::testing_support {

struct CliResult {
  int code;         // exit status
  std::string out;  // stdout and stderr together
};

// `env` is prepended as shell variable assignments (e.g. "TESSERA_OPENCL_DEVICES=none").
inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(TESSERA_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) out += buf.data();
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace tessera::testing_support
