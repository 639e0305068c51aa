#include "backend/host_vmm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace tessera {
namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

size_t host_page_size() noexcept { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

void* host_reserve(size_t size) {
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    raise(ErrorCode::OutOfMemory, "host VMM: cannot reserve {:.1f} MiB of address space: {}", mib(size),
          std::strerror(errno));
  return p;
}

void host_release(void* base, size_t size) noexcept { munmap(base, size); }

void host_commit(void* addr, size_t size) {
  if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0)
    raise(ErrorCode::OutOfMemory, "host VMM: cannot commit {:.1f} MiB: {}", mib(size), std::strerror(errno));
}

void host_decommit(void* addr, size_t size) noexcept {
  // Drop the pages (so the memory really returns) and make the range inaccessible again.
  madvise(addr, size, MADV_DONTNEED);
  mprotect(addr, size, PROT_NONE);
}

HostScratchArena::HostScratchArena(size_t max_size) : max_size_(round_up(max_size, host_page_size())) {}

HostScratchArena::~HostScratchArena() {
  if (base_ != nullptr) host_release(base_, capacity_);
}

char* HostScratchArena::memory(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > max_size_)
    raise(ErrorCode::OutOfMemory, "host scratch: {:.1f} MiB requested exceeds the limit of {:.1f} MiB",
          mib(bytes), mib(max_size_));
  if (bytes <= capacity_) return base_;
  // At least double, so a graph whose needs creep up grows O(log) times; never past the limit.
  const size_t want = std::min(max_size_, std::max(round_up(bytes, host_page_size()), 2 * capacity_));
  // The old range goes first (its contents need not survive), so the peak is the new size alone.
  if (base_ != nullptr) host_release(base_, capacity_);
  base_ = nullptr;
  capacity_ = 0;
  char* fresh = static_cast<char*>(host_reserve(want));
  try {
    host_commit(fresh, want);
  } catch (...) {
    host_release(fresh, want);
    throw;
  }
  base_ = fresh;
  capacity_ = want;
  return base_;
}

}  // namespace tessera
