// `tessera quantize`: write a GGUF model in a quantized file type, as llama-quantize does.
#include "tessera/llm/quantize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "commands.h"
#include "tessera/gguf.h"

namespace tessera::cli {

void add_quantize(CLI::App& app) {
  struct Args {
    std::string in, out, type, output_type, token_embedding_type, imatrix;
    bool pure = false;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  std::string types;
  for (const llm::FileType& t : llm::file_types()) {
    if (!types.empty()) types += ' ';
    types += t.name;
  }
  auto* cmd = app.add_subcommand(
      "quantize", "Write a model's f32/f16/bf16 weights in a quantized type or one of llama.cpp's mixes");
  cmd->add_option("input", args->in, "GGUF model to read")->required();
  cmd->add_option("output", args->out, "GGUF file to write (atomically: OUTPUT.tmp, then renamed)")
      ->required();
  cmd->add_option("type", args->type, "file type, case-insensitive: " + types)->required();
  cmd->add_flag("--pure", args->pure,
                "every quantizable tensor in the type (no per-tensor choices of the mixes)");
  cmd->add_option("--output-type", args->output_type, "type of output.weight (e.g. q8_0)");
  cmd->add_option("--token-embedding-type", args->token_embedding_type, "type of token_embd.weight");
  cmd->add_option(
      "--imatrix", args->imatrix,
      "importance matrix (llama-imatrix's GGUF or legacy .dat): weights every quantizer that takes "
      "one; IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S and IQ3_XXS tensors need it");
  cmd->add_option("-t,--threads", args->threads, "threads (default: one per hardware thread)");
  cmd->callback([args] {
    llm::QuantizeOptions o;
    o.type = std::string(llm::file_type(args->type).name);
    o.pure = args->pure;
    if (!args->output_type.empty()) o.output_type = llm::tensor_type(args->output_type);
    if (!args->token_embedding_type.empty())
      o.token_embedding_type = llm::tensor_type(args->token_embedding_type);
    o.threads = args->threads;
    o.imatrix = args->imatrix;
    const auto start = std::chrono::steady_clock::now();
    size_t total_in = 0, total_out = 0;
    auto type_name = [](uint32_t id) {
      const gguf::GgmlType* g = gguf::ggml_type(id);
      return g != nullptr ? std::string(g->name) : fmt::format("type {}", id);
    };
    llm::quantize_model(args->in, args->out, o, [&](const llm::QuantizeProgress& p) {
      const auto& t = *p.tensor;
      total_in += p.bytes_in;
      total_out += p.bytes_out;
      const int width = static_cast<int>(fmt::formatted_size("{}", p.count));
      int dims = 4;
      while (dims > 1 && t.ne[static_cast<size_t>(dims - 1)] == 1) --dims;
      const std::string shape = fmt::format("[{}]", fmt::join(t.ne.begin(), t.ne.begin() + dims, ", "));
      fmt::print("[{:>{}}/{}] {:<32} {:<18} {:>7} -> {:<7} {:9.3f} MiB -> {:9.3f} MiB\n", p.index, width,
                 p.count, t.name, shape, type_name(t.from_type_id),
                 t.converted() ? type_name(t.to_type_id) : "(copy)", p.bytes_in / 1048576.0,
                 p.bytes_out / 1048576.0);
      std::fflush(stdout);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{}: {} ({:.2f} MiB -> {:.2f} MiB) in {:.1f} s\n", args->out, o.type, total_in / 1048576.0,
               total_out / 1048576.0, seconds);
  });
}

}  // namespace tessera::cli
