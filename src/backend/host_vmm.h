#pragma once
// Virtual memory on the host: address space reserved with mmap(PROT_NONE), committed with mprotect,
// decommitted with madvise. Below cpu and device, so both use it: the CPU backend's scratch arena,
// and device::HostVirtualMemory (the seam's VirtualMemory over host memory).
#include <cstddef>

namespace tessera {

size_t host_page_size() noexcept;
// An address range with nothing behind it; Error(OutOfMemory) when the address space is exhausted.
void* host_reserve(size_t size);
void host_release(void* base, size_t size) noexcept;
// Makes [addr, addr + size) readable and writable (page-aligned); Error(OutOfMemory) on failure.
void host_commit(void* addr, size_t size);
// Gives the pages back to the system and makes the range inaccessible again.
void host_decommit(void* addr, size_t size) noexcept;

// One scratch region that grows in place (its address never changes): memory(bytes) returns at
// least `bytes`, valid until the next call. Pages committed stay committed until destruction.
class HostScratchArena {
 public:
  explicit HostScratchArena(size_t max_size = size_t{64} << 30);
  ~HostScratchArena();
  HostScratchArena(const HostScratchArena&) = delete;
  HostScratchArena& operator=(const HostScratchArena&) = delete;

  // Error(OutOfMemory) beyond max_size or when the pages cannot be committed.
  char* memory(size_t bytes);
  size_t committed() const noexcept { return committed_; }

 private:
  size_t max_size_;
  char* base_ = nullptr;  // reserved at first use
  size_t committed_ = 0;
};

}  // namespace tessera
