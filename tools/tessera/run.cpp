// `tessera run`: generate text from a prompt, streaming it to stdout.
#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat.h"
#include "checks.h"
#include "commands.h"
#include "pipeline_flag.h"
#include "progress.h"
#include "split_flags.h"
#include "tessera/error.h"
#include "tessera/llm/generator.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/grammar_matcher.h"
#include "tessera/llm/json_schema.h"
#include "tessera/llm/model.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/session_file.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {
namespace {

struct RunArgs {
  std::string model, prompt, device, system_prompt, chat_template_file;
  SplitFlags split;
  PipelineFlag pipeline;
  std::string prompt_cache;       // --prompt-cache FILE
  bool prompt_cache_all = false;  // also save the generated tokens at the end
  bool chat = false;
  int n_predict = 128, threads = 0, n_gpu_layers = 0;
  int64_t n_ctx = 0, n_batch = 512, n_ubatch = 0;
  uint64_t seed = 0;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int top_k = 40;
  bool report = false;
  std::string flash_attn = "off";
  bool no_mmap = false;
  bool ignore_eos = false;
  int stats_every = 0;
  std::string grammar, grammar_file, json_schema;  // at most one
};

// The grammar --grammar, --grammar-file or --json-schema asks for, or null.
std::shared_ptr<const llm::Grammar> constraint(const RunArgs& a) {
  if (int(!a.grammar.empty()) + int(!a.grammar_file.empty()) + int(!a.json_schema.empty()) > 1)
    throw Error(ErrorCode::InvalidArgument,
                "give at most one of --grammar, --grammar-file and --json-schema");
  if (!a.grammar.empty()) return llm::Grammar::parse(a.grammar);
  if (!a.json_schema.empty())
    return llm::Grammar::parse(llm::json_schema_to_gbnf(std::string_view(a.json_schema)));
  if (!a.grammar_file.empty()) {
    std::ifstream in(a.grammar_file, std::ios::binary);
    if (!in) throw Error(ErrorCode::Io, fmt::format("cannot read the grammar file '{}'", a.grammar_file));
    std::ostringstream text;
    text << in.rdbuf();
    return llm::Grammar::parse(text.str());
  }
  return nullptr;
}

// The process's resident memory (Linux), for --stats-every.
double resident_mib() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string size_text(uintmax_t bytes) {
  const auto b = static_cast<double>(bytes);
  return bytes < (uintmax_t{1} << 20) ? fmt::format("{:.1f} KiB", b / 1024.0)
                                      : fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
}

// What --prompt-cache read and wrote, for the summary on stderr.
struct PromptCache {
  bool read = false;
  size_t read_tokens = 0;
  double read_ms = 0;
  struct Write {
    size_t tokens;
    uintmax_t bytes;
    double ms;
  };
  std::vector<Write> writes;

