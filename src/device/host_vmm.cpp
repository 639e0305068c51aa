#include "device/host_vmm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace tessera::device {
namespace {

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

HostVirtualMemory::HostVirtualMemory(size_t granularity)
    : granularity_(granularity == 0 ? page_size() : granularity) {
  TESSERA_ASSERT(granularity_ % page_size() == 0);
}

void* HostVirtualMemory::reserve(size_t size) {
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    raise(ErrorCode::OutOfMemory, "host VMM: cannot reserve {:.1f} MiB of address space: {}", mib(size),
          std::strerror(errno));
  return p;
}

void HostVirtualMemory::release(void* base, size_t size) noexcept { munmap(base, size); }

std::unique_ptr<PhysicalMemory> HostVirtualMemory::create_physical(size_t size) {
  // Host pages come into being when committed; the handle only records the size.
  TESSERA_ASSERT(size % granularity_ == 0);
  return std::make_unique<PhysicalMemory>(size);
}

void HostVirtualMemory::map(void* addr, PhysicalMemory& memory) {
  if (mprotect(addr, memory.size(), PROT_READ | PROT_WRITE) != 0)
    raise(ErrorCode::OutOfMemory, "host VMM: cannot commit {:.1f} MiB: {}", mib(memory.size()),
          std::strerror(errno));
}

void HostVirtualMemory::unmap(void* addr, size_t size) noexcept {
  // Drop the pages (so the memory really returns) and make the range inaccessible again.
  madvise(addr, size, MADV_DONTNEED);
  mprotect(addr, size, PROT_NONE);
}

HostScratchArena::HostScratchArena(size_t max_size) : pool_(std::make_unique<VmmPool>(vm_, max_size, 64)) {}

HostScratchArena::~HostScratchArena() { current_.reset(); }

char* HostScratchArena::memory(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (current_.size() < bytes) {
    current_.reset();  // the stack is empty again, so the new block starts at the same address
    current_ = Scratch(*pool_, bytes);
  }
  return current_.bytes();
}

}  // namespace tessera::device
