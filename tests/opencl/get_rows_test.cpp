// GET_ROWS on OpenCL0 and OpenCL1 against the CPU reference backend (byte-exact), from every type,
// through a strided view of the table (rows of 256, so the super-block types have one block).
#include <gtest/gtest.h>

#include "opencl/ops_test_util.h"
#include "tessera/op_types.h"
#include "tessera/ops.h"

using namespace tessera;

namespace {

// The types the op table takes GET_ROWS from.
std::vector<DType> get_rows_types() {
  std::vector<DType> out;
  for (DType t : kAllDTypes)
    if (op_source_types(Op::GetRows, 0).contains(t)) out.push_back(t);
  return out;
}

}  // namespace

TEST(OpenClGetRows, EveryTypeMatchesTheCpu) {
  // table: every other row of a [256, 14, 2, 3] leaf -> [256, 7, 2, 3]; indices [4, 2, 3].
  const std::vector<DType> types = get_rows_types();
  auto build = [&](Context& ctx) {
    test::BuiltGraph g;
    for (DType t : types) {
      Tensor* leaf = ctx.new_tensor(t, 256, 14, 2, 3);
      Tensor* table = ops::view(ctx, leaf, {256, 7, 2, 3}, 2 * leaf->nb[1], leaf->nb[2], leaf->nb[3], 0);
      Tensor* idx = ctx.new_tensor(DType::I32, 4, 2, 3);
      Tensor* out = ops::get_rows(ctx, table, idx);
      g.inputs.insert(g.inputs.end(), {leaf, idx});
      g.outputs.push_back(out);
      g.results.push_back(out);
    }
    return g;
  };
  std::mt19937 rng(31);
  std::uniform_int_distribution<int32_t> row(0, 6);
  std::vector<std::vector<uint8_t>> images;
  for (DType t : types) {
    images.push_back(test::random_image(t, {256, 14, 2, 3}, rng));
    std::vector<uint8_t> idx(4 * 2 * 3 * 4);
    for (size_t i = 0; i < idx.size(); i += 4) {
      const int32_t v = row(rng);
      std::memcpy(idx.data() + i, &v, 4);
    }
    images.push_back(idx);
  }
  for (int dev = 0; dev < 2; ++dev) {
    const auto r = test::run_on_cpu_and_device(test::opencl_device(dev), build, images);
    for (size_t i = 0; i < r.cpu.size(); ++i)
      EXPECT_EQ(r.device[i], r.cpu[i]) << "OpenCL" << dev << " GET_ROWS from " << name(types[i]);
  }
}