  void write(const llm::Session& session, const std::string& path, std::span<const llm::Token> tokens) {
    const auto t = std::chrono::steady_clock::now();
    llm::save_sequence_state(session, 0, tokens, path);
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(path, ec);
    writes.push_back({tokens.size(), ec ? 0 : bytes, ms_since(t)});
  }
};

void generate(const RunArgs& a, const std::shared_ptr<const llm::Grammar>& grammar, const llm::Model& model,
              llm::Session& session, double load_ms);

void run(const RunArgs& a) {
  const auto grammar = constraint(a);  // a bad grammar fails before the model loads
  if (a.pipeline.on && !a.prompt_cache.empty())
    throw Error(ErrorCode::Unsupported,
                "--prompt-cache is not implemented with --pipeline (each rank holds a part of the KV cache)");
  const auto t_load = std::chrono::steady_clock::now();
  llm::LoadOptions lo;
  lo.n_gpu_layers = a.n_gpu_layers;
  lo.device = a.device;
  lo.use_mmap = !a.no_mmap;
  ProgressBar bar("loading");
  lo.progress = [&](size_t done, size_t total) { bar.update(done, total); };
  a.pipeline.run(a.model, lo, a.split, [&](llm::LoadOptions& options, const auto& attach) {
    auto model = llm::Model::load(a.model, options);
    llm::SessionOptions so;
    so.n_ctx = a.n_ctx;
    so.n_batch = a.n_batch;
    so.n_ubatch = a.n_ubatch;
    so.n_threads = a.threads;
    so.flash_attn = a.flash_attn == "on";
    llm::Session session(*model, so);
    if (attach(session)) generate(a, grammar, *model, session, ms_since(t_load));
  });
}

// Rank 0's part (all of it without --pipeline): the prompt, the generation, the summary.
void generate(const RunArgs& a, const std::shared_ptr<const llm::Grammar>& grammar, const llm::Model& model,
              llm::Session& session, double load_ms) {
  const auto vocab = llm::Vocab::from_gguf(*model.file());
  const std::vector<llm::Token> prompt = vocab.encode(a.prompt, /*add_special=*/true);
  if (static_cast<int64_t>(prompt.size()) > session.n_ctx())
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("the prompt has {} tokens, more than the context of {}", prompt.size(), session.n_ctx()));
  llm::SamplerOptions sopt;
  sopt.temperature = a.temp;
  sopt.top_k = a.top_k;
  sopt.top_p = a.top_p;
  sopt.min_p = a.min_p;
  sopt.repeat_penalty = a.repeat_penalty;
  sopt.seed = a.seed;
  std::unique_ptr<llm::GrammarMatcher> matcher;
  if (grammar)
    matcher = std::make_unique<llm::GrammarMatcher>(grammar, std::make_shared<const llm::VocabTrie>(vocab));
  llm::Sampler sampler(sopt, std::move(matcher));
  llm::Generator generator(session, vocab);

  const auto t_prompt = std::chrono::steady_clock::now();
  // --prompt-cache: the file's tokens that begin the prompt are not evaluated again (the last
  // prompt token always is, for its logits), and the prompt's state is saved once evaluated.
  PromptCache cache;
  bool save_prompt = false;
  if (!a.prompt_cache.empty()) {
    std::error_code ec;  // a file that cannot be looked at is read, which names the reason
    if (std::filesystem::exists(a.prompt_cache, ec) || ec) {
      const auto t = std::chrono::steady_clock::now();
      std::vector<llm::Token> saved = llm::load_sequence_state(session, 0, a.prompt_cache);
      cache.read = true;
      cache.read_ms = ms_since(t);
      cache.read_tokens = saved.size();
      // A file that holds the whole prompt (or more) is kept as it is.
      save_prompt = saved.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), saved.begin());
      generator.adopt(std::move(saved));
    } else {
      save_prompt = true;
    }
  }
  // The prompt as the user wrote it, then the continuation as it is generated.
  std::fputs(a.prompt.c_str(), stdout);
  std::fflush(stdout);
  const size_t from_cache = generator.prefill(prompt, sampler);
  const double prompt_ms = ms_since(t_prompt);
  if (save_prompt) cache.write(session, a.prompt_cache, prompt);

  llm::GenerateOptions go;
  go.max_tokens = a.n_predict;
  go.stop_at_eos = !a.ignore_eos;
  go.on_text = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  auto t_window = std::chrono::steady_clock::now();  // --stats-every
  int sampled = 0;
  if (a.stats_every > 0)
    go.on_token = [&](llm::Token) {
      if (sampled > 0 && sampled % a.stats_every == 0) {
        const double ms = ms_since(t_window);
        fmt::print(stderr, "stats: tokens {}-{}: {:.2f} tokens/s, context {}, RSS {:.1f} MiB\n",
                   sampled - a.stats_every, sampled, ms > 0 ? 1000.0 * a.stats_every / ms : 0.0,
                   session.n_past(), resident_mib());
        t_window = std::chrono::steady_clock::now();
      }
      ++sampled;
    };
  const llm::GenerateResult r = generator.complete(sampler, go);
  const double gen_ms = r.generate_ms;
  const size_t generated = r.generated;
  if (a.prompt_cache_all && !a.prompt_cache.empty() && generator.held().size() > prompt.size())
    cache.write(session, a.prompt_cache, generator.held());
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (r.end == llm::GenerateEnd::ContextFull)
    fmt::print(stderr,
               "generation stopped after {} of {} tokens: the context of {} tokens is full (-c sets it)\n",
               generated, a.n_predict, session.n_ctx());
  if (a.report) fmt::print(stderr, "{}", session.report());
  fmt::print(stderr, "load: {:.1f} ms\n", load_ms);
  if (!a.prompt_cache.empty()) {
    if (cache.read)
      fmt::print(stderr, "prompt cache: read {} tokens from {} in {:.1f} ms\n", cache.read_tokens,
                 a.prompt_cache, cache.read_ms);
    for (const auto& [tokens, bytes, ms] : cache.writes)
      fmt::print(stderr, "prompt cache: wrote {} tokens ({}) to {} in {:.1f} ms\n", tokens, size_text(bytes),
                 a.prompt_cache, ms);
    fmt::print(stderr, "prompt: {} tokens ({} from the prompt cache), {:.1f} ms, {:.2f} tokens/s\n",
               prompt.size(), from_cache, prompt_ms,
               prompt_ms > 0 ? 1000.0 * static_cast<double>(prompt.size()) / prompt_ms : 0.0);
  } else {
    fmt::print(stderr, "prompt: {} tokens, {:.1f} ms, {:.2f} tokens/s\n", prompt.size(), prompt_ms,
               prompt_ms > 0 ? 1000.0 * static_cast<double>(prompt.size()) / prompt_ms : 0.0);
  }
  fmt::print(stderr, "generation: {} tokens, {:.1f} ms, {:.2f} tokens/s\n", generated, gen_ms,
             gen_ms > 0 ? 1000.0 * generated / gen_ms : 0.0);
  if (const llm::GrammarMatcher* g = sampler.grammar())
    fmt::print(stderr, "grammar: {} masks computed, {} from the cache, text {}\n", g->walks(),
               g->cache_hits(), g->state().complete() ? "complete" : "incomplete");
}

