// The quantizers against llama.cpp's own output: ../shared/models/oracle/tiny-llama-<type>.gguf are
// llama-quantize --pure runs over tiny-llama-f32.gguf's weights (no importance matrix), so
// quantizing each F32 weight with quantize_weights must give every block of the file byte for byte.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/quant.h"

using namespace tessera;

namespace {

const std::string kOracleDir = std::string(TESSERA_SHARED_DIR) + "/models/oracle/";

struct Comparison {
  int tensors = 0;
  int64_t blocks = 0;
  int64_t differing_blocks = 0;
  std::string first_difference;
};

// Every tensor of `file` in `type`, requantized from the F32 original, block by block.
Comparison compare_with_file(const gguf::File& f32, const std::string& file, DType type) {
  const gguf::File q = gguf::File::open(kOracleDir + file);
  Comparison c;
  const size_t block_bytes = traits(type).block_bytes;
  for (const gguf::TensorInfo& ti : q.tensors()) {
    if (ti.type != type) continue;
    const gguf::TensorInfo* ref = f32.find_tensor(ti.name);
    EXPECT_NE(ref, nullptr) << ti.name;
    if (ref == nullptr) continue;
    EXPECT_EQ(ref->type, DType::F32) << ti.name;
    const int64_t n = ti.ne[0] * ti.ne[1] * ti.ne[2] * ti.ne[3];
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), f32.tensor_data(*ref), x.size() * sizeof(float));
    std::vector<std::byte> ours(ti.nbytes);
    quantize_weights(type, x.data(), ours.data(), n);
    const std::byte* theirs = q.tensor_data(ti);
    for (size_t b = 0; b * block_bytes < ti.nbytes; ++b) {
      ++c.blocks;
      if (std::memcmp(ours.data() + b * block_bytes, theirs + b * block_bytes, block_bytes) != 0) {
        if (c.differing_blocks++ == 0) c.first_difference = ti.name + " block " + std::to_string(b);
      }
    }
    ++c.tensors;
  }
  return c;
}

}  // namespace

TEST(QuantLlamaFiles, EveryBlockAsLlamaQuantizeWroteIt) {
  const gguf::File f32 = gguf::File::open(kOracleDir + "tiny-llama-f32.gguf");
  const struct {
    const char* file;
    DType type;
  } cases[] = {
      {"tiny-llama-q4_1.gguf", DType::Q4_1},     {"tiny-llama-q5_0.gguf", DType::Q5_0},
      {"tiny-llama-q5_1.gguf", DType::Q5_1},     {"tiny-llama-q2_k.gguf", DType::Q2_K},
      {"tiny-llama-q3_k.gguf", DType::Q3_K},     {"tiny-llama-q4_k.gguf", DType::Q4_K},
      {"tiny-llama-q5_k.gguf", DType::Q5_K},     {"tiny-llama-q6_k.gguf", DType::Q6_K},
      {"tiny-llama-iq4_nl.gguf", DType::IQ4_NL},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const Comparison r = compare_with_file(f32, c.file, c.type);
    // --pure: every 2-D weight (7 per layer, token_embd and output) is in the file's type.
    EXPECT_EQ(r.tensors, 16);
    EXPECT_EQ(r.differing_blocks, 0) << "of " << r.blocks << " blocks; first: " << r.first_difference;
  }
}
