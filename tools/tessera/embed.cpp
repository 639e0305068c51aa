// `tessera embed`: the embedding of a text (llama-embedding's job): the model's hidden states after
// its final norm, pooled (the file's pooling, else mean) and, with --normalize, L2-normalized.
#include <fmt/format.h>

#include "commands.h"
#include "tessera/error.h"
#include "tessera/llm/embeddings.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {

void add_embed(CLI::App& app) {
  struct Args {
    std::string model, prompt, pooling;
    bool normalize = false;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "embed", "Print the embedding of a text: n_embd floats (pooling none: one line per token)");
  cmd->add_option("-m,--model", args->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", args->prompt, "text to embed")->required();
  cmd->add_option("--pooling", args->pooling, "mean, cls, last or none (default: the file's, else mean)")
      ->check(CLI::IsMember({"mean", "cls", "last", "none"}));
  cmd->add_flag("--normalize", args->normalize, "scale each vector to unit length (L2)");
  cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)");
  cmd->callback([args] {
    const auto model = llm::Model::load(args->model);
    const auto vocab = llm::Vocab::from_gguf(*model->file());
    const llm::Pooling pooling =
        args->pooling.empty() ? llm::default_pooling(*model) : *llm::parse_pooling(args->pooling);
    const std::vector<llm::Token> tokens = vocab.encode(args->prompt, /*add_special=*/true);
    if (tokens.empty()) throw Error(ErrorCode::InvalidArgument, "the prompt has no tokens");
    llm::SessionOptions so;
    so.embeddings = true;
    so.n_threads = args->threads;
    so.n_ctx = std::max<int64_t>(static_cast<int64_t>(tokens.size()),
                                 std::min<int64_t>(model->hparams().n_ctx_train, 4096));
    so.n_batch = so.n_ctx;  // an encoder sees the whole text in one batch
    llm::Session session(*model, so);
    const std::vector<float> v = llm::embed(session, tokens, pooling, args->normalize);
    const size_t n_embd = static_cast<size_t>(model->hparams().n_embd);
    for (size_t o = 0; o < v.size(); o += n_embd) {
      std::string line;
      for (size_t j = 0; j < n_embd; ++j)
        fmt::format_to(std::back_inserter(line), "{}{:.6f}", j ? " " : "", v[o + j]);
      fmt::print("{}\n", line);
    }
  });
}

}  // namespace tessera::cli
