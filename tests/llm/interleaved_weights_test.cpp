// A model on the CPU alone keeps its Q4_0 / Q8_0 / F16 / BF16 matrices in the CPU's interleaved
// layout (cpu::interleaved_buffer_type()): the token embeddings stay in ggml's blocks, every weight
// reads back as the file's bytes, and the logits are those of the same file read into memory (which
// keeps ggml's blocks): up to the order of the float additions for Q4_0 / Q8_0, the same bits for
// the 16-bit floats.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/buffer.h"
#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/llm/model.h"
#include "tessera/llm/quantize.h"
#include "tessera/llm/session.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

const std::string kTinyLlama = std::string(TESSERA_SHARED_DIR) + "/models/oracle/tiny-llama-f32.gguf";

bool interleaved(const Tensor* t) {
  return t != nullptr && t->buffer != nullptr && &t->buffer->type() == &cpu::interleaved_buffer_type();
}

std::vector<float> all_logits(const Model& model, const std::vector<Token>& tokens) {
  SessionOptions so;
  so.n_ctx = 64;
  so.n_threads = 2;
  // The online softmax keeps Q and the weights in f32: the composed attention would round them to
  // f16 (MUL_MAT's rule for the F16 cache), where the last bit of a sum can fall the other way.
  so.flash_attn = true;
  Session s(model, so);
  return s.decode(tokens, /*all_logits=*/true);
}

// The tiny llama written in `type` (every matrix: pure), loaded mapped (a CPU model:
// interleaved) and read into memory (ggml's blocks, no second copy); checks which weights each
// keeps interleaved and that an interleaved weight reads back as the file's bytes.
struct BothWays {
  decltype(Model::load(std::string())) mapped, read;
};
BothWays tiny_llama_both_ways(const char* type) {
  const std::string path = ::testing::TempDir() + "/interleaved-tiny-llama-" + type + ".gguf";
  QuantizeOptions q;
  q.type = type;
  q.pure = true;
  q.threads = 2;
  quantize_model(kTinyLlama, path, q);
  BothWays both{Model::load(path), nullptr};
  LoadOptions in_memory;
  in_memory.use_mmap = false;
  both.read = Model::load(path, in_memory);
  const Model& m = *both.mapped;
  for (const Tensor* t : {m.weight("blk.0.attn_q.weight"), m.weight("blk.0.attn_k.weight"),
                          m.weight("blk.0.attn_v.weight"), m.weight("blk.0.attn_output.weight"),
                          m.weight("blk.0.ffn_gate.weight"), m.weight("blk.0.ffn_down.weight"), m.output()})
    EXPECT_TRUE(interleaved(t)) << t->describe();
  EXPECT_FALSE(interleaved(m.token_embd()));  // GET_ROWS reads it
  EXPECT_FALSE(interleaved(both.read->weight("blk.0.attn_q.weight")));
  const Tensor* ffn_down = m.weight("blk.0.ffn_down.weight");

  const gguf::File file = gguf::File::open(path);
  const gguf::TensorInfo* info = file.find_tensor("blk.0.ffn_down.weight");
  EXPECT_NE(info, nullptr);
  if (info != nullptr) {
    std::vector<char> back(ffn_down->nbytes());
    tensor_get(*ffn_down, back.data(), 0, back.size());
    EXPECT_EQ(0, std::memcmp(back.data(), file.tensor_data(*info), back.size()));
  }
  return both;
}

}  // namespace

TEST(InterleavedWeights, CpuModelsKeepQ4_0AndQ8_0MatricesInterleaved) {
  const std::vector<Token> tokens = {1, 35, 87, 203, 12, 499, 7, 64, 300, 11};
  for (const char* type : {"q4_0", "q8_0"}) {
    SCOPED_TRACE(type);
    const BothWays both = tiny_llama_both_ways(type);
    const Model& mapped = *both.mapped;
    const Model& read = *both.read;
    const std::vector<float> a = all_logits(mapped, tokens), b = all_logits(read, tokens);
    ASSERT_EQ(a.size(), b.size());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      err += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
      norm += static_cast<double>(b[i]) * b[i];
    }
    EXPECT_LT(err / norm, 1e-10);  // the same products, summed in another order (measured 4e-14)
    const auto n_vocab = static_cast<size_t>(mapped.hparams().n_vocab);
    for (size_t t = 0; t < tokens.size(); ++t)
      EXPECT_EQ(std::max_element(a.begin() + t * n_vocab, a.begin() + (t + 1) * n_vocab) - a.begin(),
                std::max_element(b.begin() + t * n_vocab, b.begin() + (t + 1) * n_vocab) - b.begin())
          << "position " << t;
  }
}

