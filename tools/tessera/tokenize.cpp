// `tessera tokenize`: print the token ids of a text.
#include <fmt/format.h>

#include "commands.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {

void add_tokenize(CLI::App& app) {
  struct Args {
    std::string model, prompt;
    bool no_bos = false;
    bool parse_special = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text, space separated");
  cmd->add_option("-m,--model", args->model, "GGUF model or vocabulary file")->required();
  cmd->add_option("-p,--prompt", args->prompt, "text to tokenize")->required();
  cmd->add_flag("--no-bos", args->no_bos, "do not add the BOS (or EOS) token the vocabulary asks for");
  cmd->add_flag("--parse-special", args->parse_special,
                "control tokens written in the text (e.g. <|eot_id|>) become their ids");
  cmd->callback([args] {
    const auto file = gguf::File::open(args->model);
    const auto vocab = llm::Vocab::from_gguf(file);
    const auto ids = vocab.encode(args->prompt, !args->no_bos, args->parse_special);
    fmt::print("{}\n", fmt::join(ids, " "));
  });
}

}  // namespace tessera::cli
