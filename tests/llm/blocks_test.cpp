// The shared graph blocks' norms against hand-computed values.
#include "llm/blocks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tessera/allocator.h"
#include "tessera/buffer.h"
#include "tessera/cpu.h"

using namespace tessera;
using namespace tessera::llm;

namespace {

// x = [[1, 2, 3, 6], [-2, 0, 2, 4]] (two rows of 4), weight w, bias c.
std::vector<float> run_norm(bool layer) {
  auto model = Model::load(std::string(TESSERA_SHARED_DIR) + "/models/stories260K.gguf");
  KvCache cache(4);
  Context ctx;
  Graph graph;
  GraphBuild b(ctx, graph, *model, cache);
  Tensor* x = ctx.new_tensor(DType::F32, 4, 2);
  Tensor* w = ctx.new_tensor(DType::F32, 4);
  Tensor* c = ctx.new_tensor(DType::F32, 4);
  auto buffer = host_buffer_type().allocate(4096);
  buffer->place(*x, 0);
  buffer->place(*w, 1024);
  buffer->place(*c, 2048);
  const float xv[] = {1, 2, 3, 6, -2, 0, 2, 4}, wv[] = {1, 2, 0.5f, -1}, cv[] = {0.5f, 0, 0, 1};
  tensor_set(*x, xv, 0, sizeof xv);
  tensor_set(*w, wv, 0, sizeof wv);
  tensor_set(*c, cv, 0, sizeof cv);
  Tensor* out = layer ? layer_norm(b, x, w, c, 0.0f, "n", 0) : rms_norm(b, x, w, 0.0f, "n", 0);
  EXPECT_EQ(out->name, "n.0");
  graph.expand(out);
  GraphAllocator alloc(host_buffer_type());
  alloc.allocate(graph);
  cpu::CpuBackend(1).compute(graph);
  std::vector<float> got(8);
  tensor_get(*out, got.data(), 0, sizeof(float) * 8);
  return got;
}

}  // namespace

TEST(Blocks, RmsNormTimesWeight) {
  // Row 0: mean square (1 + 4 + 9 + 36) / 4 = 12.5; row 1: (4 + 0 + 4 + 16) / 4 = 6.
  const std::vector<float> got = run_norm(false);
  const float r0 = 1.0f / std::sqrt(12.5f), r1 = 1.0f / std::sqrt(6.0f);
  const float expected[] = {1 * r0, 4 * r0, 1.5f * r0, -6 * r0, -2 * r1, 0, 1 * r1, -4 * r1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(Blocks, LayerNormTimesWeightPlusBias) {
  // Row 0: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5; row 1: mean 1, variance (9 + 1 + 1 + 9) / 4 = 5.
  const std::vector<float> got = run_norm(true);
  const float s0 = 1.0f / std::sqrt(3.5f), s1 = 1.0f / std::sqrt(5.0f);
  const float expected[] = {-2 * s0 + 0.5f, -2 * s0, 0,         -3 * s0 + 1,  //
                            -3 * s1 + 0.5f, -2 * s1, 0.5f * s1, -3 * s1 + 1};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
}
