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

// One scratch region that grows on demand: memory(bytes) returns at least `bytes` (contents
// undefined), valid until the next call. It holds only the address space it has been asked for
// (rounded up, and at least doubled on growth so that growing is rare): a process under `ulimit -v`
// pays for the scratch a graph needs, not for a worst case. Growing reserves a new range and
// releases the old one, so the address may change between calls.
class HostScratchArena {
 public:
  // max_size bounds what one call may ask for (it reserves nothing).
  explicit HostScratchArena(size_t max_size = size_t{64} << 30);
  ~HostScratchArena();
  HostScratchArena(const HostScratchArena&) = delete;
  HostScratchArena& operator=(const HostScratchArena&) = delete;

  // Error(OutOfMemory) beyond max_size or when the address space cannot be had.
  char* memory(size_t bytes);
  // The address space held now (readable and writable; pages are backed when first touched).
  size_t committed() const noexcept { return capacity_; }

 private:
  size_t max_size_;
  char* base_ = nullptr;  // nothing held before first use
  size_t capacity_ = 0;
};

}  // namespace tessera
