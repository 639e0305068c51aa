// A model whose layers are split across two devices decodes a long batch in micro-batches
// pipelined across them (each device's layers a graph of their own, the devices working on
// successive micro-batches at once): the logits are the same numbers as the same micro-batches
// decoded one after the other with every layer on one device of that runtime (the same kernels),
// generation continues from the cache the stages wrote, and the report shows both stages and the
// timeline.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/opencl.h"
#include "tessera/device.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kModel = std::string(TESSERA_SHARED_DIR) + "/models/oracle/tiny-llama-f32.gguf";

std::vector<Token> prompt(size_t n) {
  std::vector<Token> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<Token>((11 + 37 * i) % 512));
  return t;
}

// The prompt's logits (every position) and then two generation steps', on `devices` with every
// layer offloaded, in micro-batches of 5 tokens.
std::vector<float> run(const std::string& devices, std::string* report = nullptr) {
  LoadOptions lo;
  lo.n_gpu_layers = 99;
  lo.device = devices;
  auto model = Model::load(kModel, lo);
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  // One device: micro-batches as n_batch; two: pipelined micro-batches of the same size.
  so.n_batch = devices.find(',') == std::string::npos ? 5 : 40;
  so.n_ubatch = 5;
  Session s(*model, so);
  std::vector<float> all = s.decode(prompt(23), /*all_logits=*/true);
  if (report != nullptr) *report = s.report();
  for (Token t : {Token{7}, Token{300}}) {
    const std::vector<float>& step = s.decode(std::vector<Token>{t}, false);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

void expect_pipelined_equals_one_device(const std::string& one, const std::string& two) {
  const std::vector<float> want = run(one);
  std::string report;
  const std::vector<float> got = run(one + "," + two, &report);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "the pipelined logits differ";
  EXPECT_NE(
      report.find("pipeline: 23 tokens in 5 micro-batches of 5 across 2 stages: " + one + " (layers 0-0)"),
      std::string::npos)
      << report;
  EXPECT_NE(report.find(two + " (layers 1-1)"), std::string::npos) << report;
  EXPECT_NE(report.find("stage " + one), std::string::npos) << report;
}

}  // namespace

TEST(DevicePipeline, HostDevicesGiveTheOneDeviceLogits) {
  ASSERT_NE(Registry::instance().find("Host1"), nullptr) << "ctest sets TESSERA_HOST_DEVICES=2";
  expect_pipelined_equals_one_device("Host0", "Host1");
}

TEST(DevicePipeline, OpenClDevicesGiveTheOneDeviceLogits) {
  TESSERA_REQUIRE_OPENCL_DEVICE("OpenCL1");
  expect_pipelined_equals_one_device("OpenCL0", "OpenCL1");
}
