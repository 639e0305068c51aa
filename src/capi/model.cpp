// Models, their vocabularies and chat templates.
#include <fmt/format.h>

#include <algorithm>

#include "capi/handles.h"
#include "tessera/error.h"
#include "tessera/llm/token_streamer.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

namespace {

// The load's progress callback said stop.
struct LoadCancelled {};

const tessera::llm::Vocab& vocab_of(const tessera_model* model) {
  require(model, "model");
  return *model->vocab;
}

std::string template_for(const tessera_model* model, const char* source) {
  if (source != nullptr) return source;
  if (!model->chat_template)
    fail(TESSERA_INVALID_ARGUMENT, "the model has no chat template (tokenizer.chat_template): pass one");
  return *model->chat_template;
}

nlohmann::ordered_json parse_json(const char* text, const char* what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(TESSERA_INVALID_ARGUMENT, fmt::format("{} is not JSON: {}", what, e.what()));
  }
}

// Renders messages (a JSON array) with variables (a JSON object or NULL).
tessera::llm::RenderedPrompt render(const tessera_model* model, const char* source, const char* messages_json,
                                    const char* variables_json, int add_generation_prompt,
                                    tessera::llm::ChatOptions& options) {
  require(model, "model");
  require(messages_json, "messages_json");
  const tessera::llm::ChatTemplate tmpl(template_for(model, source));
  options = tessera::llm::chat_options_for(*model->vocab);
  options.add_generation_prompt = add_generation_prompt != 0;
  if (variables_json != nullptr) {
    options.extra = parse_json(variables_json, "variables_json");
    if (!options.extra.is_object()) fail(TESSERA_INVALID_ARGUMENT, "variables_json is not a JSON object");
  }
  return tmpl.render_prompt(parse_json(messages_json, "messages_json"), options);
}

}  // namespace

