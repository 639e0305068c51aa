#pragma once
// A string hash that is the same on every platform and standard library (std::hash is not), for
// seeds that must reproduce across machines.
#include <cstdint>
#include <string_view>

namespace tessera {

// 64-bit FNV-1a.
constexpr uint64_t stable_hash(std::string_view s) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace tessera
