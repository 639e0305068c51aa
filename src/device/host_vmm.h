#pragma once
// The seam's VirtualMemory over host memory (backend/host_vmm.h): lets the VMM pool run where a
// device runtime has no virtual memory of its own (OpenCL), and host-memory runtimes use it as theirs.
#include <cstddef>
#include <memory>

#include "device/runtime.h"

namespace tessera::device {

class HostVirtualMemory final : public VirtualMemory {
 public:
  // granularity 0 = the page size; otherwise a multiple of it.
  explicit HostVirtualMemory(size_t granularity = 0);
  size_t granularity() const override { return granularity_; }
  void* reserve(size_t size) override;
  void release(void* base, size_t size) noexcept override;
  std::unique_ptr<PhysicalMemory> create_physical(size_t size) override;
  void map(void* addr, PhysicalMemory& memory) override;
  void unmap(void* addr, size_t size) noexcept override;

 private:
  size_t granularity_;
};

}  // namespace tessera::device
