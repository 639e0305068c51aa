// llama.cpp's logits for random-weight llama-architecture models (../shared/models/oracle, README
// there): Tessera matches them on the CPU and with every layer on OpenCL0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tessera/device.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kDir = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";

struct Oracle {
  const char* name;
  double max_nmse;  // 2e-6 for F32/F16 weights, 5e-4 for quantized ones
};

std::vector<Token> read_tokens(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << path;
  return {std::istream_iterator<Token>(f), std::istream_iterator<Token>()};
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

void check_against_oracle(const Oracle& o, const LoadOptions& lo) {
  const std::string base = kDir + o.name;
  const std::vector<Token> tokens = read_tokens(base + ".tokens");
  const std::vector<float> expected = read_floats(base + ".logits.bin");
  ASSERT_FALSE(tokens.empty());
  auto model = Model::load(base + ".gguf", lo);
  const auto n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  ASSERT_EQ(expected.size(), tokens.size() * n_vocab);
  SessionOptions so;
  so.n_ctx = std::max<int64_t>(static_cast<int64_t>(tokens.size()), 256);
  so.n_threads = 2;
  Session s(*model, so);
  const std::vector<float>& got = s.decode(tokens, /*all_logits=*/true);
  ASSERT_EQ(got.size(), expected.size());

  double err = 0.0, norm = 0.0;
  size_t argmax_equal = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const float* g = got.data() + t * n_vocab;
    const float* e = expected.data() + t * n_vocab;
    for (size_t i = 0; i < n_vocab; ++i) {
      err += (static_cast<double>(g[i]) - e[i]) * (static_cast<double>(g[i]) - e[i]);
      norm += static_cast<double>(e[i]) * e[i];
    }
    argmax_equal += std::max_element(g, g + n_vocab) - g == std::max_element(e, e + n_vocab) - e;
  }
  const double nmse = err / norm;
  std::printf("%s: NMSE %.3g, argmax equal at %zu of %zu positions\n", o.name, nmse, argmax_equal,
              tokens.size());
  EXPECT_LE(nmse, o.max_nmse) << o.name << "\n" << s.report();
  EXPECT_GE(argmax_equal * 16, tokens.size() * 15) << o.name;
  if (model->device() != nullptr) {
    // Every layer ran on the device: no node fell back to the CPU.
    EXPECT_NE(s.report().find("no CPU fallbacks"), std::string::npos) << s.report();
  }
}

// The llama-architecture oracles whose weight types Tessera supports (F32, F16, BF16, Q8_0, Q4_0).
const Oracle kOracles[] = {{"tiny-llama-f32", 2e-6}, {"tiny-llama3-f32", 2e-6}};

std::string oracle_name(const testing::TestParamInfo<Oracle>& info) {
  std::string s = info.param.name;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

}  // namespace

class LlamaOracle : public testing::TestWithParam<Oracle> {};

TEST_P(LlamaOracle, MatchesOnTheCpu) { check_against_oracle(GetParam(), {}); }

#if TESSERA_HAVE_OPENCL
// Built with the OpenCL runtime, the test runs where its PoCL devices are: a missing one fails.
TEST_P(LlamaOracle, MatchesWithEveryLayerOnOpenCL0) {
  ASSERT_NE(Registry::instance().find("OpenCL0"), nullptr)
      << "no OpenCL0 (POCL_DEVICES=\"pthread pthread\" runs it on the CPU)";
  LoadOptions lo;
  lo.n_gpu_layers = 99;
  lo.device = "OpenCL0";
  check_against_oracle(GetParam(), lo);
}
#endif

INSTANTIATE_TEST_SUITE_P(Files, LlamaOracle, testing::ValuesIn(kOracles), oracle_name);
