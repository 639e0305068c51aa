#pragma once
// Token text -> id, as one flat open-addressing table of ids (the texts stay in the vocabulary's
// own vector, whose buffer must outlive the index and not reallocate; moving the vector is fine). Loading a
// 128K-token vocabulary with 280K merges looks texts up ~1M times; node-based maps spend most of that in
// cache misses and allocations.
#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/llm/vocab.h"

namespace tessera::llm {

class TextIndex {
 public:
  // Indexes texts[0..n); when texts repeat, the last id wins (as llama.cpp's map does).
  void build(const std::vector<std::string>& texts) {
    texts_ = texts.data();
    const size_t capacity = std::bit_ceil(texts.size() * 2 + 2);
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{0, kNoToken});
    for (size_t i = 0; i < texts.size(); ++i) {
      const uint64_t h = hash(texts[i]);
      for (size_t s = h & mask_;; s = (s + 1) & mask_) {
        Slot& slot = slots_[s];
        if (slot.id == kNoToken) {
          slot = {tag(h), Token(i)};
          break;
        }
        if (slot.tag == tag(h) && texts[size_t(slot.id)] == texts[i]) {
          slot.id = Token(i);
          break;
        }
      }
    }
  }

  Token find(std::string_view text) const noexcept {
    if (slots_.empty()) return kNoToken;
    const uint64_t h = hash(text);
    for (size_t s = h & mask_;; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.id == kNoToken) return kNoToken;
      if (slot.tag == tag(h) && texts_[size_t(slot.id)] == text) return slot.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high bits of the hash: most mismatches fail without touching the text
    Token id;
  };
  static uint64_t hash(std::string_view s) noexcept { return std::hash<std::string_view>{}(s); }
  static uint32_t tag(uint64_t h) noexcept { return uint32_t(h >> 32); }

  const std::string* texts_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace tessera::llm
