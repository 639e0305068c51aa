#include "device/pool.h"

#include <algorithm>

#include "core/check.h"

namespace tessera::device {
namespace {

constexpr size_t kBlockRounding = 256;

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

// ---------------------------------------------------------------- best fit

BestFitPool::BestFitPool(RawAllocator raw) : raw_(std::move(raw)) {
  TESSERA_ASSERT(raw_.allocate && raw_.free);
}

BestFitPool::~BestFitPool() {
  std::lock_guard lock(mutex_);
  release_cache_locked();
  // Blocks still handed out belong to scratch that outlived its pool: free them too.
  for (auto& [ptr, size] : active_) raw_.free(ptr);
}

size_t BestFitPool::block_size(size_t size) noexcept {
  return round_up(size + size / 20, kBlockRounding);  // ~5% headroom for slightly larger repeats
}

void* BestFitPool::allocate(size_t size) {
  TESSERA_ASSERT(size > 0);
  std::unique_lock lock(mutex_);
  auto it = cached_.find(size);                             // exact fit first
  if (it == cached_.end()) it = cached_.lower_bound(size);  // else the smallest that fits
  if (it != cached_.end()) {
    const size_t bytes = it->first;
    void* ptr = it->second;
    cached_.erase(it);
    active_.emplace(ptr, bytes);
    stats_.cached -= bytes;
    stats_.active += bytes;
    stats_.peak = std::max(stats_.peak, stats_.active);
    ++stats_.reuses;
    return ptr;
  }
  const size_t bytes = block_size(size);
  void* ptr = nullptr;
  try {
    ptr = raw_.allocate(bytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::OutOfMemory || cached_.empty()) throw;
    // Cached blocks may be what the device lacks: give them back and try once more.
    release_cache_locked();
    ++stats_.retries;
    ptr = raw_.allocate(bytes);
  }
  active_.emplace(ptr, bytes);
  stats_.active += bytes;
  stats_.peak = std::max(stats_.peak, stats_.active);
  ++stats_.allocations;
  return ptr;
}

void BestFitPool::release(void* ptr, size_t /*size*/) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = active_.find(ptr);
  TESSERA_ASSERT(it != active_.end());
  const size_t bytes = it->second;
  active_.erase(it);
  cached_.emplace(bytes, ptr);
  stats_.active -= bytes;
  stats_.cached += bytes;
}

PoolStats BestFitPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void BestFitPool::release_cache() noexcept {
  std::lock_guard lock(mutex_);
  release_cache_locked();
}

void BestFitPool::release_cache_locked() noexcept {
  for (auto& [bytes, ptr] : cached_) raw_.free(ptr);
  cached_.clear();
  stats_.cached = 0;
}

// ---------------------------------------------------------------- virtual memory

VmmPool::VmmPool(VirtualMemory& vm, size_t max_size, size_t alignment)
    : vm_(&vm), max_size_(round_up(max_size, vm.granularity())), alignment_(alignment) {
  TESSERA_ASSERT(vm.granularity() > 0 && alignment > 0);
}

VmmPool::~VmmPool() {
  if (base_ == nullptr) return;
  if (mapped_ > 0) vm_->unmap(base_, mapped_);
  chunks_.clear();
  vm_->release(base_, max_size_);
}

void* VmmPool::allocate(size_t size) {
  TESSERA_ASSERT(size > 0);
  std::lock_guard lock(mutex_);
  const size_t bytes = round_up(size, alignment_);
  if (bytes > max_size_ - used_)
    raise(ErrorCode::OutOfMemory,
          "VMM pool: {:.1f} MiB requested with {:.1f} MiB in use exceeds the reserved {:.1f} MiB", mib(size),
          mib(used_), mib(max_size_));
  if (base_ == nullptr) base_ = static_cast<char*>(vm_->reserve(max_size_));
  if (used_ + bytes > mapped_) {
    // Grow by whole granularity chunks, mapped right after what is mapped already.
    const size_t grow = round_up(used_ + bytes - mapped_, vm_->granularity());
    auto chunk = vm_->create_physical(grow);
    vm_->map(base_ + mapped_, *chunk);
    chunks_.push_back(std::move(chunk));
    mapped_ += grow;
    ++stats_.allocations;
  } else {
    ++stats_.reuses;
  }
  void* ptr = base_ + used_;
  stack_.emplace_back(used_, bytes);
  used_ += bytes;
  stats_.active = used_;
  stats_.peak = std::max(stats_.peak, used_);
  stats_.cached = mapped_ - used_;
  return ptr;
}

void VmmPool::release(void* ptr, size_t size) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  // Scratch scopes nest, so the last allocation is the one released.
  TESSERA_ASSERT(!stack_.empty());
  const auto [offset, bytes] = stack_.back();
  TESSERA_ASSERT(static_cast<char*>(ptr) == base_ + offset && round_up(size, alignment_) == bytes);
  stack_.pop_back();
  used_ = offset;
  stats_.active = used_;
  stats_.cached = mapped_ - used_;
}

PoolStats VmmPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

size_t VmmPool::mapped() const {
  std::lock_guard lock(mutex_);
  return mapped_;
}

// ---------------------------------------------------------------- scratch handle

Scratch::Scratch(ScratchPool& pool, size_t size) : pool_(&pool), size_(size) {
  ptr_ = size > 0 ? pool.allocate(size) : nullptr;
}

Scratch::Scratch(Scratch&& other) noexcept : pool_(other.pool_), ptr_(other.ptr_), size_(other.size_) {
  other.pool_ = nullptr;
  other.ptr_ = nullptr;
  other.size_ = 0;
}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = other.pool_;
    ptr_ = other.ptr_;
    size_ = other.size_;
    other.pool_ = nullptr;
    other.ptr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void Scratch::reset() noexcept {
  if (pool_ != nullptr && ptr_ != nullptr) pool_->release(ptr_, size_);
  pool_ = nullptr;
  ptr_ = nullptr;
  size_ = 0;
}

std::unique_ptr<ScratchPool> make_device_pool(Runtime& runtime, int device) {
  if (VirtualMemory* vm = runtime.virtual_memory(device)) {
    const auto& p = runtime.properties(device);
    return std::make_unique<VmmPool>(*vm, p.total_memory, std::max<size_t>(128, p.base_alignment));
  }
  RawAllocator raw;
  raw.allocate = [&runtime, device](size_t size) { return runtime.allocate(device, size); };
  raw.free = [&runtime, device](void* p) { runtime.free(device, p); };
  return std::make_unique<BestFitPool>(std::move(raw));
}

}  // namespace tessera::device
