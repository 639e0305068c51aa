#pragma once
// Runs one graph on the CPU reference backend and on an OpenCL device with the same inputs, and
// returns both results' byte images.
#include <functional>
#include <vector>

#include "opencl/opencl_test_util.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"

namespace tessera::test {

struct BuiltGraph {
  std::vector<Tensor*> inputs;   // leafs filled from `images` (in order)
  std::vector<Tensor*> results;  // tensors whose images are compared
  std::vector<Tensor*> outputs;  // graph outputs
};

struct BothResults {
  std::vector<std::vector<uint8_t>> cpu, device;
};

inline BothResults run_on_cpu_and_device(Device& dev, const std::function<BuiltGraph(Context&)>& build,
                                         const std::vector<std::vector<uint8_t>>& images) {
  BothResults r;
  {
    Context host(true);
    BuiltGraph g = build(host);
    for (size_t i = 0; i < g.inputs.size(); ++i)
      tensor_set(*g.inputs[i], images[i].data(), 0, images[i].size());
    Graph graph(g.outputs);
    cpu::CpuBackend(1, cpu::KernelSet::Reference).compute(graph);
    for (Tensor* t : g.results) r.cpu.push_back(read_image(*t));
  }
  Context ctx;
  BuiltGraph g = build(ctx);
  auto buffer = allocate_all(dev.buffer_type(), ctx);
  buffer->clear(0);
  auto backend = dev.make_backend();
  for (size_t i = 0; i < g.inputs.size(); ++i)
    backend->set_async(*g.inputs[i], images[i].data(), 0, images[i].size());
  Graph graph(g.outputs);
  backend->compute(graph);
  backend->synchronize();
  for (Tensor* t : g.results) r.device.push_back(read_image(*t));
  return r;
}

}  // namespace tessera::test
