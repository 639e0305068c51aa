// `tessera imatrix`: an importance matrix of a model over a text, as llama.cpp's llama-imatrix
// computes and writes it (tessera/llm/imatrix.h has the method), for `tessera quantize --imatrix`.
#include "tessera/llm/imatrix.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checks.h"
#include "commands.h"
#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/perplexity.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {
namespace {

struct ImatrixArgs {
  std::string model, file, out = "imatrix.gguf";
  int64_t n_ctx = 512, n_batch = 2048, chunks = -1, first_chunk = 0;
  int threads = 0;
  bool process_output = false, no_mmap = false;
};

void run_imatrix(const ImatrixArgs& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, fmt::format("cannot open the text file {}", a.file));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::Io, fmt::format("cannot read {}", a.file));
  if (!text.empty() && text.back() == '\n') text.pop_back();

  llm::LoadOptions lo;
  lo.use_mmap = !a.no_mmap;
  auto model = llm::Model::load(a.model, lo);
  const auto vocab = llm::Vocab::from_gguf(*model->file());
  llm::SessionOptions so;
  so.n_ctx = a.n_ctx;
  so.n_batch = std::min(a.n_batch, a.n_ctx);
  so.n_threads = a.threads;
  llm::Session session(*model, so);

  llm::ImatrixOptions io;
  io.n_ctx = a.n_ctx;
  io.n_batch = a.n_batch;
  io.max_chunks = a.chunks;
  io.first_chunk = a.first_chunk;
  io.process_output = a.process_output;
  io.dataset = std::filesystem::path(a.file).filename().string();
  const std::vector<llm::Token> tokens = llm::perplexity_tokens(vocab, text);
  fmt::print(stderr, "imatrix: {} tokens, chunks of {}\n", tokens.size(), a.n_ctx);
  const auto start = std::chrono::steady_clock::now();
  const llm::ImatrixResult r = llm::compute_imatrix(session, vocab, tokens, io, [&](int64_t c, int64_t n) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "[{}/{}] {:.1f} s\n", c, n, s);
  });
  llm::write_imatrix(r, a.out);
  fmt::print("{}: {} tensors from {} chunks of {} tokens\n", a.out, r.stats.size(), r.n_chunks, r.chunk_size);
}

}  // namespace

void add_imatrix(CLI::App& app) {
  auto args = std::make_shared<ImatrixArgs>();
  auto* cmd = app.add_subcommand(
      "imatrix", "A model's importance matrix over a text (llama-imatrix's GGUF), for quantize --imatrix");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", args->file, "calibration text")->required();
  cmd->add_option("-o,--output", args->out, "imatrix file to write (default imatrix.gguf)");
  cmd->add_option("-c,--ctx-size", args->n_ctx, "tokens per chunk")->check(at_least(2))->default_val(512);
  cmd->add_option("--chunk,--from-chunk", args->first_chunk, "start with chunk N of the text (default 0)")
      ->check(non_negative());
  cmd->add_option("-b,--batch-size", args->n_batch, "tokens per decode within a chunk")
      ->check(at_least(1))
      ->default_val(2048);
  cmd->add_option("--chunks", args->chunks, "evaluate at most N chunks (default: every whole chunk)")
      ->check(at_least(1));
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_flag("--process-output", args->process_output, "collect output.weight too");
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  cmd->callback([args] { run_imatrix(*args); });
}

}  // namespace tessera::cli
