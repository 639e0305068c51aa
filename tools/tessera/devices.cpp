#include <fmt/format.h>

#include "commands.h"
#include "tessera/device.h"

namespace tessera::cli {

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List every device: name, kind, total memory");
  cmd->callback([] {
    for (const auto& d : Registry::instance().devices()) {
      const auto mem = d->memory();
      fmt::print("{:<10} {:<12} {:>9.0f} MiB  {}\n", d->name(), to_string(d->kind()),
                 static_cast<double>(mem.total) / (1024.0 * 1024.0), d->description());
    }
  });
}

}  // namespace tessera::cli
