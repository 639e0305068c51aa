#pragma once
// The CPU backend: reference kernels (plain, obviously right) and fast kernels, over a thread pool.
#include <cstddef>
#include <memory>
#include <vector>

#include "tessera/backend.h"
#include "tessera/buffer.h"
#include "tessera/device.h"

namespace tessera::cpu {

enum class KernelSet { Fast, Reference };
// Hardware: more threads than hardware_threads() are clamped to it, with a warning.
// Exact: the count asked for (tests that check results do not depend on the thread count).
enum class ThreadLimit { Hardware, Exact };

class CpuBackend final : public Backend {
 public:
  // n_threads: 0 = all cores. Throws Error(OutOfMemory) when the system cannot start the threads.
  explicit CpuBackend(int n_threads = 0, KernelSet kernels = KernelSet::Fast,
                      ThreadLimit limit = ThreadLimit::Hardware);
  ~CpuBackend() override;
  std::string name() const override;
  Device& device() const override;
  void compute(Graph& graph) override;
  bool supports(const Tensor& op) const override;
  void set_threads(int n_threads);  // bounded as in the constructor
  int threads() const noexcept { return n_threads_; }
  // Nodes that read and write fewer bytes than this run on the calling thread alone, since handing
  // their work to the pool costs more than it saves (default kDefaultParallelBytes; 0: every node
  // goes to the pool, as the tests that compare thread counts want). Results are the same either way.
  static constexpr size_t kDefaultParallelBytes = 32 * 1024;
  void set_min_parallel_bytes(size_t bytes) noexcept { min_parallel_bytes_ = bytes; }
  KernelSet kernels() const noexcept { return kernels_; }

 private:
  struct Workers;  // the thread pool and the kernels' scratch memory (src/cpu/backend.cpp)

  int n_threads_;
  KernelSet kernels_;
  ThreadLimit limit_;
  size_t min_parallel_bytes_ = kDefaultParallelBytes;
  std::unique_ptr<Workers> workers_;
};

// Number of hardware threads (at least 1).
int hardware_threads() noexcept;
// The thread count a CPU backend uses for `requested` (0 = all cores): see ThreadLimit.
int bounded_threads(int requested, ThreadLimit limit = ThreadLimit::Hardware);
// The CPU device, first in the Registry as "CPU" (getting it does not create the Registry).
Device& cpu_device();
// Host memory for weights that only MUL_MAT reads: Q4_0, Q8_0, F16 and BF16 matrices are stored
// with their rows interleaved by 8 (docs/ARCHITECTURE.md), which the CPU's matrix-vector and tile
// kernels read faster; every other tensor as it is. tensor_get gives ggml's bytes back exactly.
BufferType& interleaved_buffer_type();

}  // namespace tessera::cpu
