// CONCAT on OpenCL with an empty side (the conformance harness concatenates non-empty tensors).
#include <gtest/gtest.h>

#include "opencl/device_run.h"
#include "tessera/ops.h"

using namespace tessera;

TEST(OpenClConcat, AnEmptySideContributesNothing) {
  const std::vector<float> a{1, 2, 3, 4, 5, 6};
  for (int dim : {0, 1}) {
    // a [3, 2] with an empty b along dim, on either side.
    for (bool empty_first : {false, true}) {
      const auto got = test::run_on_device(1, [&](Context& ctx) {
        Tensor* full = ctx.new_tensor(DType::F32, 3, 2);
        Tensor* empty = dim == 0 ? ctx.new_tensor(DType::F32, 0, 2) : ctx.new_tensor(DType::F32, 3, 0);
        Tensor* out = empty_first ? ops::concat(ctx, empty, full, dim) : ops::concat(ctx, full, empty, dim);
        return test::DeviceGraph{{{full, a}, {empty, {}}}, out};
      });
      EXPECT_EQ(got, a) << "dim " << dim << (empty_first ? ", empty first" : ", empty second");
    }
  }
}
