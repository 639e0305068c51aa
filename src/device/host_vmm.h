#pragma once
// Virtual memory on the host, with the seam's interface: address space reserved with
// mmap(PROT_NONE), committed with mprotect. Lets the VMM pool run where a device runtime has no
// virtual memory (OpenCL), and gives the CPU backend a scratch area that grows in place.
#include <cstddef>
#include <memory>

#include "device/pool.h"
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

// One scratch region that grows in place (its address never changes): memory(bytes) returns
// at least `bytes`, valid until the next call.
class HostScratchArena {
 public:
  explicit HostScratchArena(size_t max_size = size_t{64} << 30);
  ~HostScratchArena();
  char* memory(size_t bytes);
  const VmmPool& pool() const noexcept { return *pool_; }

 private:
  HostVirtualMemory vm_;
  std::unique_ptr<VmmPool> pool_;
  Scratch current_;
};

}  // namespace tessera::device
