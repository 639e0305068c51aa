// The pre-tokenizer expressions, as published in each model's tokenizer.json (Hugging Face
// tokenizers) and selected by name as llama.cpp does. The case-insensitive contractions are
// spelled with explicit classes ('[sS]), as llama.cpp adapts them, so that no Unicode case
// folding (e.g. U+017F long s) can widen them.
#include "llm/pre_tokenizer.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "core/check.h"
#include "tessera/log.h"

namespace tessera::llm {

namespace {

// GPT-2 (and the default).
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken's cl100k expression): numbers in groups of up to three digits.
constexpr std::string_view kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama 3's with single digits.
constexpr std::string_view kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek Coder: five splits in sequence. The CJK ranges are U+4E00-U+9FA5, U+0800-U+4E00 and
// U+AC00-U+D7FF.
constexpr std::string_view kDeepseekCoder[] = {
    R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N})",
};

struct Kind {
  std::string_view name;
  std::vector<std::string_view> aliases;  // tokenizer.ggml.pre values that select it
  std::vector<std::string_view> patterns;
  bool ignore_merges;
  bool add_bos;
};

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> all = {
      {"llama-bpe",
       {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       true,
       true},
      // Llama 3's expression without ignore_merges or a BOS (llama.cpp's SMAUG and DBRX kinds).
      {"smaug-bpe", {"smaug-bpe", "dbrx"}, {kLlama3}, false, false},
      {"qwen2", {"qwen2", "deepseek-r1-qwen", "kormo", "megrez"}, {kQwen2}, false, false},
      {"gpt-2",
       {"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "a.x-4.0", "mellum",
        "exaone4"},
       {kGpt2},
       false,
       false},
      {"deepseek-coder",
       {"deepseek-coder"},
       {std::begin(kDeepseekCoder), std::end(kDeepseekCoder)},
       false,
       false},
      {"default", {"default"}, {kGpt2}, false, false},
  };
  return all;
}

void warn_once(std::string_view name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> warned;
  const std::lock_guard lock(mutex);
  if (!warned.emplace(name).second) return;
  log(LogLevel::Warn, name.empty() ? std::string("tokenizer.ggml.pre is missing: using the default "
                                                 "pre-tokenizer (GPT-2's expression)")
                                   : fmt::format("tokenizer.ggml.pre '{}' is not known: using the default "
                                                 "pre-tokenizer (GPT-2's expression)",
                                                 name));
}

}  // namespace

PreTokenizer PreTokenizer::for_name(std::string_view name) {
  for (const Kind& kind : kinds()) {
    if (std::find(kind.aliases.begin(), kind.aliases.end(), name) != kind.aliases.end()) {
      return PreTokenizer(std::string(kind.name), kind.patterns, kind.ignore_merges, kind.add_bos);
    }
  }
  warn_once(name);
  const Kind& fallback = kinds().back();
  return PreTokenizer(std::string(fallback.name), fallback.patterns, false, false);
}

PreTokenizer::PreTokenizer(std::string name, const std::vector<std::string_view>& patterns,
                           bool ignore_merges, bool add_bos)
    : name_(std::move(name)), ignore_merges_(ignore_merges), add_bos_(add_bos) {
  if (patterns.empty()) raise(ErrorCode::InvalidArgument, "pre-tokenizer '{}' has no expressions", name_);
  regexes_.reserve(patterns.size());
  for (const std::string_view p : patterns) regexes_.emplace_back(p);
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const Regex& regex : regexes_) {
    next.clear();
    for (const std::string_view piece : pieces) {
      size_t at = 0;  // the end of the last match: text before a match is a piece of its own
      size_t from = 0;
      while (from < piece.size()) {
        const auto m = regex.find(piece, from);
        if (!m) break;
        if (m->end == m->begin) {  // an empty match splits nothing: look again one character on
          from = m->begin + 1;
          while (from < piece.size() && (uint8_t(piece[from]) & 0xC0) == 0x80) ++from;
          continue;
        }
        if (m->begin > at) next.push_back(piece.substr(at, m->begin - at));
        next.push_back(piece.substr(m->begin, m->end - m->begin));
        at = from = m->end;
      }
      if (at < piece.size()) next.push_back(piece.substr(at));
    }
    pieces.swap(next);
  }
  words.insert(words.end(), pieces.begin(), pieces.end());
}

}  // namespace tessera::llm
