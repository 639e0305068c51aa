// The `tessera` command line.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "tessera/error.h"
#include "tessera/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: tensor graphs and LLM inference on CPUs and accelerators"};
  app.set_version_flag("--version", std::string("tessera ") + tessera::kVersion);
  app.require_subcommand(1);
  tessera::cli::add_devices(app);
  tessera::cli::add_demo(app);
  tessera::cli::add_gguf(app);
  tessera::cli::add_run(app);
  tessera::cli::add_tokenize(app);
  tessera::cli::add_logits(app);
  tessera::cli::add_bench(app);
  tessera::cli::add_test_ops(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
