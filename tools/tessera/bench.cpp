// `tessera bench`: prompt processing (pp) and generation (tg) throughput, the llama-bench way:
// a fresh context per run (holding DEPTH tokens before the timed part), one warm-up, REPS timed
// runs, median and standard deviation; for generation also the weight bytes read per second.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "checks.h"
#include "commands.h"
#include "progress.h"
#include "tessera/device.h"
#include "tessera/error.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/op_types.h"

namespace tessera::cli {
namespace {

struct BenchArgs {
  std::string model, device, output = "md", type = "q4_0";
  int n_prompt = 512, n_gen = 128, depth = 0, threads = 0, reps = 5;
  int n_gpu_layers = -1;  // -1: every configuration (CPU, then all layers on each device)
  bool no_mmap = false, flash_attn = false;
};

struct Config {
  std::string device;  // "CPU" or a device name
  int n_gpu_layers;
};

struct Result {
  std::string model, backend, test;
  int n_gpu_layers, threads, depth;
  double median, stddev;  // tokens/s
  double gb_per_s;        // weight bytes read per second (generation only; 0 for prompts)
};

// Types the synthetic model can have: those a weight can be (matrix products and row lookups) and
// Tessera writes (not the grid I-quants).
std::vector<std::string> weight_type_names() {
  std::vector<std::string> names;
  for (DType t : kAllDTypes)
    if (op_source_types(Op::MulMat, 0).contains(t) && op_source_types(Op::GetRows, 0).contains(t) &&
        !is_grid_iquant(t))
      names.emplace_back(tessera::name(t));
  return names;
}

// Weight bytes one generated token reads: every weight once (the output matrix whole, tied or
// not), except the token embeddings, of which only the token's row is read. The KV cache, the
// activations and the scratch memory are not counted.
double weight_bytes_per_token(const llm::Model& model) {
  const Tensor* embd = model.token_embd();
  return static_cast<double>(model.weight_bytes() - embd->nbytes() + embd->nb[1]);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double stddev_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double s = 0.0;
  for (double x : v) s += (x - mean) * (x - mean);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// Tokens/s of one run of a test on a fresh session that first holds a.depth tokens (not timed).
double run_once(const llm::Model& model, const BenchArgs& a, bool prompt, std::mt19937& rng) {
  const int n = prompt ? a.n_prompt : a.n_gen;
  llm::SessionOptions so;
  so.n_ctx = std::max<int64_t>(static_cast<int64_t>(n) + a.depth, 1);
  so.n_threads = a.threads;
  so.flash_attn = a.flash_attn;
  llm::Session session(model, so);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model.hparams().n_vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(a.depth));
  for (auto& t : tokens) t = pick(rng);
  if (!tokens.empty()) session.decode(tokens);
  tokens.resize(static_cast<size_t>(n));
  for (auto& t : tokens) t = pick(rng);
  const auto t0 = std::chrono::steady_clock::now();
  if (prompt) {
    session.decode(tokens);
  } else {
    for (int32_t t : tokens) session.decode(std::span<const int32_t>(&t, 1));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(n) / s;
}

void bench(const BenchArgs& a) {
  std::vector<Config> configs;
  if (a.n_gpu_layers >= 0 || !a.device.empty()) {
    configs.push_back(
        {a.device.empty() ? (a.n_gpu_layers > 0 ? "" : "CPU") : a.device, std::max(a.n_gpu_layers, 0)});
    if (!a.device.empty() && a.n_gpu_layers < 0) configs.back().n_gpu_layers = 1 << 20;
  } else {
    configs.push_back({"CPU", 0});
    for (const auto& d : Registry::instance().devices())
      if (d->kind() != DeviceKind::Cpu) configs.push_back({d->name(), 1 << 20});
  }
  const auto type = dtype_from_name(a.type);
  if (!type) throw Error(ErrorCode::InvalidArgument, fmt::format("--type: unknown type '{}'", a.type));
  if (static_cast<int64_t>(a.depth) + std::max(a.n_prompt, a.n_gen) > (int64_t{1} << 24))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("-d {}: the depth and the test need more than 2^24 context cells", a.depth));

  std::vector<Result> results;
  std::mt19937 rng(1);
  for (const Config& c : configs) {
    llm::LoadOptions lo;
    lo.n_gpu_layers = c.n_gpu_layers;
    lo.device = c.device == "CPU" ? "" : c.device;
    if (c.device == "CPU") lo.n_gpu_layers = 0;
    lo.use_mmap = !a.no_mmap;
    ProgressBar bar("loading " + (c.device.empty() ? std::string("model") : c.device));
    lo.progress = [&](size_t done, size_t total) { bar.update(done, total); };
    std::unique_ptr<llm::Model> model;
    std::string model_name;
    if (a.model.empty()) {
      llm::SyntheticSpec spec;
      spec.type = *type;
      model = llm::Model::synthetic(spec, lo);
      model_name = fmt::format("synthetic-250M {}", a.type);
    } else {
      model = llm::Model::load(a.model, lo);
      model_name = a.model.substr(a.model.find_last_of('/') + 1);
    }
    const std::string backend = model->device() ? model->device()->name() : "CPU";
    const int ngl =
        model->device()
            ? static_cast<int>(std::min<int64_t>(model->n_gpu_layers(), model->hparams().n_layer + 1))
            : 0;
    const int threads = cpu::bounded_threads(a.threads);  // what the CPU backend runs
    const double bytes_per_token = weight_bytes_per_token(*model);
    for (bool prompt : {true, false}) {
      if ((prompt ? a.n_prompt : a.n_gen) <= 0) continue;
      run_once(*model, a, prompt, rng);  // warm-up
      std::vector<double> tps;
      for (int r = 0; r < a.reps; ++r) tps.push_back(run_once(*model, a, prompt, rng));
      std::string test = fmt::format("{}{}", prompt ? "pp" : "tg", prompt ? a.n_prompt : a.n_gen);
      if (a.depth > 0) test += fmt::format(" @ d{}", a.depth);  // llama-bench's spelling
      const double median = median_of(tps);
      results.push_back({model_name, backend, test, ngl, threads, a.depth, median, stddev_of(tps),
                         prompt ? 0.0 : bytes_per_token * median / 1e9});
      if (a.output == "md" && results.size() == 1)
        fmt::print(
            "| model | backend | ngl | threads | test | t/s | weights GB/s |\n"
            "| --- | --- | ---: | ---: | --- | ---: | ---: |\n");
      const Result& r = results.back();
      if (a.output == "md")
        fmt::print("| {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} |\n", r.model, r.backend, r.n_gpu_layers,
                   r.threads, r.test, r.median, r.stddev,
                   prompt ? std::string() : fmt::format("{:.2f}", r.gb_per_s));
      std::fflush(stdout);
    }
  }
  if (a.output == "json") {
    fmt::print("[\n");
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      fmt::print(
          "  {{\"model\": \"{}\", \"backend\": \"{}\", \"n_gpu_layers\": {}, \"threads\": {}, \"test\": "
          "\"{}\", \"n_depth\": {}, "
          "\"flash_attn\": {}, \"reps\": {}, \"tokens_per_second_median\": {:.4f}, "
          "\"tokens_per_second_stddev\": "
          "{:.4f}{}}}{}\n",
          r.model, r.backend, r.n_gpu_layers, r.threads, r.test, r.depth, a.flash_attn, a.reps, r.median,
          r.stddev,
          r.gb_per_s > 0.0 ? fmt::format(", \"weight_gb_per_second\": {:.4f}", r.gb_per_s) : std::string(),
          i + 1 < results.size() ? "," : "");
    }
    fmt::print("]\n");
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd =
      app.add_subcommand("bench", "Measure prompt processing and generation speed (llama-bench method)");
  cmd->add_option("-m,--model", args->model, "GGUF model file (default: a built-in synthetic 250M Llama)");
  const std::vector<std::string> types = weight_type_names();
  cmd->add_option("--type", args->type, "weight type of the synthetic model (any a weight can have)")
      ->transform(CLI::IsMember(types, CLI::ignore_case));  // q4_k as well as ggml's q4_K
  cmd->add_option("-p,--n-prompt", args->n_prompt, "prompt tokens (pp test; 0: skip)")->check(non_negative());
  cmd->add_option("-n,--n-gen", args->n_gen, "generated tokens (tg test; 0: skip)")->check(non_negative());
  cmd->add_option("-d,--n-depth", args->depth,
                  "tokens already in the context (KV cache) before each timed test, as llama-bench's -d; "
                  "the test is then named e.g. 'tg128 @ d512'")
      ->check(non_negative());
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)")->check(non_negative());
  cmd->add_option("-r,--repetitions", args->reps, "timed runs per test")->check(positive());
  cmd->add_option("--n-gpu-layers", args->n_gpu_layers,
                  "layers to offload (default: CPU, then all layers on each device)")
      ->check(non_negative());
  cmd->add_option("--device", args->device, "device for offloaded layers");
  // (CLI11 reads on/off, 1/0, true/false for a bool and refuses anything else)
  cmd->add_option("--flash-attn", args->flash_attn,
                  "attention on the CPU as `run --flash-attn` (on or 1: the online-softmax kernel; off or 0, "
                  "the default: the composed ops' kernels), as llama-bench's -fa");
  cmd->add_flag("--no-mmap", args->no_mmap, "read the model into memory instead of mapping it");
  cmd->add_option("-o,--output", args->output, "output format")->check(CLI::IsMember({"md", "json"}));
  cmd->footer(
      "weights GB/s (generation rows): the weight bytes one token reads (every weight, the output matrix "
      "whole, one row of the token embeddings; not the KV cache or activations) times tokens/s.");
  cmd->callback([args] { bench(*args); });
}

}  // namespace tessera::cli
