// `tessera chat-template`: render a conversation through a chat template, printing the prompt exactly.
#include "tessera/llm/chat_template.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "tessera/error.h"
#include "tessera/gguf.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {
namespace {

struct ChatTemplateArgs {
  std::string model, template_file, messages_file;
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token, eos_token;
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, std::string("cannot open the ") + what + " " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error(ErrorCode::Io, std::string("cannot read the ") + what + " " + path);
  return ss.str();
}

void run(const ChatTemplateArgs& a) {
  if (a.model.empty() == a.template_file.empty())
    throw Error(ErrorCode::InvalidArgument, "give either -m MODEL.gguf or --template FILE");
  const llm::ChatRequest request =
      llm::parse_chat_request(read_file(a.messages_file, "messages file"), a.messages_file);
  llm::ChatOptions options;
  options.add_generation_prompt = a.add_generation_prompt || request.add_generation_prompt.value_or(false);
  options.extra = request.extra;
  std::optional<llm::ChatTemplate> tmpl;
  if (!a.model.empty()) {
    const auto file = gguf::File::open(a.model);
    tmpl.emplace(llm::ChatTemplate::from_gguf(file));
    // The vocabulary's BOS/EOS texts, unless the file has no vocabulary the tokenizer reads.
    const auto vocab = llm::Vocab::from_gguf(file);
    if (vocab.bos() != llm::kNoToken) options.bos_token = vocab.text(vocab.bos());
    if (vocab.eos() != llm::kNoToken) options.eos_token = vocab.text(vocab.eos());
  } else {
    tmpl.emplace(read_file(a.template_file, "template"));
  }
  if (request.bos_token) options.bos_token = *request.bos_token;
  if (request.eos_token) options.eos_token = *request.eos_token;
  if (a.bos_token) options.bos_token = *a.bos_token;
  if (a.eos_token) options.eos_token = *a.eos_token;
  const std::string prompt = tmpl->apply(request.messages, options);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_chat_template(CLI::App& app) {
  auto args = std::make_shared<ChatTemplateArgs>();
  auto* cmd = app.add_subcommand("chat-template",
                                 "Render a conversation through a chat template and print the prompt");
  cmd->add_option("-m,--model", args->model, "GGUF file whose tokenizer.chat_template to use");
  cmd->add_option("--template", args->template_file, "Jinja template file");
  cmd->add_option("--messages", args->messages_file,
                  "JSON file: an array of {\"role\", \"content\"} messages, or an object with \"messages\", "
                  "\"add_generation_prompt\", \"bos_token\", \"eos_token\" and other template variables")
      ->required();
  cmd->add_flag("--add-generation-prompt", args->add_generation_prompt,
                "end with the assistant's turn header");
  cmd->add_option("--bos-token", args->bos_token,
                  "BOS text (default: the model's, else the messages file's)");
  cmd->add_option("--eos-token", args->eos_token,
                  "EOS text (default: the model's, else the messages file's)");
  cmd->callback([args] { run(*args); });
}

}  // namespace tessera::cli
