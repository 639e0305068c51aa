// `tessera run --prompt-cache FILE`: the second run reads the prompt from the file and prints the
// same greedy text; a file it cannot use is an error that leaves the file as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "support/cli.h"

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
const std::string kOtherModel = std::string(TESSERA_SHARED_DIR) + "/models/oracle/tiny-llama-f32.gguf";
const std::string kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play outside";

using tessera::testing_support::CliResult;

CliResult run(const std::string& prompt, const std::string& flags) {
  return tessera::testing_support::run_cli("run -m " + kModel + " -p '" + prompt + "' -n 30 --temp 0 -t 2 " +
                                           flags);
}

// The text on stdout: the first line (the summary on stderr comes after it).
std::string text_of(const CliResult& r) { return r.out.substr(0, r.out.find('\n')); }

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string cache_path(const std::string& name) {
  const std::string path = testing::TempDir() + "/prompt_cache_" + name;
  std::filesystem::remove(path);
  return path;
}

int prompt_tokens(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("prompt: (\\d+) tokens")) ? std::stoi(m[1]) : -1;
}

}  // namespace

TEST(PromptCacheCli, TheSecondRunReadsThePromptFromTheCacheAndPrintsTheSameText) {
  if (!std::filesystem::is_directory(TESSERA_SHARED_DIR)) GTEST_SKIP() << "no " << TESSERA_SHARED_DIR;
  const std::string path = cache_path("same");
  const CliResult plain = run(kPrompt, "");
  ASSERT_EQ(plain.code, 0) << plain.out;
  const int n = prompt_tokens(plain.out);
  ASSERT_GT(n, 10) << plain.out;

  const CliResult first = run(kPrompt, "--prompt-cache " + path);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_EQ(text_of(first), text_of(plain));
  EXPECT_TRUE(contains(first.out, "(0 from the prompt cache)")) << first.out;
  EXPECT_TRUE(contains(first.out, "prompt cache: wrote " + std::to_string(n) + " tokens")) << first.out;
  ASSERT_TRUE(std::filesystem::exists(path));

  const CliResult second = run(kPrompt, "--prompt-cache " + path);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_EQ(text_of(second), text_of(plain));
  // Every token but the last, which is evaluated again for its logits; the file already holds the
  // whole prompt, so it is not written again.
  EXPECT_TRUE(contains(second.out, "prompt: " + std::to_string(n) + " tokens (" + std::to_string(n - 1) +
                                       " from the prompt cache)"))
      << second.out;
  EXPECT_FALSE(contains(second.out, "prompt cache: wrote")) << second.out;

  // A longer prompt reads the common prefix from the file, evaluates the rest and saves it all.
  const std::string longer = kPrompt + " in the park. One day";
  const CliResult plain_longer = run(longer, "");
  const CliResult cached_longer = run(longer, "--prompt-cache " + path);
  ASSERT_EQ(cached_longer.code, 0) << cached_longer.out;
  EXPECT_EQ(text_of(cached_longer), text_of(plain_longer));
  EXPECT_TRUE(contains(cached_longer.out, "(" + std::to_string(n) + " from the prompt cache)"))
      << cached_longer.out;
  EXPECT_TRUE(contains(cached_longer.out,
                       "prompt cache: wrote " + std::to_string(prompt_tokens(plain_longer.out)) + " tokens"))
      << cached_longer.out;
  // A prompt that parts from it early: only the shared beginning comes from the file.
  const CliResult other = run("Once upon a time, there was a big dog", "--prompt-cache " + path);
  const CliResult plain_other = run("Once upon a time, there was a big dog", "");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_EQ(text_of(other), text_of(plain_other));
  EXPECT_FALSE(contains(other.out, "(0 from the prompt cache)")) << other.out;
}

TEST(PromptCacheCli, PromptCacheAllSavesTheGeneratedTokensToo) {
  if (!std::filesystem::is_directory(TESSERA_SHARED_DIR)) GTEST_SKIP() << "no " << TESSERA_SHARED_DIR;
  const std::string path = cache_path("all");
  const CliResult first = run(kPrompt, "--prompt-cache " + path + " --prompt-cache-all");
  ASSERT_EQ(first.code, 0) << first.out;
  const int n = prompt_tokens(first.out);
  // The prompt and the 30 generated tokens but the last, which nothing evaluates (no logits are
  // wanted after it).
  const int held = n + 30 - 1;
  EXPECT_TRUE(contains(first.out, "prompt cache: wrote " + std::to_string(held) + " tokens")) << first.out;
  const CliResult second = run(kPrompt, "--prompt-cache " + path);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_EQ(text_of(second), text_of(first));
  EXPECT_TRUE(contains(second.out, "prompt cache: read " + std::to_string(held) + " tokens")) << second.out;
  EXPECT_TRUE(contains(second.out, "(" + std::to_string(n - 1) + " from the prompt cache)")) << second.out;
}

TEST(PromptCacheCli, AFileOfAnotherModelOrCorruptedIsAnErrorAndStaysAsItWas) {
  if (!std::filesystem::is_directory(TESSERA_SHARED_DIR)) GTEST_SKIP() << "no " << TESSERA_SHARED_DIR;
  const std::string path = cache_path("other");
  const CliResult other = tessera::testing_support::run_cli("run -m " + kOtherModel +
                                                            " -p hello -n 2 --temp 0 --prompt-cache " + path);
  ASSERT_EQ(other.code, 0) << other.out;
  const std::string saved = file_bytes(path);
  CliResult r = run(kPrompt, "--prompt-cache " + path);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, path + ": saved with another model")) << r.out;
  EXPECT_EQ(file_bytes(path), saved);

  std::string bad = saved;
  bad[bad.size() / 2] ^= 0x20;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
  r = run(kPrompt, "--prompt-cache " + path);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, path + ": corrupted")) << r.out;
  EXPECT_EQ(file_bytes(path), bad);

  // Not a session file at all (here: the model itself).
  r = run(kPrompt, "--prompt-cache " + kModel);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "not a Tessera session file")) << r.out;
}
