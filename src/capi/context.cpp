// Contexts: a Session (KV cache, batches), the last decode's outputs, sequences, embeddings.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "capi/handles.h"
#include "tessera/error.h"
#include "tessera/llm/embeddings.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

namespace {

tessera::llm::Session& session_of(tessera_context* context) {
  require(context, "context");
  return *context->session;
}

// Sequence 0 may no longer hold what tessera_generate left there.
void touched(tessera_context* context, int32_t seq) {
  if (seq <= 0) context->generator->forget();
}

const float* output_row(const tessera_context* context, size_t output, bool want_embeddings) {
  require(context, "context");
  if (want_embeddings != context->embeddings)
    fail(TESSERA_INVALID_ARGUMENT, want_embeddings ? "the context computes logits, not embeddings "
                                                     "(tessera_context_params.embeddings)"
                                                   : "an embeddings context computes no logits");
  if (output >= context->n_outputs)
    fail(TESSERA_INVALID_ARGUMENT,
         fmt::format("output {} of the last decode, which has {}", output, context->n_outputs));
  return context->outputs.data() + output * context->row;
}

// Decodes a batch into the context's outputs (ContextFull, cache unchanged, when it does not fit).
void decode_batch(tessera_context* context, const tessera::llm::Batch& batch) {
  context->n_outputs = 0;
  context->outputs = context->session->decode(batch);
  context->n_outputs = context->outputs.size() / context->row;
}

}  // namespace