TEST(InterleavedWeights, HalfFloatModelsGiveTheLogitsOfGgmlRowsExactly) {
  const std::vector<Token> tokens = {1, 35, 87, 203, 12, 499, 7, 64, 300, 11};
  for (const char* type : {"f16", "bf16"}) {
    SCOPED_TRACE(type);
    const BothWays both = tiny_llama_both_ways(type);
    const Model& mapped = *both.mapped;
    const Model& read = *both.read;

    // A prompt (the tile kernels) and then one token at a time (the matrix-vector kernels).
    EXPECT_EQ(all_logits(mapped, tokens), all_logits(read, tokens));
    SessionOptions so;
    so.n_ctx = 64;
    so.n_threads = 2;
    Session a(mapped, so), b(read, so);
    for (Token t : tokens) {
      const std::vector<Token> one = {t};
      const std::vector<float> la = a.decode(one);
      ASSERT_EQ(la, b.decode(one)) << "token " << t;
    }
  }
}

// The experts of a mixture of experts (3-D tensors read by MUL_MAT_ID) are interleaved too, each
// expert's matrix from its ggml offset, and read back as the file's bytes. F16 / BF16: the logits
// are those of ggml's blocks, bit for bit, for a prompt (the tile kernels, tokens grouped by expert)
// and one token at a time (matrix-vector), with the same experts picked. Q4_0 / Q8_0 multiply b
// rounded to Q8_0, so the last-bit differences of another addition order (1e-14) can round an
// activation the other way: the qwen3moe in Q4_0 differs by up to 5.4e-5 with the same experts
// picked, and by the same figures with its experts in ggml's blocks (only its 2-D matrices
// interleaved, as before experts were): the activations' rounding, not the layout. There the bound
// is 1e-4; the op itself is exact (CpuInterleave.MulMatIdReadsEachExpertFromItsGroups).
TEST(InterleavedWeights, MixtureOfExpertsKeepsItsExpertsInterleaved) {
  const std::vector<Token> tokens = {1, 35, 87, 203, 12, 99, 7, 64, 150, 11};
  for (const char* file : {"tiny-qwen3moe-f32", "tiny-mixtral-f32"})
    for (const char* type : {"q4_0", "q8_0", "f16", "bf16"}) {
      SCOPED_TRACE(std::string(file) + " " + type);
      const std::string path = ::testing::TempDir() + "/interleaved-" + file + "-" + type + ".gguf";
      QuantizeOptions q;
      q.type = type;
      q.pure = true;
      q.threads = 2;
      quantize_model(std::string(TESSERA_SHARED_DIR) + "/models/oracle/" + file + ".gguf", path, q);
      auto mapped = Model::load(path);
      LoadOptions in_memory;
      in_memory.use_mmap = false;
      auto read = Model::load(path, in_memory);
      const gguf::File f = gguf::File::open(path);
      for (const char* what : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        const std::string name = fmt::format("blk.1.{}.weight", what);
        const Tensor* t = mapped->weight(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_GT(t->ne[2], 1);
        EXPECT_TRUE(interleaved(t)) << t->describe();
        EXPECT_FALSE(interleaved(read->weight(name)));
        std::vector<char> back(t->nbytes());
        tensor_get(*t, back.data(), 0, back.size());
        EXPECT_EQ(0, std::memcmp(back.data(), f.tensor_data(*f.find_tensor(name)), back.size())) << name;
      }

      const bool exact = std::string(type) == "f16" || std::string(type) == "bf16";
      SessionOptions so;
      so.n_ctx = 64;
      so.n_threads = 2;
      so.flash_attn = true;
      Session a(*mapped, so), b(*read, so);
      // Every expert each decode's routers picked (the ids of its MUL_MAT_IDs).
      std::vector<int32_t> routes_a, routes_b;
      const auto record = [](std::vector<int32_t>& to) {
        return [&to](const Session::MatMulInput& in) {
          if (in.ids != nullptr) to.insert(to.end(), in.ids, in.ids + in.ids_ne[0] * in.ids_ne[1]);
        };
      };
      a.set_mat_mul_observer(record(routes_a));
      b.set_mat_mul_observer(record(routes_b));
      int rerouted = 0;
      const auto decode_both = [&](const std::vector<Token>& batch, bool all) {
        routes_a.clear();
        routes_b.clear();
        const std::vector<float> la = a.decode(batch, all), lb = b.decode(batch, all);
        ASSERT_EQ(la.size(), lb.size());
        ASSERT_FALSE(routes_a.empty());
        if (exact) {
          EXPECT_EQ(routes_a, routes_b);
          EXPECT_EQ(la, lb);
          return;
        }
        if (routes_a != routes_b) {  // a router near a tie, after such a rounding
          ++rerouted;
          return;
        }
        double err = 0.0, norm = 0.0;
        for (size_t i = 0; i < la.size(); ++i) {
          err += (static_cast<double>(la[i]) - lb[i]) * (static_cast<double>(la[i]) - lb[i]);
          norm += static_cast<double>(lb[i]) * lb[i];
        }
        EXPECT_LT(err / norm, 1e-4);
      };
      decode_both(tokens, /*all=*/true);
      for (Token t : tokens) decode_both({t}, false);
      EXPECT_LE(rerouted, 2) << "decodes whose routers picked other experts";
    }
}
