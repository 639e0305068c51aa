// `tessera run -cnv`: multi-turn chat. Each turn renders the whole conversation with the chat
// template, tokenizes it, and evaluates only the suffix beyond the tokens already in the KV cache
// (llm::Generator keeps the common prefix and removes anything after it from the cache). A Harmony
// model (gpt-oss) replies in channels: the final one is shown, the analysis kept as the turn's
// "thinking" (which the template drops from later turns).
#include "chat.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "progress.h"
#include "tessera/error.h"
#include "tessera/llm/chat_template.h"
#include "tessera/llm/generator.h"
#include "tessera/llm/harmony.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

namespace tessera::cli {
namespace {

std::atomic<bool> g_generating{false};
std::atomic<bool> g_interrupted{false};

// Ctrl-C: while a reply streams, stop it; otherwise end the program (as an interrupted read would).
void on_sigint(int) {
  if (g_generating.load()) {
    g_interrupted.store(true);
    return;
  }
  const char msg[] = "\n";
  (void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  _exit(130);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, "cannot open the chat template file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

void run_chat(const ChatSettings& s) {
  llm::LoadOptions lo;
  lo.n_gpu_layers = s.n_gpu_layers;
  lo.device = s.device;
  lo.use_mmap = !s.no_mmap;
  ProgressBar bar("loading");
  lo.progress = [&](size_t done, size_t total) { bar.update(done, total); };
  auto model = llm::Model::load(s.model, lo);
  const gguf::File& file = *model->file();
  std::optional<std::string> source =
      s.template_file.empty() ? llm::chat_template_source(file) : read_text(s.template_file);
  if (!source)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("{} has no chat template ({}): give one with --chat-template-file FILE", s.model,
                            llm::kChatTemplateKey));
  const llm::ChatTemplate tmpl(*source);
  const auto vocab = llm::Vocab::from_gguf(file);
  llm::SessionOptions so;
  so.n_ctx = s.n_ctx;
  so.n_threads = s.threads;
  llm::Session session(*model, so);
  llm::Sampler sampler(s.sampling);

  llm::ChatOptions options = llm::chat_options_for(vocab);
  options.add_generation_prompt = true;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!s.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", s.system_prompt}});

  std::signal(SIGINT, on_sigint);
  // Keeps what the cache holds between turns: each turn evaluates only what the conversation adds.
  llm::Generator generator(session, vocab);
  llm::GenerateOptions go;
  go.max_tokens = s.n_predict;
  go.cancel = &g_interrupted;
  std::string reply;
  auto show = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  // Harmony: the reply's structure is in control tokens; the final channel is shown.
  const bool harmony = llm::uses_harmony(vocab, *source);
  std::optional<llm::HarmonyTokens> reader;
  if (harmony) {
    go.on_token = [&](llm::Token id) { reader->push(id); };
  } else {
    go.on_text = [&](std::string_view piece) {
      reply += piece;
      show(piece);
      return true;
    };
  }
  std::string line;
  int turn = 0;  // the user's turns (the system message is none)
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    ++turn;
    messages.push_back({{"role", "user"}, {"content", line}});
    // What the user typed is plain text: only the template's own text spells control tokens.
    const std::vector<llm::Token> tokens =
        llm::tokenize_chat_prompt(vocab, tmpl.render_prompt(messages, options), options);
    if (static_cast<int64_t>(tokens.size()) + 1 > session.n_ctx())
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("the conversation has {} tokens, more than the context of {}", tokens.size(),
                              session.n_ctx()));
    reply.clear();
    if (harmony) reader.emplace(vocab, show);
    g_interrupted.store(false);
    g_generating.store(true);
    const llm::GenerateResult r = generator.generate(tokens, sampler, go);
    g_generating.store(false);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (r.end == llm::GenerateEnd::ContextFull)
      std::fprintf(stderr, "[the reply stopped: the context of %lld tokens is full (-c sets it)]\n",
                   static_cast<long long>(session.n_ctx()));
    fmt::print(stderr, "[turn {}: {} prompt tokens, {} cached, {} evaluated]\n", turn, tokens.size(),
               r.cached_tokens, tokens.size() - r.cached_tokens);
    if (harmony) {
      reader->finish();
      const std::string thinking = reader->reader().channel_text("analysis");
      fmt::print(stderr, "[{} characters of analysis not shown]\n", thinking.size());
      messages.push_back({{"role", "assistant"},
                          {"content", reader->reader().channel_text("final")},
                          {"thinking", thinking}});
    } else {
      messages.push_back({{"role", "assistant"}, {"content", reply}});
    }
  }
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace tessera::cli
