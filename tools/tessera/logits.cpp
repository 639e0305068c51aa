// `tessera logits`: evaluate token ids as one batch and write every position's logits as float32.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "checks.h"
#include "commands.h"
#include "pipeline_flag.h"
#include "split_flags.h"
#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

namespace tessera::cli {

void add_logits(CLI::App& app) {
  struct Args {
    std::string model, tokens, out, device, flash_attn = "off";
    SplitFlags split;
    PipelineFlag pipeline;
    int threads = 0, n_gpu_layers = 0;
    bool no_mmap = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("logits", "Write the logits of every position as raw float32 [n_tokens][n_vocab]");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("--tokens", args->tokens, "token ids, space separated (no BOS is added)")->required();
  cmd->add_option("-o,--output", args->out, "output file")->required();
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_option("--n-gpu-layers", args->n_gpu_layers, "layers to offload")->check(non_negative());
  cmd->add_option("--device", args->device, "device for offloaded layers, or several: OpenCL0,OpenCL1");
  args->split.add_to(cmd);
  cmd->add_option(
         "--flash-attn", args->flash_attn,
         "attention on the CPU: on: the online-softmax kernel (llama.cpp's -fa 1 rounding); off: the "
         "composed ops (llama.cpp's -fa 0 rounding)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  args->pipeline.add_to(cmd);
  cmd->callback([args] {
    std::vector<int32_t> ids;
    std::istringstream in(args->tokens);
    std::string word;
    while (in >> word) {
      size_t used = 0;
      long v = 0;
      try {
        v = std::stol(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || v < INT32_MIN || v > INT32_MAX)
        throw Error(ErrorCode::InvalidArgument, fmt::format("--tokens: '{}' is not a token id", word));
      ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) throw Error(ErrorCode::InvalidArgument, "--tokens: no token ids given");
    llm::LoadOptions lo;
    lo.n_gpu_layers = args->n_gpu_layers;
    lo.device = args->device;
    lo.use_mmap = !args->no_mmap;
    std::vector<float> logits;
    int64_t n_vocab = 0;
    args->pipeline.run(args->model, lo, args->split, [&](llm::LoadOptions& options, const auto& attach) {
      auto model = llm::Model::load(args->model, options);
      llm::SessionOptions so;
      so.n_threads = args->threads;
      so.n_ctx = std::max<int64_t>(static_cast<int64_t>(ids.size()), 1);
      so.n_batch = so.n_ctx;
      so.flash_attn = args->flash_attn == "on";
      llm::Session session(*model, so);
      if (!attach(session)) return;
      logits = session.decode(ids, /*all_logits=*/true);
      n_vocab = model->hparams().n_vocab;
    });
    if (n_vocab == 0) return;  // a later rank of a pipeline: rank 0 writes the file
    const std::string tmp = args->out + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) throw Error(ErrorCode::Io, fmt::format("cannot open {} for writing", tmp));
    const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    const bool ok = written == logits.size() && std::fclose(f) == 0;
    if (!ok || std::rename(tmp.c_str(), args->out.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw Error(ErrorCode::Io, fmt::format("cannot write {}", args->out));
    }
    fmt::print(stderr, "wrote {} x {} logits to {}\n", ids.size(), n_vocab, args->out);
  });
}

}  // namespace tessera::cli
