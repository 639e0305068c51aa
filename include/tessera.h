/* Tessera's C API: load GGUF models, tokenize, decode batches of several sequences, sample,
 * generate, embed, render chat templates, save and restore sequences, list devices.
 *
 * Plain C (C11), for programs and for bindings in other languages (the Node binding in
 * bindings/node uses it). The library is libtessera (CMake: find_package(tessera), target
 * tessera::c; pkg-config: tessera).
 *
 * Rules every call follows:
 * - Each call returns a tessera_status; TESSERA_OK (0) is success. On failure the output
 *   arguments are untouched and tessera_last_error() gives the message, on the calling thread,
 *   until that thread's next failing call. No call throws, aborts or exits on bad input.
 * - Handles are opaque. A NULL handle or a NULL required pointer is TESSERA_INVALID_ARGUMENT.
 *   The *_free functions accept NULL.
 * - Strings are UTF-8. Sizes are in bytes unless said otherwise. A call writing text into a
 *   caller's buffer always reports the length it needs in *length (without the terminating NUL);
 *   when the buffer is too small (or NULL with capacity 0) it returns TESSERA_BUFFER_TOO_SMALL and
 *   writes nothing, so a caller can ask for the length first. Token arrays work the same way.
 * - Parameter structs start with struct_size (set by the *_default_params functions): a program
 *   built against an older header passes its smaller struct and the library reads only that
 *   much, so fields can be added at the end in a minor version.
 *
 * Threads:
 * - tessera_version, tessera_last_error, tessera_status_name, the device calls and every call
 *   that takes a `const tessera_model*` are thread-safe: a loaded model is immutable and any
 *   number of contexts on any threads may share it.
 * - A tessera_context and a tessera_sampler are used by one thread at a time (callers lock),
 *   except tessera_context_cancel, which any thread may call at any time.
 * - Callbacks run on the thread that made the call.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>

/* The API's version (semver). A change of any declaration below bumps it; the suite's ABI check
 * (tests/capi/tessera_h.abi) fails otherwise. Before 1.0 a minor bump may break the ABI. */
#define TESSERA_VERSION_MAJOR 0
#define TESSERA_VERSION_MINOR 1
#define TESSERA_VERSION_PATCH 0
#define TESSERA_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define TESSERA_API __declspec(dllimport)
#elif defined(__GNUC__)
#define TESSERA_API __attribute__((visibility("default")))
#else
#define TESSERA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status and errors ---- */

typedef enum tessera_status {
  TESSERA_OK = 0,
  TESSERA_INVALID_ARGUMENT = 1, /* a bad argument, flag, size or token id */
  TESSERA_OUT_OF_MEMORY = 2,    /* the host or a device could not allocate */
  TESSERA_DEVICE_ERROR = 3,     /* a device runtime call failed */
  TESSERA_UNSUPPORTED = 4,      /* valid, but not implemented (an architecture, a type) */
  TESSERA_CORRUPT_FILE = 5,     /* a file that breaks its format */
  TESSERA_IO_ERROR = 6,         /* a file could not be opened, read, written or renamed */
  TESSERA_BUFFER_TOO_SMALL = 7, /* the caller's buffer is too small: *length says how much is needed */
  TESSERA_CANCELLED = 8,        /* a callback or tessera_context_cancel stopped the call */
  TESSERA_CONTEXT_FULL = 9,     /* the context has no free cells for the tokens */
  TESSERA_INTERNAL_ERROR = 10   /* a bug in Tessera: please report it with the message */
} tessera_status;

/* "0.1.0": the library's version, which may be newer than the header a program was built with. */
TESSERA_API const char* tessera_version(void);
/* The message of the calling thread's last failed call ("" when none failed). Valid until that
 * thread's next call into the library. */
TESSERA_API const char* tessera_last_error(void);
/* "ok", "invalid argument", ... ("unknown" for a value not in the enum). */
TESSERA_API const char* tessera_status_name(tessera_status status);

