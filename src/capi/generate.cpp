// Generation in a context's sequence 0: prefix reuse, sampling, stop strings, streamed text.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "capi/handles.h"
#include "tessera/llm/stop_text.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

namespace tessera::capi {
void decode_batch(tessera_context* context, const llm::Batch& batch);
}

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Decodes tokens into sequence 0 at positions from `pos`, the last one's logits wanted.
void decode_run(tessera_context* context, std::span<const int32_t> tokens, int32_t pos) {
  tessera::llm::Batch b;
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], pos + static_cast<int32_t>(i), 0, i + 1 == tokens.size());
  tessera::capi::decode_batch(context, b);
}

}  // namespace

extern "C" {

tessera_generate_params tessera_generate_default_params(void) {
  tessera_generate_params p{};
  p.struct_size = sizeof p;
  p.n_predict = 128;
  return p;
}

tessera_status tessera_generate(tessera_context* context, tessera_sampler* sampler, const int32_t* prompt,
                                size_t n_prompt, const tessera_generate_params* params,
                                tessera_generate_result* result) {
  using namespace tessera;
  return guarded([&] {
    require(context, "context");
    require(sampler, "sampler");
    if (n_prompt == 0) fail(TESSERA_INVALID_ARGUMENT, "the prompt is empty");
    require(prompt, "prompt");
    if (context->embeddings) fail(TESSERA_INVALID_ARGUMENT, "an embeddings context cannot generate");
    const tessera_generate_params p =
        capi::read_params(params, tessera_generate_default_params(), "tessera_generate_params");
    if (p.n_predict < 0)
      fail(TESSERA_INVALID_ARGUMENT, fmt::format("n_predict is negative ({})", p.n_predict));
    if (p.n_stop > 0) require(p.stop, "stop");
    std::vector<std::string> stops;
    for (size_t i = 0; i < p.n_stop; ++i) {
      if (p.stop[i] == nullptr) fail(TESSERA_INVALID_ARGUMENT, fmt::format("stop string {} is NULL", i));
      stops.emplace_back(p.stop[i]);
    }
    const llm::Vocab& vocab = *context->model->vocab;
    llm::StopText text(vocab, std::move(stops));
    llm::Session& s = *context->session;
    llm::KvCache& cache = s.cache();
    const std::span<const int32_t> tokens(prompt, n_prompt);
    context->cancel.store(false);
    tessera_generate_result r{};
    r.n_prompt = n_prompt;

    // Reuse what sequence 0 holds of the prompt; at least the last token is evaluated again, for
    // its logits.
    std::vector<int32_t>& held = context->generated_prefix;
    if (held.empty() || static_cast<size_t>(cache.seq_pos_max(0) + 1) != held.size()) held.clear();
    size_t common = 0;
    while (common < held.size() && common < n_prompt && held[common] == prompt[common]) ++common;
    common = std::min(common, n_prompt - 1);
    cache.seq_remove(0, static_cast<int32_t>(common), -1);
    held.resize(common);
    const int64_t free_cells = cache.size() - cache.used();
    if (static_cast<int64_t>(n_prompt - common) > free_cells)
      fail(TESSERA_CONTEXT_FULL,
           fmt::format("the prompt has {} tokens to evaluate and the context {} free cells",
                       n_prompt - common, free_cells));
    r.n_cached = common;
    for (int32_t t : tokens) sampler->sampler->accept(t);
    const auto t_prompt = std::chrono::steady_clock::now();
    decode_run(context, tokens.subspan(common), static_cast<int32_t>(common));
    held.assign(tokens.begin(), tokens.end());
    r.prompt_ms = ms_since(t_prompt);

    const auto t_gen = std::chrono::steady_clock::now();
    r.finish = TESSERA_FINISH_LENGTH;
    auto hand_out = [&](const std::string& piece) {
      if (!piece.empty() && p.on_text != nullptr && p.on_text(piece.data(), piece.size(), p.user_data) == 0)
        r.finish = TESSERA_FINISH_CANCELLED;
    };
    while (r.n_generated < static_cast<size_t>(p.n_predict)) {
      if (context->cancel.load()) {
        r.finish = TESSERA_FINISH_CANCELLED;
        break;
      }
      const int32_t next =
          sampler->sampler->sample(std::span<const float>(context->outputs.data(), context->row));
      if (vocab.is_end_of_generation(next) && !p.ignore_eos) {
        r.finish = TESSERA_FINISH_EOG;
        break;
      }
      ++r.n_generated;
      hand_out(text.push(next));
      if (text.stopped()) {
        r.finish = TESSERA_FINISH_STOP;
        break;
      }
      if (r.finish == TESSERA_FINISH_CANCELLED) break;
      if (r.n_generated >= static_cast<size_t>(p.n_predict) || cache.used() >= cache.size()) break;
      decode_run(context, std::span<const int32_t>(&next, 1), static_cast<int32_t>(held.size()));
      held.push_back(next);
    }
    if (r.finish != TESSERA_FINISH_CANCELLED) hand_out(text.finish());
    r.generate_ms = ms_since(t_gen);
    if (result != nullptr) *result = r;
  });
}

}  // extern "C"
