// Whole graphs on the CPU backend's persistent workers: a transformer-like block (quantized and F16
// matrix products, norms, rope, softmax, activations) computed many times on 2, 3 and 4 threads
// gives exactly the bytes of the single-thread run, graph after graph on the same backend, with
// every node on the pool and with small nodes left to the caller.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/tensor_data.h"
#include "tessera/blocks.h"
#include "tessera/context.h"
#include "tessera/convert.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/quant.h"

namespace tessera {
namespace {

using test::fill_random;
using test::random_values;
using test::raw_bytes;

constexpr int64_t kEmbd = 256, kFf = 512, kHeadDim = 32, kHeads = kEmbd / kHeadDim;

// Weight [k, m] of a block type, quantized from random values.
Tensor* quantized_weight(Context& ctx, DType type, int64_t k, int64_t m, uint32_t seed) {
  Tensor* w = ctx.new_tensor(type, k, m);
  const std::vector<float> v = random_values(k * m, seed);
  for (int64_t r = 0; r < m; ++r) {
    char* row = static_cast<char*>(w->data) + r * w->nb[1];
    if (type == DType::Q4_0)
      quantize_row_q4_0(v.data() + r * k, reinterpret_cast<BlockQ4_0*>(row), k);
    else
      quantize_row_q8_0(v.data() + r * k, reinterpret_cast<BlockQ8_0*>(row), k);
  }
  return w;
}

struct Block {
  Context ctx{true};
  Tensor* x = nullptr;
  Tensor* out = nullptr;
  std::vector<Tensor*> nodes;  // every result checked, not only the last
};

// n_tokens tokens through: attention-like (Q from a Q8_0 matrix, rope, softmax over scores of
// the tokens against themselves) and a gated FFN (Q4_0 up/gate, F16 down), with residuals.
std::unique_ptr<Block> make_block(int64_t n_tokens) {
  auto b = std::make_unique<Block>();
  Context& c = b->ctx;
  b->x = c.new_tensor(DType::F32, kEmbd, n_tokens);
  fill_random(b->x, 1);
  Tensor* norm_w = c.new_tensor(DType::F32, kEmbd);
  fill_random(norm_w, 2, 0.5f, 1.5f);
  Tensor* wq = quantized_weight(c, DType::Q8_0, kEmbd, kEmbd, 3);
  Tensor* up = quantized_weight(c, DType::Q4_0, kEmbd, kFf, 4);
  Tensor* gate = quantized_weight(c, DType::Q4_0, kEmbd, kFf, 5);
  Tensor* down = c.new_tensor(DType::F16, kFf, kEmbd);
  const std::vector<float> dv = random_values(kFf * kEmbd, 6, -0.1f, 0.1f);
  fp32_to_fp16_row(dv.data(), static_cast<uint16_t*>(down->data), kFf * kEmbd);
  Tensor* pos = c.new_tensor(DType::I32, n_tokens);
  for (int64_t i = 0; i < n_tokens; ++i) static_cast<int32_t*>(pos->data)[i] = static_cast<int32_t>(i + 7);

  auto keep = [&](Tensor* t) {
    b->nodes.push_back(t);
    return t;
  };
  Tensor* h = keep(ops::mul(c, keep(ops::rms_norm(c, b->x, 1e-5f)), norm_w));
  Tensor* q = keep(ops::mul_mat(c, wq, h));
  ops::RopeParams rp;
  rp.n_dims = kHeadDim;
  Tensor* qr = keep(ops::rope(c, ops::reshape(c, q, kHeadDim, kHeads, n_tokens), pos, nullptr, rp));
  // Scores of every token's heads against every token's heads: [kHeads * n_tokens, kHeads * n_tokens].
  Tensor* flat = keep(ops::cont(c, ops::reshape(c, qr, kHeadDim, kHeads * n_tokens)));
  Tensor* scores = keep(ops::mul_mat(c, flat, flat));
  Tensor* probs = keep(ops::soft_max(c, scores, nullptr, 0.125f));
  Tensor* mixed = keep(ops::mul_mat(c, keep(ops::cont(c, ops::transpose(c, flat))), probs));
  Tensor* attn = keep(ops::add(c, b->x, ops::reshape(c, mixed, kEmbd, n_tokens)));
  Tensor* f = keep(ops::rms_norm(c, attn, 1e-5f));
  Tensor* g = keep(ops::unary(c, keep(ops::mul_mat(c, gate, f)), UnaryOp::Silu));
  Tensor* u = keep(ops::mul(c, g, keep(ops::mul_mat(c, up, f))));
  b->out = keep(ops::add(c, attn, keep(ops::mul_mat(c, down, u))));
  return b;
}

std::vector<std::vector<uint8_t>> results(const Block& b) {
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor* t : b.nodes) out.push_back(raw_bytes(*t));
  return out;
}

void scramble(const Block& b) {
  for (const Tensor* t : b.nodes) std::memset(t->data, 0xA5, t->nbytes());
}

TEST(CpuGraphThreads, ManyGraphsOnOneToFourThreadsMatchTheSingleThreadRunByteForByte) {
  for (int64_t n_tokens : {1, 2, 9}) {  // generation-shaped and prompt-shaped
    auto block = make_block(n_tokens);
    Graph graph{block->out};
    cpu::CpuBackend single(1, cpu::KernelSet::Fast, cpu::ThreadLimit::Exact);
    single.compute(graph);
    const auto expected = results(*block);
    for (int threads = 2; threads <= 4; ++threads) {
      for (size_t min_bytes : {size_t{0}, cpu::CpuBackend::kDefaultParallelBytes}) {
        cpu::CpuBackend backend(threads, cpu::KernelSet::Fast, cpu::ThreadLimit::Exact);
        backend.set_min_parallel_bytes(min_bytes);
        for (int round = 0; round < 40; ++round) {
          scramble(*block);
          backend.compute(graph);
          const auto got = results(*block);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(got[i], expected[i])
                << "tokens " << n_tokens << " threads " << threads << " min bytes " << min_bytes << " round "
                << round << " node " << i << " (" << block->nodes[i]->describe() << ")";
        }
      }
    }
  }
}

// Graphs of different shapes back to back on the same workers, as a server's micro-batches are.
TEST(CpuGraphThreads, AlternatingGraphShapesOnTheSameWorkersStayExact) {
  auto small = make_block(1);
  auto large = make_block(5);
  Graph gs{small->out}, gl{large->out};
  cpu::CpuBackend single(1, cpu::KernelSet::Fast, cpu::ThreadLimit::Exact);
  single.compute(gs);
  single.compute(gl);
  const auto want_small = results(*small), want_large = results(*large);
  cpu::CpuBackend backend(3, cpu::KernelSet::Fast, cpu::ThreadLimit::Exact);
  backend.set_min_parallel_bytes(0);
  for (int round = 0; round < 60; ++round) {
    scramble(*small);
    scramble(*large);
    backend.compute(round % 2 ? gs : gl);
    backend.compute(round % 2 ? gl : gs);
    ASSERT_EQ(results(*small), want_small) << round;
    ASSERT_EQ(results(*large), want_large) << round;
  }
}

}  // namespace
}  // namespace tessera
