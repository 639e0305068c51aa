// Linked with tessera_cpu, tessera_backend and tessera_core only (no runtime, no Registry): the CPU
// backend computes a small graph, and its device is the CPU's own static device. Exits 0 on success.
#include <cstdio>
#include <cstring>

#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/device.h"
#include "tessera/graph.h"
#include "tessera/ops.h"

int main() {
  using namespace tessera;
  Context ctx(/*allocate_data=*/true);
  Tensor* a = ctx.new_tensor(DType::F32, 3);
  Tensor* b = ctx.new_tensor(DType::F32, 3);
  const float av[3] = {1.0f, -2.0f, 0.5f}, bv[3] = {10.0f, 20.0f, 0.25f};
  std::memcpy(a->data, av, sizeof av);
  std::memcpy(b->data, bv, sizeof bv);
  Tensor* sum = ops::add(ctx, a, b);
  Graph graph{sum};
  cpu::CpuBackend backend(/*n_threads=*/2);
  backend.compute(graph);
  const float* out = static_cast<const float*>(sum->data);
  const float expected[3] = {11.0f, 18.0f, 0.75f};
  for (int i = 0; i < 3; ++i) {
    if (out[i] != expected[i]) {
      std::fprintf(stderr, "sum[%d] = %g, expected %g\n", i, out[i], expected[i]);
      return 1;
    }
  }
  if (&backend.device() != &cpu::cpu_device() || cpu::cpu_device().name() != "CPU") {
    std::fprintf(stderr, "the CPU backend's device is not the CPU device\n");
    return 1;
  }
  std::puts("CPU backend ran without the Registry");
  return 0;
}
