// `tessera run -cnv`: multi-turn chat. Each turn renders the whole conversation with the chat
// template, tokenizes it, and evaluates only the suffix beyond the tokens already in the KV cache
// (the common prefix is kept, anything after it is removed from the cache).
#include "chat.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "progress.h"
#include "tessera/error.h"
#include "tessera/llm/chat_template.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/token_streamer.h"
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

  llm::ChatOptions options;
  options.add_generation_prompt = true;
  if (vocab.bos() != llm::kNoToken) options.bos_token = vocab.text(vocab.bos());
  if (vocab.eos() != llm::kNoToken) options.eos_token = vocab.text(vocab.eos());
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!s.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", s.system_prompt}});

  std::signal(SIGINT, on_sigint);
  std::vector<llm::Token> cached;  // the tokens whose K/V the cache holds, positions 0..
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
    const llm::RenderedPrompt prompt = tmpl.render_prompt(messages, options);
    std::vector<llm::Token> tokens =
        vocab.encode_with_plain_ranges(prompt.text, /*add_special=*/false, prompt.data_ranges);
    if (vocab.special().add_bos && vocab.bos() != llm::kNoToken &&
        (tokens.empty() || tokens[0] != vocab.bos()))
      tokens.insert(tokens.begin(), vocab.bos());
    if (static_cast<int64_t>(tokens.size()) + 1 > session.n_ctx())
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("the conversation has {} tokens, more than the context of {}", tokens.size(),
                              session.n_ctx()));
    // Keep the cached prefix the new prompt shares; at least one token is evaluated for logits.
    size_t keep = 0;
    while (keep < cached.size() && keep < tokens.size() && cached[keep] == tokens[keep]) ++keep;
    keep = std::min(keep, tokens.size() - 1);
    session.cache().seq_remove(0, static_cast<llm::Pos>(keep), -1);
    cached.resize(keep);
    const std::span<const llm::Token> fresh(tokens.data() + keep, tokens.size() - keep);
    for (llm::Token t : fresh) sampler.accept(t);
    std::vector<float> logits = session.decode(fresh);
    cached.insert(cached.end(), fresh.begin(), fresh.end());

    std::string reply;
    llm::TokenStreamer streamer(vocab);  // whole UTF-8 characters only
    g_interrupted.store(false);
    g_generating.store(true);
    for (int n = 0; n < s.n_predict && !g_interrupted.load(); ++n) {
      const llm::Token next = sampler.sample(logits);
      if (vocab.is_end_of_generation(next)) break;  // EOS, end of turn, ...
      const std::string piece = streamer.push(next);
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      if (session.n_past() >= session.n_ctx()) {
        if (n + 1 < s.n_predict)
          std::fprintf(stderr, "\n[the reply stopped: the context of %lld tokens is full (-c sets it)]\n",
                       static_cast<long long>(session.n_ctx()));
        break;
      }
      logits = session.decode(std::span<const llm::Token>(&next, 1));
      cached.push_back(next);
    }
    const std::string rest = streamer.finish();
    reply += rest;
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    g_generating.store(false);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    fmt::print(stderr, "[turn {}: {} prompt tokens, {} cached, {} evaluated]\n", turn, tokens.size(), keep,
               fresh.size());
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  std::signal(SIGINT, SIG_DFL);
}

}  // namespace tessera::cli
