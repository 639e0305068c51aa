// `tessera perplexity`: llama-perplexity's output lines, the KL divergence round trip through a base
// file, and the errors of bad flags and inputs.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.h"

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";
const std::string kText = std::string(TESSERA_FIXTURES_DIR) + "/perplexity/story.txt";

tessera::testing_support::CliResult cli(const std::string& args) {
  return tessera::testing_support::run_cli("perplexity " + args);
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(PerplexityCli, PrintsTheRunningEstimateAndTheFinalOne) {
  const auto r = cli("-m " + kModel + " -f " + kText + " -c 128 -b 64 --chunks 3 -t 2");
  ASSERT_EQ(r.code, 0) << r.out;
  // llama.cpp's figures for these chunks: [1]4.5266,[2]3.1851,[3]3.7764 (tests/fixtures/perplexity).
  EXPECT_TRUE(contains(r.out, "[1]4.52")) << r.out;
  EXPECT_TRUE(contains(r.out, ",[2]3.18")) << r.out;
  EXPECT_TRUE(contains(r.out, ",[3]3.77")) << r.out;
  EXPECT_TRUE(contains(r.out, "Final estimate: PPL = 3.77")) << r.out;
  EXPECT_TRUE(contains(r.out, " +/- ")) << r.out;
  EXPECT_TRUE(contains(r.out, "calculating perplexity over 3 chunks, n_ctx=128, batch_size=64")) << r.out;
}

TEST(PerplexityCli, KlDivergenceOfAModelFromItselfIsZero) {
  const std::string base = testing::TempDir() + "/cli-self.kld";
  auto r = cli("-m " + kModel + " -f " + kText + " -c 128 --chunks 2 -t 2 --kl-divergence-base " + base);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "saved the log-probabilities of 126 tokens")) << r.out;
  r = cli("-m " + kModel + " -t 2 --kl-divergence-base " + base + " --kl-divergence");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "chunk             PPL")) << r.out;
  EXPECT_TRUE(contains(r.out, "Mean PPL(Q)/PPL(base)         :   1.0000")) << r.out;
  EXPECT_TRUE(contains(r.out, "Mean    KLD:   0.0000") || contains(r.out, "Mean    KLD:  -0.0000")) << r.out;
  EXPECT_TRUE(contains(r.out, "Maximum KLD:")) << r.out;
  EXPECT_TRUE(contains(r.out, "99.0%   KLD:")) << r.out;
  EXPECT_TRUE(contains(r.out, "Same top p: 100.000 ± 0.000 %")) << r.out;
  // Another -c than the file's is an error naming both.
  r = cli("-m " + kModel + " -c 256 --kl-divergence-base " + base + " --kl-divergence");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "context of 128")) << r.out;
}

TEST(PerplexityCli, BadInputsAreErrors) {
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {"-m " + kModel + " -f /nonexistent/text.txt", "cannot open the text file"},
      {"-m " + kModel + " -f " + kText + " -c 0", "-c"},
      {"-m " + kModel + " -f " + kText + " -c 2", "at least 3"},
      {"-m " + kModel + " -f " + kText + " -b 0", "-b"},
      {"-m " + kModel + " -f " + kText + " --chunks 0", "--chunks"},
      {"-m " + kModel + " -f " + kText + " -c 8192", "fewer than one chunk"},
      {"-m " + kModel, "-f FILE"},
      {"-m " + kModel + " --kl-divergence", "--kl-divergence-base"},
      {"-m " + kModel + " -f " + kText + " --kl-divergence --kl-divergence-base " + kText, "-f is not read"},
      {"-m " + kModel + " --kl-divergence --kl-divergence-base " + kText, "not a KL divergence base file"},
      {"-m /nonexistent/model.gguf -f " + kText, "model.gguf"},
  };
  for (const Case& c : cases) {
    const auto r = cli(c.args);
    EXPECT_NE(r.code, 0) << c.args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << c.args << "\n" << r.out;
    EXPECT_FALSE(contains(r.out, "Final estimate")) << c.args << "\n" << r.out;
  }
}
