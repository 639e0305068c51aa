#pragma once
// Hashes that are the same on every platform and standard library (std::hash is not): a string hash
// for seeds that must reproduce across machines, and XXH64 for checksums of large byte streams.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// XXH64 (seed 0) over bytes given in any number of pieces: the published algorithm (xxhsum -H64
// prints the same digest), 32 bytes per step in four independent lanes, so a checksum of gigabytes
// costs a fraction of the time to read them. Any change confined to one 8-byte word changes the
// digest (each step is a bijection of its lane).
class Xxh64 {
 public:
  void update(const void* data, size_t n) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    if (buffered_ > 0) {
      const size_t take = n < 32 - buffered_ ? n : 32 - buffered_;
      std::memcpy(buf_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 32) return;
      stripe(buf_);
      buffered_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(p);
    std::memcpy(buf_, p, n);
    buffered_ = n;
  }

  uint64_t digest() const noexcept {
    uint64_t h;
    if (total_ >= 32) {
      h = std::rotl(v_[0], 1) + std::rotl(v_[1], 7) + std::rotl(v_[2], 12) + std::rotl(v_[3], 18);
      for (const uint64_t v : v_) h = (h ^ round(0, v)) * kP1 + kP4;
    } else {
      h = kP5;
    }
    h += total_;
    const unsigned char* p = buf_;
    size_t n = buffered_;
    for (; n >= 8; p += 8, n -= 8) h = std::rotl(h ^ round(0, read64(p)), 27) * kP1 + kP4;
    if (n >= 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      h = std::rotl(h ^ (uint64_t{w} * kP1), 23) * kP2 + kP3;
      p += 4;
      n -= 4;
    }
    for (; n > 0; ++p, --n) h = std::rotl(h ^ (*p * kP5), 11) * kP1;
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

 private:
  static_assert(std::endian::native == std::endian::little, "XXH64 reads little-endian words");
  static constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full,
                            kP3 = 0x165667B19E3779F9ull, kP4 = 0x85EBCA77C2B2AE63ull,
                            kP5 = 0x27D4EB2F165667C5ull;
  static uint64_t read64(const unsigned char* p) noexcept {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  static uint64_t round(uint64_t acc, uint64_t w) noexcept { return std::rotl(acc + w * kP2, 31) * kP1; }
  void stripe(const unsigned char* p) noexcept {
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(p + 8 * i));
  }

  uint64_t v_[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  unsigned char buf_[32] = {};
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

}  // namespace tessera