/* ---- Devices ---- */

typedef enum tessera_device_kind {
  TESSERA_DEVICE_CPU = 0,
  TESSERA_DEVICE_GPU = 1,
  TESSERA_DEVICE_ACCELERATOR = 2
} tessera_device_kind;

typedef struct tessera_device_info {
  char name[64];         /* "CPU", "OpenCL0", ...: what tessera_model_params.device takes */
  char description[256]; /* vendor, model, driver (cut to fit) */
  tessera_device_kind kind;
  uint64_t memory_total; /* bytes */
  uint64_t memory_free;  /* bytes; memory_total when the runtime cannot tell */
} tessera_device_info;

/* Devices found on this machine: the CPU first, then each runtime's (discovered on first use). */
TESSERA_API tessera_status tessera_device_count(size_t* count);
TESSERA_API tessera_status tessera_device_get(size_t index, tessera_device_info* info);

/* ---- Models ---- */

typedef struct tessera_model tessera_model;

/* Called as the weights load, fraction in [0, 1]. Return 0 to cancel the load (the load then
 * fails with TESSERA_CANCELLED and frees what it allocated), nonzero to go on. */
typedef int (*tessera_progress_fn)(float fraction, void* user_data);

typedef struct tessera_model_params {
  size_t struct_size;   /* sizeof(tessera_model_params) */
  int32_t n_gpu_layers; /* the last N layers (and the output when N > layers) on `device` */
  const char* device;   /* device name (tessera_device_info.name); NULL: the first accelerator */
  int32_t use_mmap;     /* nonzero: map the file (default); 0: read it into memory */
  tessera_progress_fn progress;
  void* progress_user_data;
} tessera_model_params;

TESSERA_API tessera_model_params tessera_model_default_params(void);
/* Loads a GGUF file. An unknown architecture, a missing tensor or an unsupported type is an
 * error naming it, found before any memory is allocated. */
TESSERA_API tessera_status tessera_model_load(const char* path, const tessera_model_params* params,
                                              tessera_model** model);
/* Every context of the model must be freed first. */
TESSERA_API void tessera_model_free(tessera_model* model);

typedef struct tessera_model_info {
  char architecture[32]; /* "llama", "qwen3", ... */
  int64_t n_vocab;
  int64_t n_embd;
  int64_t n_layer;
  int64_t n_ctx_train;
  uint64_t weight_bytes;
  int32_t has_chat_template; /* nonzero when the file carries tokenizer.chat_template */
} tessera_model_info;

TESSERA_API tessera_status tessera_model_get_info(const tessera_model* model, tessera_model_info* info);

/* ---- Tokens ---- */

/* Text to token ids. add_special: BOS (and EOS) as the vocabulary says; parse_special: control
 * tokens written in the text (e.g. "<|im_start|>") become those tokens, else they are text. */
TESSERA_API tessera_status tessera_tokenize(const tessera_model* model, const char* text, size_t text_length,
                                            int add_special, int parse_special, int32_t* tokens,
                                            size_t capacity, size_t* n_tokens);
/* Token ids to text, control tokens (BOS, EOS, ...) left out; NUL-terminated when it fits. */
TESSERA_API tessera_status tessera_detokenize(const tessera_model* model, const int32_t* tokens,
                                              size_t n_tokens, char* text, size_t capacity, size_t* length);
/* One token's text as it is decoded in a stream (possibly part of a UTF-8 character). */
TESSERA_API tessera_status tessera_token_to_piece(const tessera_model* model, int32_t token, char* text,
                                                  size_t capacity, size_t* length);
/* The BOS and EOS ids (-1 when the vocabulary has none) and whether a token ends a generation
 * (EOS, end of turn, ...). */
TESSERA_API int32_t tessera_token_bos(const tessera_model* model);
TESSERA_API int32_t tessera_token_eos(const tessera_model* model);
TESSERA_API int tessera_token_is_end_of_generation(const tessera_model* model, int32_t token);

