// llama.cpp's logits for random-weight models of every supported architecture
// (../shared/models/oracle, README there; granite, granitemoe, olmoe and smollm3 in
// tests/fixtures/archs, README there; logits made on this machine kind where a bound is tighter than
// llama.cpp's own drift between CPUs in tests/fixtures/fidelity, README there): Tessera matches them on the
// CPU and with every layer on OpenCL0 (no node falling back to the CPU), for every weight type. The
// mixture-of-experts models run on OpenCL0 too, with MUL_MAT_ID (which no device op library has yet) falling
// back to the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/device.h"
#include "tessera/llm/model.h"
#include "tessera/llm/session.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kDir = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";
const std::string kFixturesDir = std::string(TESSERA_FIXTURES_DIR) + "/";

struct Oracle {
  const char* name;
  double max_nmse;            // 2e-6 for F32/F16 weights, 5e-4 for quantized ones
  const char* dir = nullptr;  // a directory of tests/fixtures (archs, fidelity); else ../shared/models/oracle
  const char* logits = nullptr;  // in tests/fixtures/fidelity; else NAME.logits.bin beside the model
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

void check_against_oracle(const Oracle& o, const LoadOptions& lo, bool flash_attn) {
  const std::string base = (o.dir != nullptr ? kFixturesDir + o.dir + "/" : kDir) + o.name;
  const std::vector<Token> tokens = read_tokens(base + ".tokens");
  const std::vector<float> expected =
      read_floats(o.logits != nullptr ? kFixturesDir + "fidelity/" + o.logits : base + ".logits.bin");
  ASSERT_FALSE(tokens.empty());
  auto model = Model::load(base + ".gguf", lo);
  const auto n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  ASSERT_EQ(expected.size(), tokens.size() * n_vocab);
  SessionOptions so;
  so.n_ctx = std::max<int64_t>(static_cast<int64_t>(tokens.size()), 256);
  so.n_threads = 2;
  so.flash_attn = flash_attn;
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
  if (lo.device.find(',') != std::string::npos) {
    // Split: each device holds layers and computed a split of its own.
    EXPECT_EQ(model->devices().size(), 2u);
    for (const Device* d : model->devices())
      EXPECT_NE(s.report().find(": " + d->name() + " "), std::string::npos) << s.report();
  }
  if (model->device() != nullptr) {
    // Every layer ran on the device, a MoE layer's experts (MUL_MAT_ID) included: no node fell back
    // to the CPU.
    EXPECT_NE(s.report().find("no CPU fallbacks"), std::string::npos) << s.report();
  }
}

// One per architecture, and Llama 3's rope scaling.
const Oracle kFloatOracles[] = {{"tiny-llama-f32", 2e-6},
                                {"tiny-llama3-f32", 2e-6},
                                {"tiny-qwen2-f32", 2e-6},
                                {"tiny-qwen3-f32", 2e-6},
                                {"tiny-phi3-f16", 2e-6, nullptr, "tiny-phi3-f16.logits.bin"},
                                {"tiny-gemma2-f32", 2e-6},
                                {"tiny-gemma3-f32", 2e-6}};
// Every 2-D weight in one type, then llama-quantize's mixes.
const Oracle kQuantOracles[] = {
    {"tiny-llama-q4_1", 5e-4},   {"tiny-llama-q5_0", 5e-4},  {"tiny-llama-q5_1", 5e-4},
    {"tiny-llama-q2_k", 5e-4},   {"tiny-llama-q3_k", 5e-4},  {"tiny-llama-q4_k", 5e-4},
    {"tiny-llama-q5_k", 5e-4},   {"tiny-llama-q6_k", 5e-4},  {"tiny-llama-iq4_nl", 5e-4},
    {"tiny-llama-q4_k_m", 5e-4}, {"tiny-llama-q5_k_m", 5e-4}};
// The I-quants (every 2-D weight in one type, then llama-quantize's IQ2_M and IQ3_M mixes).
const Oracle kIQuantOracles[] = {{"tiny-llama-iq1_s", 5e-4},   {"tiny-llama-iq1_m", 5e-4},
                                 {"tiny-llama-iq2_xxs", 5e-4}, {"tiny-llama-iq2_xs", 5e-4},
                                 {"tiny-llama-iq2_s", 5e-4},   {"tiny-llama-iq3_xxs", 5e-4},
                                 {"tiny-llama-iq3_s", 5e-4},   {"tiny-llama-iq4_xs", 5e-4},
                                 {"tiny-llama-iq2_m", 5e-4},   {"tiny-llama-iq3_m", 5e-4}};
// Mixtures of experts: Qwen3-MoE in F32 and llama-quantize's Q4_K_M mix (3-D expert tensors in
// Q4_K/Q6_K), Mixtral (llama with experts).
const Oracle kMoeOracles[] = {
    {"tiny-qwen3moe-f32", 2e-6}, {"tiny-mixtral-f32", 2e-6}, {"tiny-qwen3moe-q4_k_m", 5e-4}};
// gpt-oss (attention sinks, alternating sliding window, YaRN, biased experts with the clamped
// SwiGLU) in F32 and llama-quantize's MXFP4_MOE mix (MXFP4 experts, Q8_0 elsewhere). On OpenCL0
// the nodes it has no kernel for (MUL_MAT_ID, ADD_ID, GLU, attention with sinks)
// fall back to the CPU.
const Oracle kGptOssOracles[] = {{"tiny-gptoss-f32", 2e-6}, {"tiny-gptoss-mxfp4", 5e-4}};
// tests/fixtures/archs: granite (its four scales, biases everywhere; and without rope), smollm3 (no
// rope on layer 3, tied output), each also 256 wide in llama-quantize's Q4_K_M mix...
const Oracle kFixtureOracles[] = {
    {"tiny-granite-f32", 2e-6, "archs"},
    {"tiny-granite-norope-f32", 2e-6, "archs"},
    {"tiny-smollm3-f32", 2e-6, "archs"},
    {"tiny-granite-q4_k_m", 5e-5, "archs"},  // with rope_freqs; llama.cpp -fa 0 vs -fa 1: 5.2e-6
    // This file amplifies rounding: llama.cpp's own logits with -fa 0 and -fa 1 (F16 cache) differ
    // by NMSE 7.3e-4, so the bound is that spread (Tessera: 7.2e-4 from -fa 1, 6.4e-4 from -fa 0).
    {"tiny-smollm3-q4_k_m", 1e-3, "archs"},
    // tests/fixtures/fidelity: a Llama 512 wide in the Q5_K_M mix, against
    // llama.cpp's default (-fa 1) logits; FidelityOracle has the tight check.
    {"llama-wide-q5_k_m", 5e-4, "fidelity", "llama-wide-q5_k_m.fa1.logits.bin"}};
// ... and the mixtures of experts: granitemoe (renormalised, a shared expert), olmoe (norms of the
// whole Q/K projections, weights not renormalised) in F32 and llama-quantize's Q4_K_M mix.
const Oracle kFixtureMoeOracles[] = {{"tiny-granitemoe-f32", 2e-6, "archs"},
                                     {"tiny-olmoe-f32", 2e-6, "archs"},
                                     {"tiny-olmoe-q4_k_m", 5e-4, "archs"}};

// One oracle on one device ("CPU", or a device from the Registry with every layer on it).
struct OracleRun {
  std::string device;
  Oracle oracle;
  bool flash_attn = false;  // the default (composed attention); the CPU also runs every oracle fused
};

// The devices and the oracles each runs: one line per device and set of weight types.
std::vector<OracleRun> runs() {
  std::vector<OracleRun> out;
  auto on = [&](const char* device, const auto& oracles, bool flash_attn = false) {
    for (const Oracle& o : oracles) out.push_back({device, o, flash_attn});
  };
  on("CPU", kFloatOracles);
  on("CPU", kFloatOracles, /*flash_attn=*/true);
  on("CPU", kQuantOracles);
  on("CPU", kQuantOracles, /*flash_attn=*/true);
  on("CPU", kIQuantOracles);
  on("CPU", kIQuantOracles, /*flash_attn=*/true);
  on("CPU", kMoeOracles);
  on("CPU", kMoeOracles, /*flash_attn=*/true);
  on("CPU", kGptOssOracles);
  on("CPU", kGptOssOracles, /*flash_attn=*/true);
  on("CPU", kFixtureOracles);
  on("CPU", kFixtureOracles, /*flash_attn=*/true);
  on("CPU", kFixtureMoeOracles);
  on("CPU", kFixtureMoeOracles, /*flash_attn=*/true);
  // The host runtime (ctest sets TESSERA_HOST_DEVICES=2): its executables fuse RMS_NORM + MUL.
  on("Host0", kFloatOracles);
  on("Host0", kFixtureOracles);
  // Layers split across two devices (--split-mode layer): each takes half, activations cross.
  on("Host0,Host1", kFloatOracles);
#if TESSERA_HAVE_OPENCL
  // Built with the OpenCL runtime, the test runs where its PoCL devices are: a missing one fails.
  on("OpenCL0", kFloatOracles);
  on("OpenCL0", kQuantOracles);
  on("OpenCL0", kIQuantOracles);
  on("OpenCL0", kMoeOracles);
  on("OpenCL0,OpenCL1", kFloatOracles);
  on("OpenCL0,OpenCL1", kQuantOracles);
  on("OpenCL0", kGptOssOracles);
  on("OpenCL0", kFixtureOracles);
  on("OpenCL0", kFixtureMoeOracles);
#endif
  return out;
}

std::string run_name(const testing::TestParamInfo<OracleRun>& info) {
  std::string s = info.param.device + (info.param.flash_attn ? "_fused_" : "_") + info.param.oracle.name;
  for (char& c : s)
    if (c == '-' || c == ',') c = '_';
  return s;
}

}  // namespace

