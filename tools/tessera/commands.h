#pragma once
// Every `tessera` subcommand registers itself on the app (one file per subcommand).
#include <CLI/CLI.hpp>

namespace tessera::cli {

void add_devices(CLI::App& app);
void add_demo(CLI::App& app);
void add_gguf(CLI::App& app);
void add_run(CLI::App& app);
void add_serve(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_embed(CLI::App& app);
void add_logits(CLI::App& app);
void add_bench(CLI::App& app);
void add_test_ops(CLI::App& app);
void add_chat_template(CLI::App& app);
void add_quantize(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_imatrix(CLI::App& app);

}  // namespace tessera::cli
