#pragma once
// Every `tessera` subcommand registers itself on the app (one file per subcommand).
#include <CLI/CLI.hpp>

namespace tessera::cli {

void add_devices(CLI::App& app);
void add_demo(CLI::App& app);

}  // namespace tessera::cli