/* ---- Chat templates ---- */

typedef struct tessera_chat_message {
  const char* role; /* "system", "user", "assistant", "tool", ... */
  const char* content;
} tessera_chat_message;

/* Renders a conversation through a Jinja chat template: `template_source`, or the model's own
 * (tokenizer.chat_template) when NULL. add_generation_prompt: end with an assistant turn's header. */
TESSERA_API tessera_status tessera_chat_apply_template(const tessera_model* model,
                                                       const char* template_source,
                                                       const tessera_chat_message* messages,
                                                       size_t n_messages, int add_generation_prompt,
                                                       char* text, size_t capacity, size_t* length);
/* The same from OpenAI-style messages as a JSON array (content as a string or text parts; other
 * fields such as tool_calls reach the template), with `variables_json` (a JSON object or NULL)
 * as more template variables (tools, enable_thinking, ...). */
TESSERA_API tessera_status tessera_chat_apply_template_json(
    const tessera_model* model, const char* template_source, const char* messages_json,
    const char* variables_json, int add_generation_prompt, char* text, size_t capacity, size_t* length);
/* Renders as tessera_chat_apply_template_json does and tokenizes the prompt so that text from the
 * messages can never spell a control token (a message's "</s>" stays text); the template's own
 * text and its BOS/EOS are read as tokens. This is what generation from messages should use. */
TESSERA_API tessera_status tessera_chat_tokenize(const tessera_model* model, const char* template_source,
                                                 const char* messages_json, const char* variables_json,
                                                 int add_generation_prompt, int32_t* tokens, size_t capacity,
                                                 size_t* n_tokens);

/* ---- Contexts: a KV cache and the evaluation of batches ---- */

typedef struct tessera_context tessera_context;

typedef struct tessera_context_params {
  size_t struct_size; /* sizeof(tessera_context_params) */
  int64_t n_ctx;      /* KV cells for all sequences together; 0: the model's training context, at most 4096 */
  int64_t n_batch;    /* tokens per evaluated micro-batch (default 512) */
  int32_t n_threads;  /* CPU threads; 0: all cores */
  int32_t kv_f32;     /* nonzero: K and V in F32 (default F16) */
  int32_t flash_attn; /* nonzero: the CPU's attention by its online-softmax kernel (slower today) */
  int32_t embeddings; /* nonzero: decodes give hidden states (tessera_get_embeddings), no logits */
} tessera_context_params;

TESSERA_API tessera_context_params tessera_context_default_params(void);
TESSERA_API tessera_status tessera_context_new(const tessera_model* model,
                                               const tessera_context_params* params,
                                               tessera_context** context);
TESSERA_API void tessera_context_free(tessera_context* context);
/* KV cells, and the cells in use. */
TESSERA_API int64_t tessera_context_n_ctx(const tessera_context* context);
TESSERA_API int64_t tessera_context_n_used(const tessera_context* context);

/* Tokens of any sequences, each with its position; logits[i] nonzero asks for token i's output
 * (NULL: only the last token's). Sequences are numbered from 0 by the caller. */
typedef struct tessera_batch {
  size_t n_tokens;
  const int32_t* tokens;
  const int32_t* positions;
  const int32_t* seq_ids;
  const int8_t* logits;
} tessera_batch;

/* Evaluates the batch and stores its K/V. TESSERA_CONTEXT_FULL when the cache lacks free cells
 * (the cache is then unchanged). Outputs are numbered in batch order among the asked tokens. */
TESSERA_API tessera_status tessera_decode(tessera_context* context, const tessera_batch* batch);
/* Outputs of the last decode, and output i's logits ([n_vocab]) or hidden state ([n_embd], an
 * embeddings context). The pointer is valid until the context's next decode. */
TESSERA_API size_t tessera_n_outputs(const tessera_context* context);
TESSERA_API tessera_status tessera_get_logits(const tessera_context* context, size_t output,
                                              const float** logits);
