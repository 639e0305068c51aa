// Saved sequences: a sequence's tokens and K/V to a file and back (llm/session_file.h).
#include <fmt/format.h>

#include "capi/handles.h"
#include "tessera/llm/session_file.h"

using tessera::capi::fail;
using tessera::capi::guarded;
using tessera::capi::require;

extern "C" {

tessera_status tessera_state_save(const tessera_context* context, int32_t seq, const int32_t* tokens,
                                  size_t n_tokens, const char* path) {
  return guarded([&] {
    require(context, "context");
    require(path, "path");
    if (seq < 0) fail(TESSERA_INVALID_ARGUMENT, fmt::format("sequence id {} is negative", seq));
    std::span<const int32_t> held(tokens, n_tokens);
    if (tokens == nullptr) {
      if (n_tokens != 0) require(tokens, "tokens");
      // Sequence 0 as tessera_generate left it.
      const int32_t pos_max = context->session->cache().seq_pos_max(seq);
      if (seq != 0 || static_cast<size_t>(pos_max + 1) != context->generator->held().size())
        fail(TESSERA_INVALID_ARGUMENT,
             fmt::format(
                 "no tokens given for sequence {}: only sequence 0 after tessera_generate knows its own",
                 seq));
      held = context->generator->held();
    }
    tessera::llm::save_sequence_state(*context->session, seq, held, path);
  });
}

tessera_status tessera_state_load(tessera_context* context, int32_t seq, const char* path, int32_t* tokens,
                                  size_t capacity, size_t* n_tokens) {
  return guarded([&] {
    require(context, "context");
    require(path, "path");
    require(n_tokens, "n_tokens");
    if (seq < 0) fail(TESSERA_INVALID_ARGUMENT, fmt::format("sequence id {} is negative", seq));
    std::vector<int32_t> loaded = tessera::llm::load_sequence_state(*context->session, seq, path);
    if (seq == 0) context->generator->adopt(loaded);  // tessera_generate reuses it as a prefix
    if (tokens != nullptr || capacity > 0) {
      try {
        tessera::capi::copy_tokens(loaded, tokens, capacity, n_tokens);
      } catch (...) {
        context->session->cache().seq_clear(seq);
        if (seq == 0) context->generator->forget();
        throw;
      }
    } else {
      *n_tokens = loaded.size();
    }
  });
}

}  // extern "C"
