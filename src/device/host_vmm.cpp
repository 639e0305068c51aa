#include "device/host_vmm.h"

#include "backend/host_vmm.h"
#include "core/check.h"

namespace tessera::device {

HostVirtualMemory::HostVirtualMemory(size_t granularity)
    : granularity_(granularity == 0 ? host_page_size() : granularity) {
  TESSERA_ASSERT(granularity_ % host_page_size() == 0);
}

void* HostVirtualMemory::reserve(size_t size) { return host_reserve(size); }

void HostVirtualMemory::release(void* base, size_t size) noexcept { host_release(base, size); }

std::unique_ptr<PhysicalMemory> HostVirtualMemory::create_physical(size_t size) {
  // Host pages come into being when committed; the handle only records the size.
  TESSERA_ASSERT(size % granularity_ == 0);
  return std::make_unique<PhysicalMemory>(size);
}

void HostVirtualMemory::map(void* addr, PhysicalMemory& memory) { host_commit(addr, memory.size()); }

void HostVirtualMemory::unmap(void* addr, size_t size) noexcept { host_decommit(addr, size); }

}  // namespace tessera::device
