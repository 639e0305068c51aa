#pragma once
// The CPU backend: reference kernels (plain, obviously right) and fast kernels, over a thread pool.
#include <memory>
#include <vector>

#include "tessera/backend.h"
#include "tessera/device.h"

namespace tessera::device {
class HostScratchArena;
}

namespace tessera::cpu {

enum class KernelSet { Fast, Reference };

class ThreadPool;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads = 0, KernelSet kernels = KernelSet::Fast);  // 0 = all cores
  ~CpuBackend() override;
  std::string name() const override;
  Device& device() const override;
  void compute(Graph& graph) override;
  bool supports(const Tensor& op) const override;
  void set_threads(int n_threads);
  int threads() const noexcept { return n_threads_; }
  KernelSet kernels() const noexcept { return kernels_; }

 private:
  int n_threads_;
  KernelSet kernels_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<device::HostScratchArena> scratch_;  // kernels' work memory: a VMM pool on the host
};

// Number of hardware threads (at least 1).
int hardware_threads() noexcept;
// The CPU device (also registered as "CPU").
Device& cpu_device();

}  // namespace tessera::cpu
