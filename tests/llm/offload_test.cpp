// Layers offloaded to an OpenCL device (PoCL in CI) give the CPU's logits and the same greedy tokens.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "support/cli.h"
#include "tessera/device.h"
#include "tessera/llm/model.h"
#include "tessera/llm/sampler.h"
#include "tessera/llm/session.h"
#include "tessera/llm/vocab.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf";

struct RunResult {
  std::vector<float> prompt_logits;  // every position of the prompt
  std::vector<Token> greedy;
  std::string report;
};

RunResult run(const LoadOptions& lo, int n_gen) {
  auto model = Model::load(kModel, lo);
  const auto vocab = Vocab::from_gguf(*model->file());
  Session s(*model);
  const auto prompt = vocab.encode("Once upon a time", true);
  RunResult r;
  r.prompt_logits = s.decode(prompt, true);
  const int64_t n_vocab = model->hparams().n_vocab;
  std::vector<float> logits(r.prompt_logits.end() - n_vocab, r.prompt_logits.end());
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler sampler(o);
  for (int i = 0; i < n_gen; ++i) {
    const Token t = sampler.sample(logits);
    r.greedy.push_back(t);
    logits = s.decode(std::span<const Token>(&t, 1));
  }
  r.report = s.report();
  return r;
}

bool has_device(const char* name) { return Registry::instance().find(name) != nullptr; }

}  // namespace

class Offload : public testing::TestWithParam<int> {};

TEST_P(Offload, GivesTheCpuLogitsAndTokens) {
  if (!has_device("OpenCL0")) GTEST_SKIP() << "no OpenCL0 on this machine";
  const RunResult cpu = run({}, 20);
  LoadOptions lo;
  lo.n_gpu_layers = GetParam();
  lo.device = "OpenCL0";
  const RunResult dev = run(lo, 20);
  ASSERT_EQ(cpu.prompt_logits.size(), dev.prompt_logits.size());
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < cpu.prompt_logits.size(); ++i) {
    const double d = static_cast<double>(cpu.prompt_logits[i]) - dev.prompt_logits[i];
    err += d * d;
    norm += static_cast<double>(cpu.prompt_logits[i]) * cpu.prompt_logits[i];
  }
  EXPECT_LT(err / norm, 1e-5) << dev.report;
  EXPECT_EQ(cpu.greedy, dev.greedy) << dev.report;
  EXPECT_NE(dev.report.find("OpenCL0"), std::string::npos) << dev.report;
}

// 2 of 5 layers, every layer, and every layer plus the output layer.
INSTANTIATE_TEST_SUITE_P(Layers, Offload, testing::Values(2, 5, 99));

TEST(OffloadCli, NglWithoutDevicesWarnsThenRunsOnTheCpu) {
  // Hide every device (no OpenCL, no host devices): -ngl must warn and fall back to the CPU, not fail.
  const auto r = testing_support::run_cli("run -m " + kModel + " -p 'Once upon a time' -n 8 --temp 0 -ngl 5",
                                          "TESSERA_OPENCL_DEVICES=no-such-device TESSERA_HOST_DEVICES=0");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Once upon a time, there was a little girl"), std::string::npos) << r.out;
}

TEST(OffloadCli, UnknownDeviceIsAnError) {
  const auto r = testing_support::run_cli("run -m " + kModel + " -p hi -n 2 -ngl 2 --device NoSuchDevice");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("NoSuchDevice"), std::string::npos) << r.out;
}
