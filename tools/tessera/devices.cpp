#include <fmt/format.h>

#include "commands.h"
#include "tessera/device.h"
#include "tessera/runtime_notes.h"

namespace tessera::cli {

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices",
                                 "List every device: name, kind, total memory (and why a runtime has none)");
  cmd->callback([] {
    for (const auto& d : Registry::instance().devices()) {
      const auto mem = d->memory();
      fmt::print("{:<10} {:<12} {:>9.0f} MiB  {}\n", d->name(), to_string(d->kind()),
                 static_cast<double>(mem.total) / (1024.0 * 1024.0), d->description());
    }
    // Runtimes built in that found nothing here say why ("CUDA: no device (libcuda.so.1 not found: ...)").
    for (const auto& note : runtime_notes()) fmt::print("{}: no device ({})\n", note.runtime, note.reason);
  });
}

}  // namespace tessera::cli