extern "C" {

tessera_context_params tessera_context_default_params(void) {
  tessera_context_params p{};
  p.struct_size = sizeof p;
  p.n_batch = 512;
  return p;
}

tessera_status tessera_context_new(const tessera_model* model, const tessera_context_params* params,
                                   tessera_context** context) {
  using namespace tessera;
  return guarded([&] {
    require(model, "model");
    require(context, "context");
    const tessera_context_params p =
        capi::read_params(params, tessera_context_default_params(), "tessera_context_params");
    if (p.n_ctx < 0) fail(TESSERA_INVALID_ARGUMENT, fmt::format("n_ctx is negative ({})", p.n_ctx));
    if (p.n_threads < 0)
      fail(TESSERA_INVALID_ARGUMENT, fmt::format("n_threads is negative ({})", p.n_threads));
    llm::SessionOptions so;
    so.n_ctx = p.n_ctx;
    so.n_batch = p.n_batch;
    so.n_threads = p.n_threads;
    so.kv_type = p.kv_f32 ? DType::F32 : DType::F16;
    so.flash_attn = p.flash_attn != 0;
    so.embeddings = p.embeddings != 0;
    auto out = std::make_unique<tessera_context>();
    out->model = model;
    out->session = std::make_unique<llm::Session>(*model->model, so);
    out->generator = std::make_unique<llm::Generator>(*out->session, *model->vocab, 0);
    out->embeddings = so.embeddings;
    out->row =
        static_cast<size_t>(so.embeddings ? model->model->hparams().n_embd : model->model->hparams().n_vocab);
    *context = out.release();
  });
}

void tessera_context_free(tessera_context* context) { delete context; }

int64_t tessera_context_n_ctx(const tessera_context* context) {
  return context ? context->session->n_ctx() : 0;
}
int64_t tessera_context_n_used(const tessera_context* context) {
  return context ? context->session->cache().used() : 0;
}

tessera_status tessera_decode(tessera_context* context, const tessera_batch* batch) {
  return guarded([&] {
    session_of(context);
    require(batch, "batch");
    if (batch->n_tokens == 0) fail(TESSERA_INVALID_ARGUMENT, "the batch has no tokens");
    require(batch->tokens, "batch->tokens");
    require(batch->positions, "batch->positions");
    require(batch->seq_ids, "batch->seq_ids");
    tessera::llm::Batch b;
    for (size_t i = 0; i < batch->n_tokens; ++i) {
      const bool wanted = batch->logits ? batch->logits[i] != 0 : i + 1 == batch->n_tokens;
      b.add(batch->tokens[i], batch->positions[i], batch->seq_ids[i], wanted);
      touched(context, batch->seq_ids[i]);
    }
    decode_batch(context, b);
  });
}

size_t tessera_n_outputs(const tessera_context* context) { return context ? context->n_outputs : 0; }

tessera_status tessera_get_logits(const tessera_context* context, size_t output, const float** logits) {
  return guarded([&] {
    require(logits, "logits");
    *logits = output_row(context, output, false);
  });
}

tessera_status tessera_get_embeddings(const tessera_context* context, size_t output,
                                      const float** embedding) {
  return guarded([&] {
    require(embedding, "embedding");
    *embedding = output_row(context, output, true);
  });
}

tessera_status tessera_seq_remove(tessera_context* context, int32_t seq, int32_t p0, int32_t p1) {
  return guarded([&] {
    session_of(context).cache().seq_remove(seq, p0, p1);
    touched(context, seq);
  });
}

tessera_status tessera_seq_copy(tessera_context* context, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  return guarded([&] {
    if (src < 0 || dst < 0) fail(TESSERA_INVALID_ARGUMENT, fmt::format("sequence ids {} and {}", src, dst));
    session_of(context).cache().seq_copy(src, dst, p0, p1);
    touched(context, dst);
  });
}

int32_t tessera_seq_pos_max(const tessera_context* context, int32_t seq) {
  return context ? context->session->cache().seq_pos_max(seq) : -1;
}

tessera_status tessera_context_clear(tessera_context* context) {
  return guarded([&] {
    session_of(context).reset();
    touched(context, -1);
    context->n_outputs = 0;
  });
}

void tessera_context_cancel(tessera_context* context) {
  if (context) context->cancel.store(true);
}

tessera_status tessera_embed(tessera_context* context, const int32_t* tokens, size_t n_tokens,
                             tessera_pooling pooling, int normalize, float* embedding, size_t capacity,
                             size_t* n_embd) {
  return guarded([&] {
    tessera::llm::Session& s = session_of(context);
    require(n_embd, "n_embd");
    if (!context->embeddings)
      fail(TESSERA_INVALID_ARGUMENT,
           "tessera_embed needs an embeddings context (tessera_context_params.embeddings)");
    if (n_tokens == 0) fail(TESSERA_INVALID_ARGUMENT, "no tokens to embed");
    require(tokens, "tokens");
    const int pooling_value = tessera::capi::enum_value(pooling);
    if (pooling_value != TESSERA_POOLING_MEAN && pooling_value != TESSERA_POOLING_CLS &&
        pooling_value != TESSERA_POOLING_LAST)
      fail(TESSERA_INVALID_ARGUMENT, fmt::format("pooling {} is none of mean, cls, last", pooling_value));
    const size_t row = context->row;
    *n_embd = row;
    if (embedding == nullptr || capacity < row)
      fail(TESSERA_BUFFER_TOO_SMALL, fmt::format("an embedding has {} floats; the buffer holds {}", row,
                                                 embedding == nullptr ? 0 : capacity));
    // The pooling is llm's (tessera/llm/embeddings.h); the C enum's values map by name.
    const tessera::llm::Pooling p = pooling == TESSERA_POOLING_MEAN  ? tessera::llm::Pooling::Mean
                                    : pooling == TESSERA_POOLING_CLS ? tessera::llm::Pooling::Cls
                                                                     : tessera::llm::Pooling::Last;
    touched(context, 0);
    context->n_outputs = 0;  // the last decode's outputs are gone with its cells
    const std::vector<float> pooled = tessera::llm::embed(s, {tokens, n_tokens}, p, normalize != 0, 0);
    std::copy(pooled.begin(), pooled.end(), embedding);
  });
}

}  // extern "C"
