// `tessera imatrix`: an importance matrix of a model over a text, as llama.cpp's llama-imatrix
// computes and writes it (tessera/llm/imatrix.h has the method), for `tessera quantize --imatrix`.
#include "tessera/llm/imatrix.h"

#include <fmt/format.h>

#include <cmath>
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
  std::string model, file, out = "imatrix.gguf", format = "gguf";
  std::vector<std::string> in_files;
  int64_t n_ctx = 512, n_batch = 2048, chunks = -1, first_chunk = 0, save_every = 0, output_every = 10;
  int threads = 0;
  bool process_output = false, no_mmap = false, no_ppl = false, parse_special = false,
       show_statistics = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, fmt::format("cannot open the text file {}", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::Io, fmt::format("cannot read {}", path));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// llama-imatrix's Euclidean-cosine score of a weight or layer against the layer before.
double ecs(double l2_distance, double cos_sim) {
  return 100.0 * std::exp(-0.01 * l2_distance) * std::pow(std::abs(cos_sim), 10.0);
}

// llama-imatrix --show-statistics' two tables.
void print_statistics(const llm::ImatrixStatistics& st) {
  const bool legacy = st.legacy;
  fmt::print("{:>6} {:<20} {:>12} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>10} {:>7} {:>8}\n", "Layer",
             "Tensor", legacy ? "Sum E[x^2]" : "L2 dist", "Min", "Max", "Mean", "StdDev", "N", "H norm",
             legacy ? "H" : "ECS", "ZD", "CosSim");
  for (const auto& t : st.tensors) {
    const double h_norm =
        t.elements > 1 ? 100.0 * t.entropy / std::log2(static_cast<double>(t.elements)) : 0.0;
    fmt::print(
        "{:>6} {:<20} {:>12.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>10.4f} {:>8} {:>8.2f}% {:>10.4f} {:>6.2f}% "
        "{:>8.4f}\n",
        t.layer, t.tensor, legacy ? t.sum : t.l2_distance, t.min, t.max, t.mean, t.std_dev, t.elements,
        h_norm, legacy ? t.entropy : ecs(t.l2_distance, t.cos_sim), 100.0 * t.zd_fraction, t.cos_sim);
  }
  fmt::print("\n{:>6} {:>12} {:>8} {:>8}{}\n", "Layer", legacy ? "Sum E[x^2]" : "L2 dist", "ZD", "CosSim",
             legacy ? "" : fmt::format(" {:>8}", "ECS"));
  for (const auto& l : st.layers) {
    fmt::print("{:>6} {:>12.4f} {:>7.2f}% {:>8.4f}", l.layer, legacy ? l.sum : l.l2_distance,
               100.0 * l.zd_fraction, l.cos_sim);
    if (!legacy) fmt::print(" {:>8.4f}", ecs(l.l2_distance, l.cos_sim));
    fmt::print("\n");
  }
}