extern "C" {

tessera_model_params tessera_model_default_params(void) {
  tessera_model_params p{};
  p.struct_size = sizeof p;
  p.use_mmap = 1;
  return p;
}

tessera_status tessera_model_load(const char* path, const tessera_model_params* params,
                                  tessera_model** model) {
  using namespace tessera;
  return capi::guarded([&] {
    require(path, "path");
    require(model, "model");
    const tessera_model_params p =
        capi::read_params(params, tessera_model_default_params(), "tessera_model_params");
    if (p.n_gpu_layers < 0)
      fail(TESSERA_INVALID_ARGUMENT, fmt::format("n_gpu_layers is negative ({})", p.n_gpu_layers));
    llm::LoadOptions lo;
    lo.n_gpu_layers = p.n_gpu_layers;
    lo.device = capi::text_of(p.device);
    lo.use_mmap = p.use_mmap != 0;
    // The callback sees 0 first and 1 last, whatever the load copies in between (a mapped file
    // may copy nothing), so a caller can always cancel.
    auto report = [&p](float fraction) {
      if (p.progress != nullptr && p.progress(fraction, p.progress_user_data) == 0) throw LoadCancelled{};
    };
    lo.progress = [&report](size_t done, size_t total) {
      if (total > 0 && done < total)
        report(static_cast<float>(static_cast<double>(done) / static_cast<double>(total)));
    };
    auto out = std::make_unique<tessera_model>();
    try {
      report(0.0f);
      out->model = llm::Model::load(path, lo);
      report(1.0f);
    } catch (const LoadCancelled&) {
      fail(TESSERA_CANCELLED, fmt::format("loading '{}' was cancelled by the progress callback", path));
    }
    out->vocab = std::make_unique<llm::Vocab>(llm::Vocab::from_gguf(*out->model->file()));
    out->chat_template = llm::chat_template_source(*out->model->file());
    *model = out.release();
  });
}

void tessera_model_free(tessera_model* model) { delete model; }

tessera_status tessera_model_get_info(const tessera_model* model, tessera_model_info* info) {
  return guarded([&] {
    require(model, "model");
    require(info, "info");
    const tessera::llm::Hparams& h = model->model->hparams();
    tessera_model_info out{};
    const size_t n = std::min(h.arch.size(), sizeof out.architecture - 1);
    std::memcpy(out.architecture, h.arch.data(), n);
    out.n_vocab = h.n_vocab;
    out.n_embd = h.n_embd;
    out.n_layer = h.n_layer;
    out.n_ctx_train = h.n_ctx_train;
    out.weight_bytes = model->model->weight_bytes();
    out.has_chat_template = model->chat_template ? 1 : 0;
    *info = out;
  });
}

tessera_status tessera_tokenize(const tessera_model* model, const char* text, size_t text_length,
                                int add_special, int parse_special, int32_t* tokens, size_t capacity,
                                size_t* n_tokens) {
  return guarded([&] {
    const auto& vocab = vocab_of(model);
    if (text == nullptr && text_length > 0) require(text, "text");
    const auto ids =
        vocab.encode(std::string_view(text ? text : "", text_length), add_special != 0, parse_special != 0);
    tessera::capi::copy_tokens(ids, tokens, capacity, n_tokens);
  });
}

tessera_status tessera_detokenize(const tessera_model* model, const int32_t* tokens, size_t n_tokens,
                                  char* text, size_t capacity, size_t* length) {
  return guarded([&] {
    const auto& vocab = vocab_of(model);
    if (n_tokens > 0) require(tokens, "tokens");
    const std::string s = vocab.decode(std::span<const int32_t>(tokens, n_tokens), /*remove_special=*/true);
    tessera::capi::copy_text(s, text, capacity, length);
  });
}

tessera_status tessera_token_to_piece(const tessera_model* model, int32_t token, char* text, size_t capacity,
                                      size_t* length) {
  return guarded(
      [&] { tessera::capi::copy_text(vocab_of(model).token_to_piece(token), text, capacity, length); });
}

int32_t tessera_token_bos(const tessera_model* model) { return model ? model->vocab->bos() : -1; }
int32_t tessera_token_eos(const tessera_model* model) { return model ? model->vocab->eos() : -1; }
int tessera_token_is_end_of_generation(const tessera_model* model, int32_t token) {
  return model && model->vocab->is_end_of_generation(token) ? 1 : 0;
}

tessera_status tessera_chat_apply_template(const tessera_model* model, const char* template_source,
                                           const tessera_chat_message* messages, size_t n_messages,
                                           int add_generation_prompt, char* text, size_t capacity,
                                           size_t* length) {
  return guarded([&] {
    require(model, "model");
    if (n_messages > 0) require(messages, "messages");
    std::vector<tessera::llm::ChatMessage> list;
    for (size_t i = 0; i < n_messages; ++i) {
      if (messages[i].role == nullptr || messages[i].content == nullptr)
        fail(TESSERA_INVALID_ARGUMENT, fmt::format("message {} has a NULL role or content", i));
      list.push_back({messages[i].role, messages[i].content});
    }
    const tessera::llm::ChatTemplate tmpl(template_for(model, template_source));
    tessera::llm::ChatOptions options = tessera::llm::chat_options_for(*model->vocab);
    options.add_generation_prompt = add_generation_prompt != 0;
    tessera::capi::copy_text(tmpl.apply(list, options), text, capacity, length);
  });
}

tessera_status tessera_chat_apply_template_json(const tessera_model* model, const char* template_source,
                                                const char* messages_json, const char* variables_json,
                                                int add_generation_prompt, char* text, size_t capacity,
                                                size_t* length) {
  return guarded([&] {
    tessera::llm::ChatOptions options;
    const auto prompt =
        render(model, template_source, messages_json, variables_json, add_generation_prompt, options);
    tessera::capi::copy_text(prompt.text, text, capacity, length);
  });
}

tessera_status tessera_chat_tokenize(const tessera_model* model, const char* template_source,
                                     const char* messages_json, const char* variables_json,
                                     int add_generation_prompt, int32_t* tokens, size_t capacity,
                                     size_t* n_tokens) {
  return guarded([&] {
    tessera::llm::ChatOptions options;
    const auto prompt =
        render(model, template_source, messages_json, variables_json, add_generation_prompt, options);
    tessera::capi::copy_tokens(tessera::llm::tokenize_chat_prompt(*model->vocab, prompt, options), tokens,
                               capacity, n_tokens);
  });
}

}  // extern "C"