TESSERA_API tessera_status tessera_get_embeddings(const tessera_context* context, size_t output,
                                                  const float** embedding);

/* Sequence ranges are positions [p0, p1); p0 < 0: from 0; p1 < 0: to the end. seq < 0: every
 * sequence. */
TESSERA_API tessera_status tessera_seq_remove(tessera_context* context, int32_t seq, int32_t p0, int32_t p1);
/* dst also sees src's cells in the range (shared, nothing copied). */
TESSERA_API tessera_status tessera_seq_copy(tessera_context* context, int32_t src, int32_t dst, int32_t p0,
                                            int32_t p1);
/* The highest position sequence seq holds, -1 when none. */
TESSERA_API int32_t tessera_seq_pos_max(const tessera_context* context, int32_t seq);
TESSERA_API tessera_status tessera_context_clear(tessera_context* context);

/* Asks the context's running tessera_generate to stop after the current token (it returns
 * TESSERA_OK with finish TESSERA_FINISH_CANCELLED). Any thread, any time; the request holds
 * until the next tessera_generate starts. */
TESSERA_API void tessera_context_cancel(tessera_context* context);

/* ---- Embeddings ---- */

typedef enum tessera_pooling {
  TESSERA_POOLING_MEAN = 0, /* the mean of every token's hidden state */
  TESSERA_POOLING_CLS = 1,  /* the first token's */
  TESSERA_POOLING_LAST = 2  /* the last token's */
} tessera_pooling;

/* The pooled hidden state ([n_embd] floats) of `tokens` as one sequence, evaluated in the
 * context's sequence 0 (which is cleared first, and after); L2-normalized when `normalize` is
 * set. An embeddings context only (tessera_context_params.embeddings). */
TESSERA_API tessera_status tessera_embed(tessera_context* context, const int32_t* tokens, size_t n_tokens,
                                         tessera_pooling pooling, int normalize, float* embedding,
                                         size_t capacity, size_t* n_embd);

/* ---- Sampling ---- */

typedef struct tessera_sampler tessera_sampler;

/* The chain, in order: repetition/presence/frequency penalties over the last repeat_last_n
 * tokens, top-k, top-p, min-p, temperature, then a draw from a generator seeded by `seed`;
 * temperature <= 0 takes the most likely token. */
typedef struct tessera_sampler_params {
  size_t struct_size;     /* sizeof(tessera_sampler_params) */
  float temperature;      /* default 0.8 */
  int32_t top_k;          /* default 40; <= 0: off */
  float top_p;            /* default 0.95; >= 1: off */
  float min_p;            /* default 0.05; <= 0: off */
  float repeat_penalty;   /* default 1 (off) */
  int32_t repeat_last_n;  /* default 64 */
  float presence_penalty; /* [-2, 2], default 0 */
  float frequency_penalty;
  uint64_t seed;
} tessera_sampler_params;

TESSERA_API tessera_sampler_params tessera_sampler_default_params(void);
TESSERA_API tessera_status tessera_sampler_new(const tessera_sampler_params* params,
                                               tessera_sampler** sampler);
TESSERA_API void tessera_sampler_free(tessera_sampler* sampler);
/* Picks a token from n_vocab logits and remembers it for the penalties. */
TESSERA_API tessera_status tessera_sampler_sample(tessera_sampler* sampler, const float* logits,
                                                  size_t n_vocab, int32_t* token);
/* Adds a token (e.g. of the prompt) to the penalties' history. */
TESSERA_API tessera_status tessera_sampler_accept(tessera_sampler* sampler, int32_t token);
/* Constrains what the sampler picks to text a grammar allows: llama.cpp's GBNF (`gbnf`), or JSON
 * valid against a JSON schema (`json_schema`, its text; "{}" for any JSON value). Exactly one of
 * the two is non-NULL. The model gives the vocabulary the grammar is matched against. Call it
 * before the first sample: it starts the sampler's history and grammar afresh. A grammar or schema
 * that cannot be enforced is TESSERA_INVALID_ARGUMENT naming why (the sampler unchanged). Under a
 * grammar, tessera_generate ends as soon as the text is complete. */
