// `tessera perplexity`: a model's perplexity over a text, and the KL divergence of its token
// distributions from a base model's, as llama.cpp's llama-perplexity computes and prints them
// (tessera/llm/perplexity.h has the method).
#include "tessera/llm/perplexity.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "checks.h"
#include "commands.h"
#include "pipeline_flag.h"
#include "split_flags.h"
#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {
namespace {

struct PerplexityArgs {
  std::string model, file, device, kld_base;
  SplitFlags split;
  PipelineFlag pipeline;
  int64_t n_ctx = 512, n_batch = 2048, chunks = -1;
  int threads = 0, n_gpu_layers = 0;
  bool kl_divergence = false, ctx_given = false, no_mmap = false;
};

// The text as llama.cpp's -f reads it: the whole file, one trailing newline dropped.
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, fmt::format("cannot open the text file {}", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(ErrorCode::Io, fmt::format("cannot read {}", path));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

void print_eta(const char* what, double seconds, int64_t n_chunks) {
  auto total = static_cast<int64_t>(seconds * static_cast<double>(n_chunks));
  std::string eta;
  if (total >= 3600) {
    eta = fmt::format("{} hours ", total / 3600);
    total %= 3600;
  }
  fmt::print(stderr, "{}: {:.2f} seconds per pass - ETA {}{:.2f} minutes\n", what, seconds, eta,
             static_cast<double>(total) / 60.0);
}

void print_kl_statistics(const llm::KlDivergenceResult& r) {
  const llm::KlDivergenceStats& s = r.stats;
  const auto ppl = s.ppl(), ppl_base = s.ppl_base(), ln_ratio = s.ln_ppl_ratio(), ratio = s.ppl_ratio(),
             diff = s.ppl_diff(), kld = s.kld(), p_diff = s.p_diff(), rms = s.rms_p_diff(),
             top = s.same_top();
  fmt::print("====== Perplexity statistics ======\n");
  fmt::print("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", ppl.value, ppl.error);
  fmt::print("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", ppl_base.value, ppl_base.error);
  fmt::print("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n", 100.0 * s.ln_ppl_correlation());
  fmt::print("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", ln_ratio.value, ln_ratio.error);
  fmt::print("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}\n", ratio.value, ratio.error);
  fmt::print("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n", diff.value, diff.error);
  fmt::print("\n====== KL divergence statistics ======\n");
  fmt::print("Mean    KLD: {:10.6f} ± {:10.6f}\n", kld.value, kld.error);
  fmt::print("Maximum KLD: {:10.6f}\n", r.kld.back());
  const std::pair<const char*, float> kld_levels[] = {
      {"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}};
  for (const auto& [name, f] : kld_levels)
    fmt::print("{}   KLD: {:10.6f}\n", name, llm::percentile(r.kld, f));
  fmt::print("Median  KLD: {:10.6f}\n", llm::median(r.kld));
  const std::pair<const char*, float> kld_low[] = {
      {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}};
  for (const auto& [name, f] : kld_low) fmt::print("{}   KLD: {:10.6f}\n", name, llm::percentile(r.kld, f));
  fmt::print("Minimum KLD: {:10.6f}\n", r.kld.front());
  fmt::print("\n====== Token probability statistics ======\n");
  fmt::print("Mean    Δp: {:6.3f} ± {:5.3f} %\n", 100.0 * p_diff.value, 100.0 * p_diff.error);
  fmt::print("Maximum Δp: {:6.3f}%\n", 100.0 * r.p_diff.back());
  const std::pair<const char*, float> dp_high[] = {
      {"99.9%", 0.999f}, {"99.0%", 0.990f}, {"95.0%", 0.950f}, {"90.0%", 0.900f}, {"75.0%", 0.750f}};
  for (const auto& [name, f] : dp_high)
    fmt::print("{}   Δp: {:6.3f}%\n", name, 100.0 * llm::percentile(r.p_diff, f));
  fmt::print("Median  Δp: {:6.3f}%\n", 100.0 * llm::median(r.p_diff));
  const std::pair<const char*, float> dp_low[] = {
      {"25.0%", 0.250f}, {"10.0%", 0.100f}, {" 5.0%", 0.050f}, {" 1.0%", 0.010f}, {" 0.1%", 0.001f}};
  for (const auto& [name, f] : dp_low)
    fmt::print("{}   Δp: {:6.3f}%\n", name, 100.0 * llm::percentile(r.p_diff, f));
  fmt::print("Minimum Δp: {:6.3f}%\n", 100.0 * r.p_diff.front());
  fmt::print("RMS Δp    : {:6.3f} ± {:5.3f} %\n", 100.0 * rms.value, 100.0 * rms.error);
  fmt::print("Same top p: {:6.3f} ± {:5.3f} %\n", 100.0 * top.value, 100.0 * top.error);
}

void evaluate(const PerplexityArgs& a, const llm::PerplexityOptions& po, int64_t n_ctx,
              const std::string& text, llm::Session& session, const llm::Vocab& vocab);

void run_perplexity(const PerplexityArgs& a) {
  if (a.kl_divergence && a.kld_base.empty())
    throw Error(ErrorCode::InvalidArgument, "--kl-divergence needs the base file: --kl-divergence-base FILE");
  if (!a.kl_divergence && a.file.empty())
    throw Error(ErrorCode::InvalidArgument, "give the text to evaluate with -f FILE");
  if (a.kl_divergence && !a.file.empty())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("-f is not read with --kl-divergence (the tokens come from {}): leave it out",
                            a.kld_base));
  // Everything about the inputs is checked before the model loads.
  llm::PerplexityOptions po;
  po.n_batch = a.n_batch;
  po.max_chunks = a.chunks;
  int64_t n_ctx = a.n_ctx;
  std::string text, about_base;
  if (a.kl_divergence) {
    const llm::KlDivergenceBaseInfo info = llm::read_kl_divergence_base_info(a.kld_base);
    if (!a.ctx_given) n_ctx = info.n_ctx;
    po.n_ctx = a.ctx_given ? a.n_ctx : 0;
    about_base = fmt::format("kl_divergence: {}: {} chunks of {} tokens, vocabulary of {}\n", a.kld_base,
                             info.n_chunks, info.n_ctx, info.n_vocab);
  } else {
    text = read_text(a.file);
    po.n_ctx = n_ctx;
    po.save_base = a.kld_base;
  }
  if (n_ctx < 3) throw Error(ErrorCode::InvalidArgument, fmt::format("-c must be at least 3, got {}", n_ctx));

  llm::LoadOptions lo;
  lo.n_gpu_layers = a.n_gpu_layers;
  lo.device = a.device;
  lo.use_mmap = !a.no_mmap;
  // With --pipeline every rank reads the inputs above (so the text, or the base file's header, must
  // be on every machine) and loads its stage; rank 0 evaluates and prints, the others serve.
  a.pipeline.run(a.model, lo, a.split, [&](llm::LoadOptions& options, const auto& attach) {
    auto model = llm::Model::load(a.model, options);
    const auto vocab = llm::Vocab::from_gguf(*model->file());
    llm::SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_batch = std::min(a.n_batch, n_ctx);
    so.n_threads = a.threads;
    llm::Session session(*model, so);
    if (!attach(session)) return;
    fmt::print(stderr, "{}", about_base);
    if (n_ctx > model->hparams().n_ctx_train)
      fmt::print(stderr, "perplexity: the model was trained on only {} context tokens ({} specified)\n",
                 model->hparams().n_ctx_train, n_ctx);
    evaluate(a, po, n_ctx, text, session, vocab);
  });
}

void evaluate(const PerplexityArgs& a, const llm::PerplexityOptions& po, int64_t n_ctx,
              const std::string& text, llm::Session& session, const llm::Vocab& vocab) {
  if (a.kl_divergence) {
    fmt::print(
        "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
        "            Same top p\n");
    const auto r = llm::kl_divergence(session, vocab, a.kld_base, po, [](const llm::KlDivergenceChunk& c) {
      if (c.chunk == 1) print_eta("kl_divergence", c.seconds, c.n_chunks);
      const auto ppl = c.stats.ppl(), ln_ratio = c.stats.ln_ppl_ratio(), kld = c.stats.kld(),
                 rms = c.stats.rms_p_diff(), top = c.stats.same_top();
      fmt::print(
          "{:4}    {:9.4f} ± {:9.4f}    {:10.5f} ± {:10.5f}    {:10.5f} ± {:10.5f}    {:6.3f} ± {:6.3f} %    "
          "{:6.3f} ± {:6.3f} %\n",
          c.chunk, ppl.value, ppl.error, ln_ratio.value, ln_ratio.error, kld.value, kld.error,
          100.0 * rms.value, 100.0 * rms.error, 100.0 * top.value, 100.0 * top.error);
      std::fflush(stdout);
    });
    fmt::print("\n");
    // As llama-perplexity: no distribution statistics from so few values.
    if (r.stats.count < 100) {
      fmt::print(stderr, "kl_divergence: {} tokens scored; the statistics need at least 100 (more chunks)\n",
                 r.stats.count);
      return;
    }
    print_kl_statistics(r);
    return;
  }

  fmt::print(stderr, "perplexity: tokenizing the input ..\n");
  const std::vector<llm::Token> tokens = llm::perplexity_tokens(vocab, text);
  const int64_t n_chunks_max = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (n_chunks_max > 0)  // else llm::perplexity's Error says why
    fmt::print(stderr,
               "perplexity: {} tokens; calculating perplexity over {} chunks, n_ctx={}, batch_size={}\n",
               tokens.size(), a.chunks > 0 ? std::min(a.chunks, n_chunks_max) : n_chunks_max, n_ctx,
               std::min(a.n_batch, n_ctx));
  const auto r = llm::perplexity(session, vocab, tokens, po, [](const llm::PerplexityChunk& c) {
    if (c.chunk == 1) print_eta("perplexity", c.seconds, c.n_chunks);
    fmt::print("[{}]{:.4f},", c.chunk, c.ppl);
    std::fflush(stdout);
  });
  fmt::print("\n");
  if (!a.kld_base.empty())
    fmt::print(stderr, "perplexity: saved the log-probabilities of {} tokens to {}\n", r.n_scored,
               a.kld_base);
  if (r.ppl_error > 0)
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_error);
  else
    fmt::print("Final estimate: PPL = {:.4f} (too few tokens scored for an error: {})\n", r.ppl, r.n_scored);
}

}  // namespace

void add_perplexity(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity",
                                 "A model's perplexity over a text, or its KL divergence from a base "
                                 "model's, as llama-perplexity computes them");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", args->file, "text file to evaluate (not with --kl-divergence)");
  auto* ctx = cmd->add_option("-c,--ctx-size", args->n_ctx,
                              "tokens per chunk; the second half of each is scored (with --kl-divergence: "
                              "the base file's)")
                  ->check(positive())
                  ->default_val(512);
  cmd->add_option("-b,--batch-size", args->n_batch, "tokens per decode within a chunk")
      ->check(at_least(1))
      ->default_val(2048);
  cmd->add_option("--chunks", args->chunks, "evaluate at most N chunks (default: every whole chunk)")
      ->check(at_least(1));
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_option("--kl-divergence-base", args->kld_base,
                  "without --kl-divergence: save the model's log-probabilities of every scored token to FILE "
                  "(llama.cpp's .kld format); with it: read them");
  cmd->add_flag("--kl-divergence", args->kl_divergence,
                "compare the model with the base file's: KL divergence, PPL ratio, same top token");
  cmd->add_option("--n-gpu-layers", args->n_gpu_layers, "layers to offload")->check(non_negative());
  cmd->add_option("--device", args->device, "device for offloaded layers, or several: OpenCL0,OpenCL1");
  args->split.add_to(cmd);
  args->pipeline.add_to(cmd);
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  cmd->callback([args, ctx] {
    args->ctx_given = ctx->count() > 0;
    run_perplexity(*args);
  });
}

}  // namespace tessera::cli
