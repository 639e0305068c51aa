// libFuzzer target for model loading: the input, as a GGUF file, goes all the way through
// llm::Model::load (from a memory file, mapped or read as the input's length says), its vocabulary
// and chat template, and, when it loads, a two-token decode in a small Session and the greedy
// token's piece. Anything may be an Error; nothing may crash, leak, hang or allocate without bound
// (scripts/fuzz.sh runs it under -rss_limit_mb; the loader's own checks must refuse sizes the file
// cannot back before allocating). Exceptions other than tessera::Error escape, so the fuzzer
// reports them (a std::bad_alloc from a hostile size is a defect).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/llm/chat_template.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"
#include "tessera/log.h"

namespace {

using namespace tessera;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "model_fuzzer: %s: %s\n", what, detail.c_str());
  __builtin_trap();
}

// One memory file for the whole run, rewritten per input; loaded through its /proc path as a
// regular file would be.
int memory_file() {
  static const int fd = [] {
    const int f = memfd_create("model_fuzzer", MFD_CLOEXEC);
    if (f < 0) bug("memfd_create", "failed");
    return f;
  }();
  return fd;
}

bool write_input(const uint8_t* data, size_t size) {
  const int fd = memory_file();
  if (ftruncate(fd, 0) != 0) return false;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

template <typename Fn>
void tolerate(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

void exercise_vocab(const gguf::File& file) {
  tolerate([&] {
    const llm::Vocab vocab = llm::Vocab::from_gguf(file);
    for (bool special : {false, true}) {
      const auto ids =
          vocab.encode("Once upon a time, <s> there was \xff\xfe a \xe2\x96\x81 cat.", true, special);
      for (llm::Token id : ids)
        if (id < 0 || static_cast<size_t>(id) >= vocab.size()) bug("encode", "id out of range");
      (void)vocab.decode(ids, true, special);
    }
  });
  tolerate([&] {
    if (auto source = llm::chat_template_source(file)) {
      llm::ChatTemplateLimits limits;
      limits.max_output = 1 << 16;
      limits.max_iterations = 10000;
      limits.max_work_bytes = 1 << 22;
      const llm::ChatTemplate t(*source, limits);
      (void)t.apply(std::vector<llm::ChatMessage>{{"user", "Hi"}});
    }
  });
}

void exercise_decode(const llm::Model& model) {
  const int64_t n_vocab = model.hparams().n_vocab;
  if (n_vocab <= 0) bug("load", "a loaded model with no vocabulary");
  llm::SessionOptions so;
  so.n_ctx = 8;
  so.n_threads = 1;
  so.kv_pad = 8;
  tolerate([&] {
    llm::Session session(model, so);
    const int32_t tokens[] = {static_cast<int32_t>(std::min<int64_t>(1, n_vocab - 1)),
                              static_cast<int32_t>(n_vocab - 1)};
    const std::vector<float>& logits = session.decode(tokens);
    if (static_cast<int64_t>(logits.size()) != n_vocab) bug("decode", "logits of the wrong size");
  });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level(LogLevel::Error);  // unknown keys and pre-tokenizers warn; the fuzzer needs no text
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!write_input(data, size)) bug("write", "the memory file");
  const std::string path = "/proc/self/fd/" + std::to_string(memory_file());
  llm::LoadOptions options;
  options.use_mmap = size % 2 == 0;
  std::unique_ptr<llm::Model> model;
  try {
    model = llm::Model::load(path, options);
  } catch (const Error&) {
  }
  if (model) {
    exercise_vocab(*model->file());
    exercise_decode(*model);
  } else {
    // Files that are not models may still hold a vocabulary (the tokenizer tests' files do).
    tolerate([&] { exercise_vocab(gguf::File::open(path)); });
  }
  return 0;
}
