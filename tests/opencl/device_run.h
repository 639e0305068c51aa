#pragma once
// Runs a small graph on one OpenCL device with given input values and returns the output as f32
// (what the op tests that need hand-picked inputs use; the conformance harness covers the rest).
#include <functional>
#include <utility>
#include <vector>

#include "opencl/opencl_test_util.h"
#include "tessera/backend.h"
#include "tessera/graph.h"

namespace tessera::test {

struct DeviceGraph {
  std::vector<std::pair<Tensor*, std::vector<float>>> inputs;  // contiguous leafs and their values
  Tensor* output = nullptr;                                    // contiguous
};

// The output's values as f32 (I32 converts exactly) after running build()'s graph on OpenCL<dev>.
inline std::vector<float> run_on_device(int dev, const std::function<DeviceGraph(Context&)>& build) {
  Device& device = opencl_device(dev);
  Context ctx;
  DeviceGraph g = build(ctx);
  auto buffer = allocate_all(device.buffer_type(), ctx);
  auto backend = device.make_backend();
  std::vector<std::vector<uint8_t>> images;  // alive until the uploads are done
  for (auto& [t, values] : g.inputs) {
    EXPECT_EQ(static_cast<int64_t>(values.size()), t->nelements());
    images.emplace_back(row_bytes(t->type, t->nelements()));
    from_f32_row(t->type, values.data(), images.back().data(), t->nelements());
    backend->set_async(*t, images.back().data(), 0, images.back().size());
  }
  Graph graph{g.output};
  backend->compute(graph);
  backend->synchronize();
  const std::vector<uint8_t> bytes = read_image(*g.output);
  std::vector<float> out(static_cast<size_t>(g.output->nelements()));
  to_f32_row(g.output->type, bytes.data(), out.data(), g.output->nelements());
  return out;
}

}  // namespace tessera::test
