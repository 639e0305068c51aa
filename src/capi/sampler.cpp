// The sampler chain.
#include <fmt/format.h>

#include "capi/handles.h"
#include "tessera/llm/grammar.h"
#include "tessera/llm/grammar_matcher.h"
#include "tessera/llm/json_schema.h"
#include "tessera/llm/vocab_trie.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

extern "C" {

tessera_sampler_params tessera_sampler_default_params(void) {
  const tessera::llm::SamplerOptions d;
  tessera_sampler_params p{};
  p.struct_size = sizeof p;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  p.seed = d.seed;
  return p;
}

tessera_status tessera_sampler_new(const tessera_sampler_params* params, tessera_sampler** sampler) {
  return guarded([&] {
    require(sampler, "sampler");
    const tessera_sampler_params p =
        tessera::capi::read_params(params, tessera_sampler_default_params(), "tessera_sampler_params");
    tessera::llm::SamplerOptions o;
    o.temperature = p.temperature;
    o.top_k = p.top_k;
    o.top_p = p.top_p;
    o.min_p = p.min_p;
    o.repeat_penalty = p.repeat_penalty;
    o.repeat_last_n = p.repeat_last_n;
    o.presence_penalty = p.presence_penalty;
    o.frequency_penalty = p.frequency_penalty;
    o.seed = p.seed;
    auto out = std::make_unique<tessera_sampler>();
    out->sampler = std::make_unique<tessera::llm::Sampler>(o);  // refuses options out of range
    out->options = o;
    *sampler = out.release();
  });
}

void tessera_sampler_free(tessera_sampler* sampler) { delete sampler; }

tessera_status tessera_sampler_sample(tessera_sampler* sampler, const float* logits, size_t n_vocab,
                                      int32_t* token) {
  return guarded([&] {
    require(sampler, "sampler");
    require(logits, "logits");
    require(token, "token");
    if (n_vocab == 0) fail(TESSERA_INVALID_ARGUMENT, "n_vocab is 0");
    *token = sampler->sampler->sample(std::span<const float>(logits, n_vocab));
  });
}

tessera_status tessera_sampler_accept(tessera_sampler* sampler, int32_t token) {
  return guarded([&] {
    require(sampler, "sampler");
    if (token < 0) fail(TESSERA_INVALID_ARGUMENT, fmt::format("token {} is negative", token));
    sampler->sampler->accept(token);
  });
}

tessera_status tessera_sampler_set_grammar(tessera_sampler* sampler, const tessera_model* model,
                                           const char* gbnf, const char* json_schema) {
  using namespace tessera::llm;
  return guarded([&] {
    require(sampler, "sampler");
    require(model, "model");
    if ((gbnf == nullptr) == (json_schema == nullptr))
      fail(TESSERA_INVALID_ARGUMENT, "give exactly one of gbnf and json_schema");
    std::shared_ptr<const Grammar> grammar = Grammar::parse(
        gbnf != nullptr ? std::string(gbnf) : json_schema_to_gbnf(std::string_view(json_schema)));
    auto matcher = std::make_unique<GrammarMatcher>(std::move(grammar),
                                                    std::make_shared<const VocabTrie>(*model->vocab));
    sampler->sampler = std::make_unique<Sampler>(sampler->options, std::move(matcher));
  });
}

}  // extern "C"
