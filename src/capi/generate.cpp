// Generation in a context's sequence 0 through llm::Generator.
#include <fmt/format.h>

#include "capi/handles.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

namespace {

tessera_finish finish_of(tessera::llm::GenerateEnd end) {
  using tessera::llm::GenerateEnd;
  switch (end) {
    case GenerateEnd::EndOfGeneration:
      return TESSERA_FINISH_EOG;
    case GenerateEnd::Stop:
      return TESSERA_FINISH_STOP;
    case GenerateEnd::Cancelled:
      return TESSERA_FINISH_CANCELLED;
    case GenerateEnd::Length:
    case GenerateEnd::ContextFull:
      break;
  }
  return TESSERA_FINISH_LENGTH;
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
    llm::GenerateOptions o;
    o.max_tokens = p.n_predict;
    for (size_t i = 0; i < p.n_stop; ++i) {
      if (p.stop[i] == nullptr) fail(TESSERA_INVALID_ARGUMENT, fmt::format("stop string {} is NULL", i));
      o.stop.emplace_back(p.stop[i]);
    }
    o.stop_at_eos = p.ignore_eos == 0;
    if (p.on_text != nullptr)
      o.on_text = [&p](std::string_view text) {
        return p.on_text(text.data(), text.size(), p.user_data) != 0;
      };
    context->cancel.store(false);
    o.cancel = &context->cancel;
    const llm::GenerateResult r =
        context->generator->generate(std::span<const int32_t>(prompt, n_prompt), *sampler->sampler, o);
    // The outputs of the last decode are the generator's last logits.
    const std::span<const float> logits = context->generator->logits();
    context->outputs.assign(logits.begin(), logits.end());
    context->n_outputs = 1;
    if (result != nullptr) {
      tessera_generate_result out{};
      out.finish = finish_of(r.end);
      out.n_prompt = r.prompt_tokens;
      out.n_cached = r.cached_tokens;
      out.n_generated = r.generated;
      out.prompt_ms = r.prompt_ms;
      out.generate_ms = r.generate_ms;
      *result = out;
    }
  });
}

}  // extern "C"
