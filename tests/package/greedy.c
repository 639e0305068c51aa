/* greedy_c MODEL PROMPT N: the prompt, then N greedy tokens of text, as `tessera run --temp 0`
 * prints them, through the C API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera.h>

static int print_text(const char* text, size_t length, void* user_data) {
  (void)user_data;
  fwrite(text, 1, length, stdout);
  return 1;
}

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, tessera_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  tessera_model* model = NULL;
  if (tessera_model_load(argv[1], NULL, &model) != TESSERA_OK) return fail("load");
  int32_t tokens[4096];
  size_t n = 0;
  if (tessera_tokenize(model, argv[2], strlen(argv[2]), 1, 0, tokens, 4096, &n) != TESSERA_OK)
    return fail("tokenize");
  tessera_context_params cp = tessera_context_default_params();
  tessera_context* context = NULL;
  if (tessera_context_new(model, &cp, &context) != TESSERA_OK) return fail("context");
  tessera_sampler_params sp = tessera_sampler_default_params();
  sp.temperature = 0.0f;
  tessera_sampler* sampler = NULL;
  if (tessera_sampler_new(&sp, &sampler) != TESSERA_OK) return fail("sampler");
  tessera_generate_params gp = tessera_generate_default_params();
  gp.n_predict = atoi(argv[3]);
  gp.on_text = print_text;
  fputs(argv[2], stdout);
  if (tessera_generate(context, sampler, tokens, n, &gp, NULL) != TESSERA_OK) return fail("generate");
  fputc('\n', stdout);
  tessera_sampler_free(sampler);
  tessera_context_free(context);
  tessera_model_free(model);
  return 0;
}
