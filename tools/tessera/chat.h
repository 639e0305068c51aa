#pragma once
// `tessera run -cnv`: an interactive conversation through the model's chat template.
#include <string>

#include "tessera/llm/sampler.h"

namespace tessera::cli {

struct ChatSettings {
  std::string model, device, system_prompt, template_file;
  int n_predict = 128, threads = 0, n_gpu_layers = 0;
  int64_t n_ctx = 0;
  bool no_mmap = false;
  llm::SamplerOptions sampling;
};

// Reads user turns from stdin (one line each; "/exit" or end of input ends the session), renders
// the whole conversation, evaluates only the tokens beyond the cached prefix, and streams the
// reply until an end-of-generation token (Vocab::is_end_of_generation: EOS, end of turn) or
// n_predict tokens. Ctrl-C stops the current reply (and
// ends the session while waiting for input). Error when the model has no chat template and no
// template file is given.
void run_chat(const ChatSettings& s);

}  // namespace tessera::cli