class ArchitectureOracle : public testing::TestWithParam<OracleRun> {};

TEST_P(ArchitectureOracle, Matches) {
  const OracleRun& r = GetParam();
  LoadOptions lo;
  if (r.device != "CPU") {
    for (size_t b = 0; b < r.device.size();) {  // each device of a split
      const size_t e = std::min(r.device.find(',', b), r.device.size());
      ASSERT_NE(Registry::instance().find(r.device.substr(b, e - b)), nullptr)
          << "no " << r.device << " (POCL_DEVICES=\"pthread pthread\" runs OpenCL on the CPU)";
      b = e + 1;
    }
    lo.n_gpu_layers = 99;
    lo.device = r.device;
  }
  check_against_oracle(r.oracle, lo, r.flash_attn);
}

INSTANTIATE_TEST_SUITE_P(Files, ArchitectureOracle, testing::ValuesIn(runs()), run_name);

// A shape where how activations are rounded shows (issue 32's fidelity defect): on this file llama.cpp
// agrees with itself across CPUs only to about 1e-4 (its Q8_K activations amplify the last bit of
// every sum), and our own kernel tables (scalar against AVX2) differ by 1.2e-4. Without flash
// attention llama.cpp multiplies the F16 KV cache by Q and by the softmax rounded to f16 (MUL_MAT's
// semantics for F16 weights); an engine that keeps them in f32 lands at 3.3e-4 with 2 of 48 argmax
// different. The composed attention rounds as llama.cpp does: 1.0e-4, every argmax equal.
TEST(FidelityOracle, ComposedAttentionRoundsAsLlamaCppWithoutFlashAttention) {
  check_against_oracle({"llama-wide-q5_k_m", 1.6e-4, "fidelity", "llama-wide-q5_k_m.fa0.logits.bin"},
                       LoadOptions{},
                       /*flash_attn=*/false);
}
