#pragma once
// Memory pools for op scratch (one per device queue) and staging, taken through RAII Scratch
// handles. Work on one in-order stream may free scratch as soon as it is enqueued: the next
// user of the same block is enqueued after it.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/runtime.h"

namespace tessera::device {

struct PoolStats {
  size_t active = 0;       // bytes handed out now
  size_t peak = 0;         // highest `active` seen
  size_t cached = 0;       // bytes held but free (best fit: cached blocks; VMM: mapped, unused)
  size_t allocations = 0;  // raw allocations (best fit) or physical chunks mapped (VMM)
  size_t reuses = 0;       // requests served from the cache
  size_t retries = 0;      // raw allocations retried after releasing the cache
};

class ScratchPool {
 public:
  virtual ~ScratchPool() = default;
  // At least `size` bytes (size > 0); throws Error(OutOfMemory).
  virtual void* allocate(size_t size) = 0;
  // Gives back what allocate(size) returned.
  virtual void release(void* ptr, size_t size) noexcept = 0;
  virtual PoolStats stats() const = 0;
};

// Where a best-fit pool gets its blocks: allocate throws Error(OutOfMemory) on failure.
struct RawAllocator {
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> free;
};

// Caches freed blocks and hands out the smallest cached block that fits (an exact fit first).
// New blocks get ~5% headroom, rounded to 256 bytes. No cap on the cache: when a raw allocation
// fails, the cache is released and the allocation retried once.
class BestFitPool final : public ScratchPool {
 public:
  explicit BestFitPool(RawAllocator raw);
  ~BestFitPool() override;
  void* allocate(size_t size) override;
  void release(void* ptr, size_t size) noexcept override;
  PoolStats stats() const override;
  // Frees every cached block.
  void release_cache() noexcept;
  // The raw block size a request of `size` bytes creates.
  static size_t block_size(size_t size) noexcept;

 private:
  void release_cache_locked() noexcept;
  RawAllocator raw_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cached_;       // size -> block
  std::unordered_map<void*, size_t> active_;  // block -> size
  PoolStats stats_;
};

// Reserves one large address range at first use and maps physical memory in granularity chunks
// as it grows; allocations form a stack (released in reverse order, as RAII scopes do).
class VmmPool final : public ScratchPool {
 public:
  VmmPool(VirtualMemory& vm, size_t max_size, size_t alignment = 128);
  ~VmmPool() override;
  void* allocate(size_t size) override;
  void release(void* ptr, size_t size) noexcept override;
  PoolStats stats() const override;
  size_t mapped() const;
  void* base() const { return base_; }

 private:
  VirtualMemory* vm_;
  size_t max_size_;
  size_t alignment_;
  mutable std::mutex mutex_;
  char* base_ = nullptr;
  size_t mapped_ = 0;
  size_t used_ = 0;
  std::vector<std::pair<size_t, size_t>> stack_;  // (offset, rounded size) of live allocations
  std::vector<std::unique_ptr<PhysicalMemory>> chunks_;
  PoolStats stats_;
};

// A scoped piece of pool memory (released when it goes out of scope).
class Scratch {
 public:
  Scratch() = default;
  Scratch(ScratchPool& pool, size_t size);
  ~Scratch() { reset(); }
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&& other) noexcept;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  void* data() const noexcept { return ptr_; }
  size_t size() const noexcept { return size_; }
  char* bytes() const noexcept { return static_cast<char*>(ptr_); }
  void reset() noexcept;

 private:
  ScratchPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// A pool over the runtime's virtual memory when it has some, else a best-fit pool.
std::unique_ptr<ScratchPool> make_device_pool(Runtime& runtime, int device);

}  // namespace tessera::device