// CLI11 would wrap "-1" to 2^64-1 and saturate anything larger: a seed is decimal digits that fit.
CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ptr != end || ec != std::errc())
          return "the seed must be an integer from 0 to 18446744073709551615, got '" + text + "'";
        return "";
      },
      "SEED");
}

}  // namespace

void add_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt with a GGUF model");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "prompt text (required without -cnv)");
  cmd->add_flag("--conversation,--chat", args->chat,
                "chat through the model's chat template: one user turn per input line, /exit or end of input "
                "ends, Ctrl-C stops a reply (llama.cpp's -cnv)");
  cmd->add_option("--system-prompt", args->system_prompt, "with -cnv: the system message (llama.cpp's -sys)");
  cmd->add_option("--chat-template-file", args->chat_template_file,
                  "with -cnv: a Jinja chat template to use instead of the file's");
  cmd->add_option("-n,--n-predict", args->n_predict, "tokens to generate")->check(non_negative());
  cmd->add_option("-c,--ctx-size", args->n_ctx, "context size (0: the model's, at most 4096)")
      ->check(non_negative());
  cmd->add_option("-b,--batch-size", args->n_batch,
                  "tokens per graph: a longer prompt is evaluated in batches of this many (with --pipeline, "
                  "the stages work on successive batches at once)")
      ->check(positive());
  cmd->add_option("--ubatch-size", args->n_ubatch,
                  "with layers on several devices: a batch is pipelined across them in micro-batches of this "
                  "many tokens (0: the batch / (4 x devices), at least 32; the batch size: no pipelining)")
      ->check(non_negative());
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_option("-s,--seed", args->seed, "sampling seed (0 to 2^64-1)")->check(seed_check());
  cmd->add_option("--temp", args->temp, "temperature (0: greedy)")->check(non_negative());
  cmd->add_option("--top-k", args->top_k, "top-k (0: off)")->check(non_negative());
  cmd->add_option("--top-p", args->top_p, "top-p (1: off)")->check(in_range(0.0, 1.0));
  cmd->add_option("--min-p", args->min_p, "min-p (0: off)")->check(in_range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", args->repeat_penalty, "repetition penalty (1: off)")->check(positive());
  cmd->add_option("--n-gpu-layers", args->n_gpu_layers, "layers to offload to the device")
      ->check(non_negative());
  cmd->add_option("--device", args->device,
                  "device for offloaded layers (e.g. OpenCL0), or several: OpenCL0,OpenCL1");
  args->split.add_to(cmd);
  cmd->add_option(
         "--flash-attn", args->flash_attn,
         "attention (one FLASH_ATTN_EXT per layer) on the CPU: on: its online-softmax kernel; off: the "
         "composed ops' kernels per group of query tokens (faster today)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "generate -n tokens even past end-of-generation tokens");
  cmd->add_option("--stats-every", args->stats_every,
                  "every N generated tokens, print the window's tokens/s and the process's RSS to stderr")
      ->check(non_negative());
  cmd->add_option(
      "--prompt-cache", args->prompt_cache,
      "a file for the prompt's state (tokens and KV cache): when it exists, the prompt's tokens it "
      "begins with are not evaluated again; the state is saved after the prompt is evaluated. A "
      "file of another model, or a corrupted one, is an error (and is left as it is)");
  cmd->add_flag("--prompt-cache-all", args->prompt_cache_all,
                "with --prompt-cache: also save the generated tokens' state at the end");
  args->pipeline.add_to(cmd);
  cmd->add_flag("--report", args->report, "print the placement of the graph and every CPU fallback");
  cmd->add_option("--grammar", args->grammar, "constrain the output to a GBNF grammar (llama.cpp's format)");
  cmd->add_option("--grammar-file", args->grammar_file, "constrain the output to the GBNF grammar in a file");
  cmd->add_option("-j,--json-schema", args->json_schema,
                  "constrain the output to JSON valid against a JSON schema (e.g. '{}' for any JSON value)");
  cmd->callback([args, prompt] {
    if (args->chat && !(args->grammar.empty() && args->grammar_file.empty() && args->json_schema.empty()))
      throw Error(ErrorCode::InvalidArgument,
                  "--grammar, --grammar-file and --json-schema need -p (not -cnv)");
    if (args->chat && args->pipeline.on)
      throw Error(ErrorCode::Unsupported, "--pipeline works with -p, not with -cnv");
    if (args->chat && !args->prompt_cache.empty())
      throw Error(ErrorCode::InvalidArgument, "--prompt-cache works with -p, not with -cnv");
    if (args->chat) {
      ChatSettings c;
      c.model = args->model;
      c.device = args->device;
      c.system_prompt = args->system_prompt;
      c.template_file = args->chat_template_file;
      c.n_predict = args->n_predict;
      c.threads = args->threads;
      c.n_gpu_layers = args->n_gpu_layers;
      c.n_ctx = args->n_ctx;
      c.no_mmap = args->no_mmap;
      c.sampling.temperature = args->temp;
      c.sampling.top_k = args->top_k;
      c.sampling.top_p = args->top_p;
      c.sampling.min_p = args->min_p;
      c.sampling.repeat_penalty = args->repeat_penalty;
      c.sampling.seed = args->seed;
      run_chat(c);
      return;
    }
    if (!args->system_prompt.empty() || !args->chat_template_file.empty())
      throw Error(ErrorCode::InvalidArgument, "--system-prompt and --chat-template-file need -cnv");
    if (prompt->count() == 0)
      throw Error(ErrorCode::InvalidArgument, "give a prompt with -p, or chat with -cnv");
    if (args->prompt_cache_all && args->prompt_cache.empty())
      throw Error(ErrorCode::InvalidArgument, "--prompt-cache-all needs --prompt-cache FILE");
    run(*args);
  });
}

}  // namespace tessera::cli
