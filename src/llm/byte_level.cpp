// The byte <-> character tables of GPT-2's byte-level alphabet, built once.
#include "llm/byte_level.h"

#include <array>

namespace tessera::llm::byte_level {

namespace {

// Bytes that print as themselves: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF.
bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

constexpr char32_t kLastChar = 0x100 + 68;  // 188 bytes stand for themselves, 68 move up

struct Tables {
  std::array<char32_t, 256> char_of{};
  std::array<std::array<char, 2>, 256> utf8{};
  std::array<uint8_t, 256> utf8_size{};
  std::array<int16_t, kLastChar> byte_of{};  // -1: not in the alphabet

  Tables() {
    byte_of.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = stands_for_itself(b) ? char32_t(b) : next++;
      char_of[size_t(b)] = c;
      byte_of[size_t(c)] = int16_t(b);
      if (c < 0x80) {
        utf8[size_t(b)] = {char(c), 0};
        utf8_size[size_t(b)] = 1;
      } else {
        utf8[size_t(b)] = {char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))};
        utf8_size[size_t(b)] = 2;
      }
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t char_for_byte(uint8_t b) { return tables().char_of[b]; }

std::string_view utf8_for_byte(uint8_t b) {
  const Tables& t = tables();
  return {t.utf8[b].data(), t.utf8_size[b]};
}

void append_encoded(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (const char c : bytes) {
    const auto b = uint8_t(c);
    out.append(t.utf8[b].data(), t.utf8_size[b]);
  }
}

void append_decoded(std::string_view text, std::string& out) {
  const Tables& t = tables();
  for (size_t i = 0; i < text.size();) {
    const auto lead = uint8_t(text[i]);
    // The alphabet lies below U+0800: one- and two-byte sequences only.
    if (lead < 0x80) {
      const int16_t b = t.byte_of[lead];
      out += b >= 0 ? char(b) : char(lead);
      ++i;
      continue;
    }
    if ((lead & 0xE0) == 0xC0 && i + 1 < text.size() && (uint8_t(text[i + 1]) & 0xC0) == 0x80) {
      const char32_t c = char32_t(lead & 0x1F) << 6 | char32_t(uint8_t(text[i + 1]) & 0x3F);
      const int16_t b = c < kLastChar ? t.byte_of[c] : int16_t(-1);
      if (b >= 0) {
        out += char(b);
      } else {
        out.append(text.substr(i, 2));
      }
      i += 2;
      continue;
    }
    out += text[i++];  // a longer character or invalid UTF-8: copied byte by byte
  }
}

}  // namespace tessera::llm::byte_level
