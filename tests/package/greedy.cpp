// greedy_cxx MODEL PROMPT N: the prompt, then N greedy tokens of text, as `tessera run --temp 0`
// prints them, through the C++ API.
#include <tessera/error.h>
#include <tessera/llm/model.h>
#include <tessera/llm/sampler.h>
#include <tessera/llm/session.h>
#include <tessera/llm/token_streamer.h>
#include <tessera/llm/vocab.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) try {
  using namespace tessera::llm;
  if (argc != 4) return 2;
  auto model = Model::load(argv[1]);
  const Vocab vocab = Vocab::from_gguf(*model->file());
  Session session(*model);
  const std::string prompt = argv[2];
  const std::vector<Token> tokens = vocab.encode(prompt, /*add_special=*/true);
  SamplerOptions options;
  options.temperature = 0.0f;
  Sampler sampler(options);
  for (Token t : tokens) sampler.accept(t);
  std::fputs(prompt.c_str(), stdout);
  std::vector<float> logits = session.decode(tokens);
  TokenStreamer streamer(vocab);
  for (int i = 0, n = std::atoi(argv[3]); i < n; ++i) {
    const Token next = sampler.sample(logits);
    if (vocab.is_end_of_generation(next)) break;
    std::fputs(streamer.push(next).c_str(), stdout);
    if (session.n_past() >= session.n_ctx()) break;
    logits = session.decode(std::span<const Token>(&next, 1));
  }
  std::fputs((streamer.finish() + "\n").c_str(), stdout);
  return 0;
} catch (const tessera::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
