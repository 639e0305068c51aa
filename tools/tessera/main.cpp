// The `tessera` command line.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

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
  tessera::cli::add_serve(app);
  tessera::cli::add_tokenize(app);
  tessera::cli::add_embed(app);
  tessera::cli::add_logits(app);
  tessera::cli::add_bench(app);
  tessera::cli::add_test_ops(app);
  tessera::cli::add_chat_template(app);
  tessera::cli::add_quantize(app);
  tessera::cli::add_perplexity(app);
  tessera::cli::add_imatrix(app);
  // llama.cpp spells flags "-ngl", "-cnv", "-sys", "-np", "-fa", "-sm", "-ts", "-ub"; CLI11 takes single-dash
  // names of one letter only.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a == "-ngl") a = "--n-gpu-layers";
    if (a == "-cnv") a = "--conversation";
    if (a == "-sys") a = "--system-prompt";
    if (a.rfind("-ngl=", 0) == 0) a = "--n-gpu-layers=" + a.substr(5);
    if (a == "-np") a = "--np";
    if (a == "-fa") a = "--flash-attn";
    if (a == "-sm") a = "--split-mode";
    if (a == "-ts") a = "--tensor-split";
    if (a == "-ub") a = "--ubatch-size";
    args.push_back(std::move(a));
  }
  // CLI11 reads an unknown first word as a stray positional and says only "A subcommand is required".
  if (!args.empty() && !args.back().empty() && args.back()[0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->check_name(args.back());
    }
    if (!known) {
      std::fprintf(stderr, "tessera: error: unknown command '%s' (commands: %s)\n", args.back().c_str(),
                   names.c_str());
      return 1;
    }
  }
  try {
    app.parse(args);
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