void run_imatrix(const ImatrixArgs& a) {
  if (a.show_statistics && (a.in_files.empty() || !a.file.empty() || !a.model.empty()))
    throw Error(ErrorCode::InvalidArgument,
                "imatrix: --show-statistics reads the --in-file files (combined), without -m or -f");
  if (a.file.empty() && a.in_files.empty())
    throw Error(ErrorCode::InvalidArgument,
                "imatrix: give a text (-f) to compute an importance matrix, or --in-file files to combine");
  if (a.file.empty() && !a.model.empty())
    throw Error(ErrorCode::InvalidArgument, "imatrix: a model (-m) is only read with a text (-f)");
  if (!a.file.empty() && a.model.empty())
    throw Error(ErrorCode::InvalidArgument, "imatrix: a text (-f) needs the model (-m) to evaluate it");
  const auto format = a.format == "dat" ? llm::ImatrixFormat::LegacyDat : llm::ImatrixFormat::Gguf;
  llm::ImatrixResult r;
  for (const std::string& in : a.in_files) {
    llm::read_imatrix_sums(r, in, a.n_ctx);
    fmt::print(stderr, "imatrix: read {}\n", in);
  }
  if (a.show_statistics) {
    print_statistics(llm::imatrix_statistics(r));
    return;
  }
  if (a.file.empty()) {  // combining only
    llm::write_imatrix(r, a.out, format);
    fmt::print("{}: {} tensors combined from {} files ({} chunks of {} tokens)\n", a.out, r.stats.size(),
               a.in_files.size(), r.chunk_count(), r.chunk_size);
    return;
  }
  const std::string text = read_text(a.file);

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
  io.compute_ppl = !a.no_ppl;
  io.dataset = std::filesystem::path(a.file).filename().string();
  const std::vector<llm::Token> tokens = llm::perplexity_tokens(vocab, text, a.parse_special);
  fmt::print(stderr, "imatrix: {} tokens, chunks of {}\n", tokens.size(), a.n_ctx);
  // As llama-imatrix: OUT every --output-frequency chunks, OUT.at_N every --save-frequency, both
  // counted in the result's chunks (those read from --in-file included).
  int64_t last = r.chunk_count();
  auto passed = [&](int64_t now, int64_t every) { return every > 0 && now / every > last / every; };
  llm::compute_imatrix(r, session, vocab, tokens, io, [&](const llm::ImatrixChunk& c) {
    if (std::isnan(c.ppl))  // --no-ppl, or chunks too short to score a token
      fmt::print(stderr, "[{}/{}] {:.2f} s\n", c.chunk, c.n_chunks, c.seconds);
    else
      fmt::print(stderr, "[{}/{}] PPL {:.4f}, {:.2f} s\n", c.chunk, c.n_chunks, c.ppl, c.seconds);
    const int64_t now = r.chunk_count();
    if (passed(now, a.output_every)) llm::write_imatrix(r, a.out, format);
    if (passed(now, a.save_every)) llm::write_imatrix(r, fmt::format("{}.at_{}", a.out, now), format);
    last = now;
  });
  llm::write_imatrix(r, a.out, format);
  if (r.nll.count > 0) {
    const llm::PerplexityResult p = r.nll.result(r.n_chunks);
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", p.ppl, p.ppl_error);
  }
  fmt::print("{}: {} tensors from {} chunks of {} tokens\n", a.out, r.stats.size(), r.chunk_count(),
             r.chunk_size);
}

}  // namespace

void add_imatrix(CLI::App& app) {
  auto args = std::make_shared<ImatrixArgs>();
  auto* cmd = app.add_subcommand(
      "imatrix", "A model's importance matrix over a text (llama-imatrix's files), for quantize --imatrix");
  cmd->add_option("-m,--model", args->model, "GGUF model file (with -f)");
  cmd->add_option("-f,--file", args->file, "calibration text (without it: combine the --in-file files)");
  cmd->add_option("-o,--output", args->out, "imatrix file to write (default imatrix.gguf)");
  cmd->add_option("--output-format", args->format, "gguf (default) or dat (llama-imatrix's legacy format)")
      ->check(CLI::IsMember({"gguf", "dat"}));
  cmd->add_option("--in-file", args->in_files,
                  "an importance matrix (GGUF or .dat) to add to; repeat to combine several")
      ->check(CLI::ExistingFile);
  cmd->add_option("-c,--ctx-size", args->n_ctx, "tokens per chunk")->check(at_least(2))->default_val(512);
  cmd->add_option("--chunk,--from-chunk", args->first_chunk, "start with chunk N of the text (default 0)")
      ->check(non_negative());
  cmd->add_option("-b,--batch-size", args->n_batch, "tokens per decode within a chunk")
      ->check(at_least(1))
      ->default_val(2048);
  cmd->add_option("--chunks", args->chunks, "evaluate at most N chunks (default: every whole chunk)")
      ->check(at_least(1));
  cmd->add_option("--output-frequency", args->output_every,
                  "write the output every N chunks (0: at the end only)")
      ->check(non_negative())
      ->default_val(10);
  cmd->add_option("--save-frequency", args->save_every,
                  "also write OUTPUT.at_N every N chunks (default 0: never)")
      ->check(non_negative());
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_flag("--process-output", args->process_output, "collect output.weight too");
  cmd->add_flag("--no-ppl", args->no_ppl, "do not compute the running perplexity");
  cmd->add_flag("--show-statistics", args->show_statistics,
                "print the statistics of the --in-file files (llama-imatrix's tables) instead");
  cmd->add_flag("--parse-special", args->parse_special,
                "read special-token texts in the text as those tokens");
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  cmd->callback([args] { run_imatrix(*args); });
}

}  // namespace tessera::cli