TESSERA_API tessera_status tessera_sampler_set_grammar(tessera_sampler* sampler, const tessera_model* model,
                                                       const char* gbnf, const char* json_schema);

/* ---- Generation ---- */

/* Called with each piece of generated text as it settles: whole UTF-8 characters, stop strings
 * held back until they cannot match. Return 0 to stop (finish TESSERA_FINISH_CANCELLED). */
typedef int (*tessera_text_fn)(const char* text, size_t length, void* user_data);

typedef enum tessera_finish {
  TESSERA_FINISH_LENGTH = 0,   /* n_predict tokens, or the context is full */
  TESSERA_FINISH_EOG = 1,      /* an end-of-generation token (not part of the text) */
  TESSERA_FINISH_STOP = 2,     /* a stop string (not part of the text) */
  TESSERA_FINISH_CANCELLED = 3 /* the callback or tessera_context_cancel */
} tessera_finish;

typedef struct tessera_generate_params {
  size_t struct_size;      /* sizeof(tessera_generate_params) */
  int32_t n_predict;       /* tokens to generate at most (default 128) */
  const char* const* stop; /* stop strings, n_stop of them (may be NULL when 0) */
  size_t n_stop;
  int32_t ignore_eos;      /* nonzero: go on past end-of-generation tokens */
  tessera_text_fn on_text; /* may be NULL */
  void* user_data;
} tessera_generate_params;

typedef struct tessera_generate_result {
  tessera_finish finish;
  size_t n_prompt;    /* prompt tokens */
  size_t n_cached;    /* prompt tokens already in the context (a common prefix), not evaluated */
  size_t n_generated; /* tokens sampled */
  double prompt_ms;   /* evaluating the prompt */
  double generate_ms; /* from the first sampled token to the end */
} tessera_generate_result;

TESSERA_API tessera_generate_params tessera_generate_default_params(void);
/* Generates after `prompt` in the context's sequence 0: the longest prefix of the prompt that
 * sequence 0 already holds is reused, the rest evaluated, then tokens are sampled with `sampler`
 * (which first accepts the prompt) and their text handed to on_text. Other sequences are left
 * alone. `result` may be NULL. */
TESSERA_API tessera_status tessera_generate(tessera_context* context, tessera_sampler* sampler,
                                            const int32_t* prompt, size_t n_prompt,
                                            const tessera_generate_params* params,
                                            tessera_generate_result* result);

/* ---- Saved sequences ---- */

/* Writes sequence seq's tokens (the n_tokens it holds, positions 0..n_tokens-1) and its K/V to a
 * file (versioned, checksummed, with the model's identity); the file is replaced atomically.
 * tokens NULL (n_tokens 0) with seq 0: the tokens tessera_generate left there. */
TESSERA_API tessera_status tessera_state_save(const tessera_context* context, int32_t seq,
                                              const int32_t* tokens, size_t n_tokens, const char* path);
/* Reads such a file into sequence seq (cleared first) and gives back its tokens; a later
 * tessera_generate in sequence 0 reuses them as a prefix. A file of another model, another K/V
 * type, a corrupt or truncated one is an error naming why, and the context is then unchanged.
 * tokens may be NULL (capacity 0): *n_tokens still says how many the sequence now holds; a
 * buffer too small for them is TESSERA_BUFFER_TOO_SMALL and leaves the sequence empty (a buffer
 * of tessera_context_n_ctx tokens always suffices). */
TESSERA_API tessera_status tessera_state_load(tessera_context* context, int32_t seq, const char* path,
                                              int32_t* tokens, size_t capacity, size_t* n_tokens);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
