#pragma once
// How byte-level BPE cuts text into words before merging (tokenizer.ggml.pre): one or more
// regular expressions applied in sequence, each splitting every piece the previous one made into
// its matches and the text between them, as Hugging Face's Split(behavior = "Isolated") does.
#include <string>
#include <string_view>
#include <vector>

#include "llm/regex.h"

namespace tessera::llm {

class PreTokenizer {
 public:
  // The pre-tokenizer llama.cpp selects for tokenizer.ggml.pre = `name` ("llama-bpe" and its
  // aliases, "qwen2", "gpt-2", "deepseek-coder", ...). An empty or unknown name selects "default"
  // (GPT-2's expression), with a warning logged once per name.
  static PreTokenizer for_name(std::string_view name);

  // Explicit expressions, applied in order. Error(InvalidArgument) when one does not compile.
  PreTokenizer(std::string name, const std::vector<std::string_view>& patterns, bool ignore_merges = false,
               bool add_bos = false);

  // The canonical name of the kind selected: "llama-bpe", "smaug-bpe", "qwen2", "gpt-2",
  // "deepseek-coder" or "default" (or the name given to the explicit constructor).
  const std::string& name() const noexcept { return name_; }
  // A word that is a whole token is not merged (Llama 3's tokenizer.json "ignore_merges").
  bool ignore_merges() const noexcept { return ignore_merges_; }
  // tokenizer.ggml.add_bos_token when the file does not say (llama.cpp's default for the kind).
  bool add_bos() const noexcept { return add_bos_; }

  // Appends the words of `text` in order; together they cover it exactly, none is empty.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  std::string name_;
  std::vector<Regex> regexes_;
  bool ignore_merges_;
  bool add_bos_;
};

}  // namespace tessera::llm
