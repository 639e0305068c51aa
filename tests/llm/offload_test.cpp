// Layers offloaded to an OpenCL device (PoCL in CI) give the CPU's logits and the same greedy tokens,
// their attention decomposed by the scheduler into ops OpenCL has.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>

#include "support/cli.h"
#include "support/opencl.h"
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

#if TESSERA_HAVE_OPENCL
class Offload : public testing::TestWithParam<int> {};

// Built with the OpenCL runtime, the tests run where its PoCL devices are: a missing one fails.
TEST_P(Offload, GivesTheCpuLogitsAndTokens) {
  ASSERT_TRUE(has_device("OpenCL0")) << "no OpenCL0 (POCL_DEVICES=pthread pthread runs it on the CPU)";
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
  // The offloaded layers' FLASH_ATTN_EXT ran on the device as the ops it is made of (OpenCL has no
  // kernel of its own for it), none on the CPU.
  EXPECT_NE(dev.report.find("decomposed"), std::string::npos) << dev.report;
  EXPECT_NE(dev.report.find("no CPU fallbacks"), std::string::npos) << dev.report;
}

// 2 of 5 layers, every layer, and every layer plus the output layer.
INSTANTIATE_TEST_SUITE_P(Layers, Offload, testing::Values(2, 5, 99));
#endif

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

namespace {

// What the last graph copied between backends, from the report's split lines.
struct Copies {
  double kib = 0.0;
  size_t weights = 0;
  size_t device_splits = 0;
  size_t device_weights = 0;  // weights copied into the device's splits
};

Copies copies_of(const std::string& report) {
  static const std::regex line(R"(split \d+: (\S+) .* inputs copied \(([0-9.]+) KiB\), (\d+) weights)");
  Copies c;
  for (auto it = std::sregex_iterator(report.begin(), report.end(), line); it != std::sregex_iterator();
       ++it) {
    const auto& m = *it;
    const size_t weights = std::stoul(m[3]);
    c.kib += std::stod(m[2]);
    c.weights += weights;
    if (m[1] == "OpenCL0") {
      ++c.device_splits;
      c.device_weights += weights;
    }
  }
  return c;
}

// 2 layers of 32 heads (head_dim 8): ROPE's ne[1] is 32 at every batch. F32 weights, so that the
// logits of CPU and device matmuls agree closely whichever path a quantized type would take.
SyntheticSpec thirty_two_heads() {
  SyntheticSpec spec;
  spec.n_embd = 256;
  spec.n_layer = 2;
  spec.n_head = 32;
  spec.n_head_kv = 32;
  spec.n_ff = 512;
  spec.n_vocab = 320;
  spec.n_ctx_train = 4096;
  spec.type = DType::F32;
  return spec;
}

double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (double(want[i]) - got[i]) * (double(want[i]) - got[i]);
    norm += double(want[i]) * want[i];
  }
  return err / norm;
}

}  // namespace

// Regression: wants_offload read ne[1] (the head count, 32) as ROPE's batch, so the CPU layer's
// ROPE went to the device at batch 1 and pulled its attention, KV cache and weights after it:
// about 4 MiB of cache and the layer's weights copied per token.
TEST(OffloadBatch, OneLayerOfThirtyTwoHeadsOnTheDeviceCopiesNoWeightsPerToken) {
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL0");
  auto cpu_model = Model::synthetic(thirty_two_heads());
  LoadOptions lo;
  lo.n_gpu_layers = 1;
  lo.device = "OpenCL0";
  auto dev_model = Model::synthetic(thirty_two_heads(), lo);
  Session cpu(*cpu_model), dev(*dev_model);
  const std::vector<Token> prompt{1, 2, 3, 4, 5};
  EXPECT_LT(relative_error(cpu.decode(prompt), dev.decode(prompt)), 1e-5);
  for (Token t : {7, 11, 13, 17}) {
    const std::vector<float> want = cpu.decode(std::span<const Token>(&t, 1));
    const std::vector<float>& got = dev.decode(std::span<const Token>(&t, 1));
    EXPECT_LT(relative_error(want, got), 1e-5) << t;
    const std::string report = dev.report();
    const Copies c = copies_of(report);
    EXPECT_GE(c.device_splits, 1u) << report;  // layer 1 runs there
    EXPECT_EQ(c.weights, 0u) << report;
    EXPECT_LT(c.kib, 1024.0) << report;
  }
  // The prompt's graph and one generation graph (the KV length is padded): two plans, the
  // generation one reused from the second token on.
  EXPECT_NE(dev.report().find("plans: 2 built, 3 reused"), std::string::npos) << dev.report();
}

// A prompt batch of >= 32 tokens still sends the CPU layer's matmuls (host weights) to the device.
TEST(OffloadBatch, APromptOfFortyTokensOffloadsMatMulsWithHostWeights) {
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL0");
  auto cpu_model = Model::synthetic(thirty_two_heads());
  LoadOptions lo;
  lo.n_gpu_layers = 1;
  lo.device = "OpenCL0";
  auto dev_model = Model::synthetic(thirty_two_heads(), lo);
  Session cpu(*cpu_model), dev(*dev_model);
  std::vector<Token> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<Token>((i * 7 + 1) % 320);
  EXPECT_LT(relative_error(cpu.decode(prompt, true), dev.decode(prompt, true)), 1e-5);
  const std::string report = dev.report();
  EXPECT_GE(copies_of(report).device_weights, 4u) << report;  // layer 0's q, k, v, o, ffn matrices
}
