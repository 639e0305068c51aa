#pragma once
// Byte-level BPE merges: (left id, right id) -> (rank, merged id), as one flat open-addressing
// table sized once (hundreds of thousands of merges load without an allocation each).
#include <bit>
#include <cstdint>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

struct BpeMerge {
  int32_t rank;  // lower merges first
  Token result;
};

class MergeTable {
 public:
  void reserve(size_t n) {
    slots_.assign(std::bit_ceil(n + n / 2 + 2), Slot{});
    mask_ = slots_.size() - 1;  // (a load factor of at most 2/3)
  }

  // Adds the pair unless it is already there (a repeated merge keeps its first, lower rank).
  // reserve() must have room for it.
  void try_add(Token left, Token right, BpeMerge merge) {
    const uint64_t k = key(left, right);
    for (size_t s = mix(k) & mask_;; s = (s + 1) & mask_) {
      Slot& slot = slots_[s];
      if (slot.merge.result == kNoToken) {
        slot = {k, merge};
        ++size_;
        return;
      }
      if (slot.key == k) return;
    }
  }

  const BpeMerge* find(Token left, Token right) const noexcept {
    if (slots_.empty()) return nullptr;
    const uint64_t k = key(left, right);
    for (size_t s = mix(k) & mask_;; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.merge.result == kNoToken) return nullptr;
      if (slot.key == k) return &slot.merge;
    }
  }

  size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    BpeMerge merge{0, kNoToken};  // result kNoToken: empty
  };
  static uint64_t key(Token left, Token right) { return uint64_t(uint32_t(left)) << 32 | uint32_t(right); }
  // A 64-bit finalizer (splitmix64's), so that ids differing in a few bits spread over the table.
  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace tessera::llm
